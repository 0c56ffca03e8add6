//! `saltsight drift`: the states that drifted from the commit their minion
//! had applied (put back by a run, or seen by a `test=True` run), newest
//! first, and the states that never settle (not drift), from the history.

use std::io::Write;

use clap::Args;

use super::present::{
    QueryArgs, Style, Table, Tone, cut, open_history, parse_since, print_json, when,
};
use super::{Failure, Outcome};
use crate::config::Config;
use crate::history::drift::{DriftFilter, drift};

#[derive(Debug, Args)]
pub struct DriftArgs {
    /// Drift since then: a duration back (1h, 7d) or a time (2026-11-24T03:00:00Z)
    #[arg(long, default_value = "7d")]
    pub since: String,
    /// Only this minion's
    #[arg(long)]
    pub minion: Option<String>,
    /// Only this SLS's (and the SLS under it: `web` is `web` and `web.nginx`)
    #[arg(long)]
    pub sls: Option<String>,
    #[command(flatten)]
    pub query: QueryArgs,
}

pub fn run(args: &DriftArgs, config: &Config, out: &mut dyn Write) -> Result<Outcome, Failure> {
    let since = parse_since(&args.since).map_err(|e| Failure::new(super::exit::USAGE, e))?;
    let filter = DriftFilter {
        since: Some(since),
        minion: args.minion.clone(),
        sls: args.sls.clone(),
    };
    let store = open_history(config)?;
    let answer = drift(&store, &filter).map_err(|e| Failure::runtime(e.to_string()))?;
    let written = if args.query.json {
        print_json(&answer, out)
    } else {
        let style = Style::for_stdout();
        let mut t = Table::new(&[
            "WHEN",
            "MINION",
            "CHANGE",
            "STATE",
            "JOB",
            "COMMIT",
            "WHAT CHANGED",
        ]);
        for l in &answer.drifted {
            let tone = if l.change == "detected" {
                Tone::Warn
            } else {
                Tone::Bad
            };
            t.row(vec![
                when(&l.at),
                l.minion.clone(),
                style.paint(tone, &l.change),
                format!("{}:{} {}", l.sls, l.state_id, l.function),
                l.jid.clone(),
                l.commit.get(..10).unwrap_or(&l.commit).to_owned(),
                cut(summary_line(&l.summary, &l.name), 70),
            ]);
        }
        let written = if t.is_empty() {
            writeln!(out, "No drift since {}.", when(&since.to_string()))
        } else {
            t.write(style, out)
        };
        written.and_then(|()| {
            if answer.never_settles.is_empty() {
                return Ok(());
            }
            writeln!(
                out,
                "\n{}",
                style.paint(
                    Tone::Bold,
                    "States that never settle (their changes are not drift)"
                )
            )?;
            for n in &answer.never_settles {
                writeln!(
                    out,
                    "  {}:{} {}  since {}, {} minion(s): {}",
                    n.sls,
                    n.state_id,
                    n.function,
                    when(&n.since),
                    n.minions,
                    n.hint
                )?;
            }
            Ok(())
        })
    };
    written.map_err(|e| Failure::runtime(format!("writing the answer: {e}")))?;
    Ok(Outcome::Ok)
}

/// The line of a change's summary that says the most: a diff's first `-` or
/// `+` line, else its first line, else the state's name.
pub fn summary_line<'a>(summary: &'a str, name: &'a str) -> &'a str {
    summary
        .lines()
        .find(|l| {
            (l.starts_with('-') && !l.starts_with("---"))
                || (l.starts_with('+') && !l.starts_with("+++"))
        })
        .or_else(|| summary.lines().next())
        .unwrap_or(name)
}


impl super::Action for DriftArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.query.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, Failure> {
        super::answer(&overrides, |config, out| run(&self, config, out))
    }
}

#[cfg(test)]
mod tests {
    use super::summary_line;

    #[test]
    fn a_diff_says_its_first_changed_line() {
        assert_eq!(
            summary_line("--- \n+++ \n@@ -1 +1 @@\n-by hand\n+managed", "/etc/motd"),
            "-by hand"
        );
        assert_eq!(
            summary_line("{\"htop\":{\"new\":\"3\"}}", "tools"),
            "{\"htop\":{\"new\":\"3\"}}"
        );
        assert_eq!(summary_line("", "/srv/cache"), "/srv/cache");
    }
}
