//! `saltsight minion ID`: one minion's story from the history on the master:
//! its recent jobs and outcomes, its last success per function, the jobs it
//! missed in a row and why, its recent root causes.

use std::io::Write;

use clap::Args;

use super::present::{QueryArgs, Style, Table, Tone, open_history, print_json, when};
use super::{Failure, Outcome, exit};
use crate::config::Config;
use crate::history::query::minion;

#[derive(Debug, Args)]
pub struct MinionArgs {
    /// The minion's id
    pub id: String,
    /// Recent jobs shown at most
    #[arg(long, default_value_t = 20)]
    pub jobs: usize,
    #[command(flatten)]
    pub query: QueryArgs,
}

pub fn run(args: &MinionArgs, config: &Config, out: &mut dyn Write) -> Result<Outcome, Failure> {
    let store = open_history(config)?;
    let view = minion(&store, &args.id, args.jobs)
        .map_err(|e| Failure::runtime(e.to_string()))?
        .ok_or_else(|| {
            Failure::new(
                exit::NOT_FOUND,
                format!(
                    "no minion {} in the history ({})",
                    args.id,
                    store.path().display()
                ),
            )
        })?;
    let written = if args.query.json {
        print_json(&view, out)
    } else {
        let style = Style::for_stdout();
        (|| -> std::io::Result<()> {
            writeln!(
                out,
                "{} {}",
                style.paint(Tone::Bold, "Minion"),
                style.paint(Tone::Bold, &view.minion)
            )?;
            if view.streak > 0 {
                let reasons: Vec<String> = view
                    .missing_reasons
                    .iter()
                    .map(|(r, n)| format!("{r} {n}"))
                    .collect();
                writeln!(
                    out,
                    "  {}; recent misses: {}",
                    style.paint(
                        Tone::Warn,
                        &match &view.missing_since {
                            Some(since) if view.streak > 1 => format!(
                                "missed its last {} jobs in a row, since {}",
                                view.streak,
                                super::present::when(since)
                            ),
                            _ => format!("missed its last {} job(s) in a row", view.streak),
                        }
                    ),
                    reasons.join(", ")
                )?;
            }
            let mut t = Table::new(&["JID", "WHEN", "FUNCTION", "OUTCOME"]);
            for j in &view.jobs {
                let tone = match j.outcome.as_str() {
                    "succeeded" => Tone::Good,
                    "failed" => Tone::Bad,
                    _ => Tone::Warn,
                };
                t.row(vec![
                    j.jid.clone(),
                    when(&j.at),
                    j.fun.clone(),
                    style.paint(tone, &j.outcome),
                ]);
            }
            t.write(style, out)?;
            if !view.last_success.is_empty() {
                writeln!(out, "{}", style.paint(Tone::Bold, "Last success"))?;
                for (fun, at) in &view.last_success {
                    writeln!(out, "  {fun}  {}", when(at))?;
                }
            }
            if !view.failures.is_empty() {
                writeln!(out, "{}", style.paint(Tone::Bold, "Recent root causes"))?;
                for f in &view.failures {
                    writeln!(
                        out,
                        "  {}x  {}  {}  last {}",
                        f.times,
                        f.state,
                        f.category,
                        when(&f.last)
                    )?;
                }
            }
            Ok(())
        })()
    };
    written.map_err(|e| Failure::runtime(format!("writing the answer: {e}")))?;
    Ok(Outcome::Ok)
}

impl super::Action for MinionArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.query.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, Failure> {
        super::answer(&overrides, |config, out| run(&self, config, out))
    }
}
