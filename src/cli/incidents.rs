//! `saltsight incidents`: external incidents from the history, open and
//! closed, each at its latest revision, newest first.

use std::io::Write;

use clap::Args;

use super::present::{
    QueryArgs, Style, Table, Tone, names, open_history, parse_since, print_json, when,
};
use super::{Failure, Outcome, exit};
use crate::config::Config;
use crate::history::status::incidents;

#[derive(Debug, Args)]
pub struct IncidentsArgs {
    /// Incidents seen since then: a duration back (1h, 7d) or a time
    #[arg(long, default_value = "7d")]
    pub since: String,
    #[command(flatten)]
    pub query: QueryArgs,
}

pub fn run(args: &IncidentsArgs, config: &Config, out: &mut dyn Write) -> Result<Outcome, Failure> {
    let since = parse_since(&args.since).map_err(|e| Failure::new(exit::USAGE, e))?;
    let store = open_history(config)?;
    let found = incidents(&store, since).map_err(|e| Failure::runtime(e.to_string()))?;
    let written = if args.query.json {
        print_json(&found, out)
    } else {
        let style = Style::for_stdout();
        let mut t = Table::new(&[
            "STATUS", "TARGET", "CATEGORY", "MINIONS", "JOBS", "FAILURES", "FIRST", "LAST",
            "STATES",
        ]);
        for i in &found {
            let tone = if i.status == crate::record::EpisodeStatus::Open {
                Tone::Bad
            } else {
                Tone::Dim
            };
            t.row(vec![
                style.paint(tone, i.status.as_str()),
                i.target.clone(),
                i.category.to_string(),
                i.minions.to_string(),
                i.jobs.to_string(),
                i.failures.to_string(),
                when(&i.first_seen.to_string()),
                when(&i.last_seen.to_string()),
                names(&i.states, 3),
            ]);
        }
        if t.is_empty() {
            writeln!(
                out,
                "No external incidents since {}.",
                when(&since.to_string())
            )
        } else {
            t.write(style, out)
        }
    };
    written.map_err(|e| Failure::runtime(format!("writing the answer: {e}")))?;
    Ok(Outcome::Ok)
}

impl super::Action for IncidentsArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.query.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, Failure> {
        super::answer(&overrides, |config, out| run(&self, config, out))
    }
}
