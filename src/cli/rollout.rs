//! `saltsight rollout COMMIT`: one commit's way to the fleet, from the
//! history: its life (seen, the fleet's share at 50/95/100% and the release
//! delay), the pull request it came from, the failed minions with each one's
//! root cause, the pending minions with why each has not applied it, and what
//! superseded it.

use std::io::Write;

use clap::Args;

use super::present::{QueryArgs, Style, Table, Tone, cut, open_history, print_json, when};
use super::{Failure, Outcome, exit};
use crate::config::Config;
use crate::history::rollout::{Found, RolloutView, Wanted, rollout};
use crate::record::{Delays, RolloutStatus};

#[derive(Debug, Args)]
pub struct RolloutArgs {
    /// The commit: any unique prefix of its id, or HEAD (the newest seen)
    pub commit: String,
    /// Only this state tree's (its name, as check-config lists it)
    #[arg(long)]
    pub repo: Option<String>,
    #[command(flatten)]
    pub query: QueryArgs,
}

/// `4m05s / 12m / -`: the release delay to 50, 95 and 100%.
pub fn delays(d: &Delays) -> String {
    let say = |s: Option<f64>| {
        s.map_or_else(
            || "-".to_owned(),
            |s| crate::plain::duration_ms((s.max(0.0) * 1e3) as u64),
        )
    };
    format!("{} / {} / {}", say(d.p50_s), say(d.p95_s), say(d.p100_s))
}

pub fn run(args: &RolloutArgs, config: &Config, out: &mut dyn Write) -> Result<Outcome, Failure> {
    let wanted = Wanted::parse(&args.commit);
    if let Wanted::Prefix(prefix) = wanted {
        if prefix.len() < 4 || !prefix.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(Failure::new(
                exit::USAGE,
                format!("{prefix:?} is not a commit: give HEAD, or 4 or more hex digits of its id"),
            ));
        }
    }
    let store = open_history(config)?;
    let view = match rollout(&store, wanted, args.repo.as_deref())
        .map_err(|e| Failure::runtime(e.to_string()))?
    {
        Found::One(view) => view,
        Found::None => {
            return Err(Failure::new(
                exit::NOT_FOUND,
                format!(
                    "no rollout of {} in the history ({}; saltsight rollouts lists them)",
                    args.commit,
                    store.path().display()
                ),
            ));
        }
        Found::Several(commits) => {
            return Err(Failure::new(
                exit::USAGE,
                format!(
                    "{} names {} rollouts; give more of the id:\n  {}",
                    args.commit,
                    commits.len(),
                    commits.join("\n  ")
                ),
            ));
        }
    };
    let written = if args.query.json {
        print_json(&view, out)
    } else {
        write_view(&view, Style::for_stdout(), out)
    };
    written.map_err(|e| Failure::runtime(format!("writing the answer: {e}")))?;
    Ok(Outcome::Ok)
}

fn write_view(view: &RolloutView, style: Style, out: &mut dyn Write) -> std::io::Result<()> {
    let r = &view.rollout;
    let tone = match r.status {
        RolloutStatus::Complete => Tone::Good,
        RolloutStatus::Stalled => Tone::Bad,
        _ => Tone::Warn,
    };
    writeln!(out, "Commit {} ({}): {}", r.commit, r.repo, r.subject)?;
    if let Some(pr) = &r.pull_request {
        match &pr.url {
            Some(url) => writeln!(out, "  from {} {url}", pr.label())?,
            None => writeln!(out, "  from {}", pr.label())?,
        }
    }
    let committed = r
        .committed_at
        .map_or_else(|| "-".to_owned(), |t| when(&t.to_string()));
    let seen = if r.seen_move {
        "HEAD moved"
    } else {
        "first read"
    };
    writeln!(
        out,
        "  committed {committed}; {seen} {}",
        when(&r.seen_at.to_string())
    )?;
    let status = match &r.superseded_by {
        Some(by) => format!("{} by {}", r.status, by.get(..10).unwrap_or(by)),
        None => r.status.to_string(),
    };
    writeln!(
        out,
        "  {}: applied {}/{}, failed {}, pending {}",
        style.paint(tone, &status),
        r.applied,
        r.known,
        r.failed,
        r.pending
    )?;
    if !r.changed_sls.is_empty() {
        writeln!(out, "  changed SLS: {}", r.changed_sls.join(", "))?;
    }
    let reached = |at: Option<crate::time::Stamp>| {
        at.map_or_else(|| "-".to_owned(), |t| when(&t.to_string()))
    };
    writeln!(
        out,
        "  reached 50% {}, 95% {}, 100% {}",
        reached(r.reached_50),
        reached(r.reached_95),
        reached(r.reached_100)
    )?;
    writeln!(
        out,
        "  release delay 50/95/100%: {} from the commit, {} from the HEAD move",
        delays(&r.delay_from_commit),
        delays(&r.delay_from_seen)
    )?;
    if !view.failed_minions.is_empty() {
        writeln!(
            out,
            "\nFailed ({} listed of {}):",
            view.failed_minions.len(),
            r.failed
        )?;
        let mut t = Table::new(&["MINION", "ROOT CAUSE", "CATEGORY", "COMMENT", "JOB"]);
        for f in &view.failed_minions {
            t.row(vec![
                f.minion.clone(),
                f.state.clone().unwrap_or_else(|| "-".into()),
                f.category.clone().unwrap_or_else(|| "-".into()),
                cut(f.comment.as_deref().unwrap_or(""), 60),
                f.jid.clone(),
            ]);
        }
        t.write(style, out)?;
    }
    if !view.pending_minions.is_empty() {
        writeln!(
            out,
            "\nPending ({} listed of {}):",
            view.pending_minions.len(),
            r.pending
        )?;
        let mut t = Table::new(&["MINION", "WHY", "DETAIL", "JOB", "LAST STATE RUN"]);
        for p in &view.pending_minions {
            t.row(vec![
                p.minion.clone(),
                p.why.to_string(),
                p.detail.clone(),
                p.jid.clone().unwrap_or_else(|| "-".into()),
                p.last_state_run
                    .map_or_else(|| "never".into(), |t| when(&t.to_string())),
            ]);
        }
        t.write(style, out)?;
    }
    Ok(())
}

impl super::Action for RolloutArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.query.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, Failure> {
        super::answer(&overrides, |config, out| run(&self, config, out))
    }
}
