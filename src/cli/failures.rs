//! `saltsight failures`: root causes across jobs, by fingerprint, from the
//! history on the master: how many minions and jobs, when first and last
//! seen, the commit that introduced it.

use std::io::Write;

use clap::Args;

use super::present::{
    QueryArgs, Style, Table, Tone, cut, open_history, parse_since, print_json, when,
};
use super::{Failure, Outcome};
use crate::config::Config;
use crate::history::failures::failures;

#[derive(Debug, Args)]
pub struct FailuresArgs {
    /// Failures since then: a duration back (1h, 2d) or a time (2026-11-24T03:00:00Z)
    #[arg(long, default_value = "1d")]
    pub since: String,
    #[command(flatten)]
    pub query: QueryArgs,
}

pub fn run(args: &FailuresArgs, config: &Config, out: &mut dyn Write) -> Result<Outcome, Failure> {
    let since = parse_since(&args.since).map_err(|e| Failure::new(super::exit::USAGE, e))?;
    let store = open_history(config)?;
    let lines = failures(&store, Some(since)).map_err(|e| Failure::runtime(e.to_string()))?;
    let written = if args.query.json {
        print_json(&lines, out)
    } else {
        let style = Style::for_stdout();
        let mut t = Table::new(&[
            "MINIONS",
            "JOBS",
            "CATEGORY",
            "STATE",
            "FIRST SEEN",
            "LAST SEEN",
            "INTRODUCED BY",
            "COMMENT",
        ]);
        for l in &lines {
            t.row(vec![
                style.paint(Tone::Bad, &l.minions.to_string()),
                l.jobs.to_string(),
                l.category.clone(),
                l.state(),
                when(&l.first_seen),
                when(&l.last_seen),
                l.introduced_by
                    .as_deref()
                    .map_or_else(String::new, |c| cut(c, 40)),
                cut(&l.comment, 80),
            ]);
        }
        if t.is_empty() {
            writeln!(out, "No failures since {}.", when(&since.to_string()))
        } else {
            t.write(style, out)
        }
    };
    written.map_err(|e| Failure::runtime(format!("writing the answer: {e}")))?;
    Ok(Outcome::Ok)
}

impl super::Action for FailuresArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.query.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, Failure> {
        super::answer(&overrides, |config, out| run(&self, config, out))
    }
}
