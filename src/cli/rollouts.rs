//! `saltsight rollouts`: each commit of each watched state tree on its way to
//! the fleet, newest first, from the history: status, where the fleet stands,
//! and the release delay to half, 95% and all of it.

use std::io::Write;

use clap::Args;

use super::present::{
    QueryArgs, Style, Table, Tone, cut, open_history, parse_since, print_json, when,
};
use super::rollout::delays;
use super::{Failure, Outcome, exit};
use crate::config::Config;
use crate::history::status::rollouts;
use crate::record::RolloutStatus;

#[derive(Debug, Args)]
pub struct RolloutsArgs {
    /// Commits seen since then: a duration back (1d, 30d) or a time
    #[arg(long, default_value = "7d")]
    pub since: String,
    /// Only this state tree's (its name, as check-config lists it)
    #[arg(long)]
    pub repo: Option<String>,
    #[command(flatten)]
    pub query: QueryArgs,
}

pub fn run(args: &RolloutsArgs, config: &Config, out: &mut dyn Write) -> Result<Outcome, Failure> {
    let since = parse_since(&args.since).map_err(|e| Failure::new(exit::USAGE, e))?;
    let store = open_history(config)?;
    let found = rollouts(&store, since, args.repo.as_deref())
        .map_err(|e| Failure::runtime(e.to_string()))?;
    let written = if args.query.json {
        print_json(&found, out)
    } else {
        let style = Style::for_stdout();
        let mut t = Table::new(&[
            "REPO",
            "COMMIT",
            "SUBJECT",
            "PR",
            "COMMITTED",
            "STATUS",
            "APPLIED",
            "FAILED",
            "PENDING",
            "DELAY 50/95/100% FROM COMMIT",
            "FROM HEAD MOVE",
        ]);
        for r in &found {
            let tone = match r.status {
                RolloutStatus::Complete => Tone::Good,
                RolloutStatus::Stalled => Tone::Bad,
                RolloutStatus::Superseded if r.pending > 0 || r.failed > 0 => Tone::Warn,
                _ => Tone::Dim,
            };
            let status = match &r.superseded_by {
                Some(by) => format!("{} by {}", r.status, by.get(..10).unwrap_or(by)),
                None => r.status.to_string(),
            };
            t.row(vec![
                r.repo.clone(),
                r.commit.get(..10).unwrap_or(&r.commit).to_owned(),
                cut(&r.subject, 50),
                r.pull_request
                    .as_ref()
                    .map(|p| p.label())
                    .unwrap_or_default(),
                r.committed_at
                    .map(|t| when(&t.to_string()))
                    .unwrap_or_default(),
                style.paint(tone, &status),
                format!("{}/{}", r.applied, r.known),
                r.failed.to_string(),
                r.pending.to_string(),
                delays(&r.delay_from_commit),
                delays(&r.delay_from_seen),
            ]);
        }
        if t.is_empty() {
            writeln!(
                out,
                "No rollouts since {} (is a state tree watched? check-config says).",
                when(&since.to_string())
            )
        } else {
            t.write(style, out)
        }
    };
    written.map_err(|e| Failure::runtime(format!("writing the answer: {e}")))?;
    Ok(Outcome::Ok)
}

impl super::Action for RolloutsArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.query.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, Failure> {
        super::answer(&overrides, |config, out| run(&self, config, out))
    }
}
