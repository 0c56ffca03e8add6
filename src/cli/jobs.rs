//! `saltsight jobs`: one line per job from the history on the master, newest
//! first: what ran, by whom, on how many minions, and how many returned,
//! failed or never answered.

use std::io::Write;

use clap::Args;

use super::present::{QueryArgs, Style, Table, Tone, open_history, parse_since, print_json, when};
use super::{Failure, Outcome};
use crate::config::Config;
use crate::config::glob::Glob;
use crate::history::query::{JobFilter, jobs};

#[derive(Debug, Args)]
pub struct JobsArgs {
    /// Jobs since then: a duration back (1h, 2d) or a time (2026-11-24T03:00:00Z)
    #[arg(long, default_value = "1d")]
    pub since: String,
    /// Only jobs with a failed return or a missing minion
    #[arg(long)]
    pub failed: bool,
    /// Only functions matching this glob (state.*)
    #[arg(long = "fun", value_name = "GLOB")]
    pub fun: Option<String>,
    /// Only jobs published by this user
    #[arg(long)]
    pub user: Option<String>,
    #[command(flatten)]
    pub query: QueryArgs,
}

pub fn run(args: &JobsArgs, config: &Config, out: &mut dyn Write) -> Result<Outcome, Failure> {
    let since = parse_since(&args.since).map_err(|e| Failure::new(super::exit::USAGE, e))?;
    let store = open_history(config)?;
    let filter = JobFilter {
        since: Some(since),
        failed_only: args.failed,
        fun: args.fun.as_deref().map(Glob::new),
        user: args.user.clone(),
    };
    let lines = jobs(&store, &filter).map_err(|e| Failure::runtime(e.to_string()))?;
    let written = if args.query.json {
        print_json(&lines, out)
    } else {
        let style = Style::for_stdout();
        let mut t = Table::new(&[
            "JID",
            "PUBLISHED",
            "FUNCTION",
            "USER",
            "TARGET",
            "EXPECTED",
            "RETURNED",
            "FAILED",
            "MISSING",
        ]);
        for l in &lines {
            let count = |n: u64, tone: Tone| {
                if n > 0 {
                    style.paint(tone, &n.to_string())
                } else {
                    n.to_string()
                }
            };
            t.row(vec![
                l.jid.clone(),
                when(&l.at),
                l.fun.clone(),
                l.user.clone(),
                super::present::cut(&l.target, 30),
                l.expected.to_string(),
                if l.open {
                    style.paint(Tone::Warn, &format!("{} (running)", l.returned))
                } else {
                    l.returned.to_string()
                },
                count(l.failed, Tone::Bad),
                count(l.missing, Tone::Warn),
            ]);
        }
        if t.is_empty() {
            writeln!(out, "No jobs since {}.", when(&since.to_string()))
        } else {
            t.write(style, out)
        }
    };
    written.map_err(|e| Failure::runtime(format!("writing the answer: {e}")))?;
    Ok(Outcome::Ok)
}

impl super::Action for JobsArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.query.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, Failure> {
        super::answer(&overrides, |config, out| run(&self, config, out))
    }
}
