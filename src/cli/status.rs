//! `saltsight status`: what is wrong now, on one screen, from the history:
//! open external incidents, master pressure, rollouts pending or stalled,
//! failures of the last hour, minions missing jobs in a row, drift nothing put
//! back, bus gaps; the outputs' spools (what waits to be sent, what upstream
//! refused), read from their directories; the running agent's bus (connected,
//! lag), asked on its loopback `/metrics` where it can be (`live`); and how
//! fresh the history is. Exit 0 when nothing is wrong, 1 when something is (a
//! check for cron, Nagios/Icinga, a prompt).

use std::io::Write;

use clap::Args;

use super::present::{QueryArgs, Style, Table, Tone, cut, names, open_history, print_json, when};
use super::{Failure, Outcome, exit};
use crate::config::Config;
use crate::history::status::{Status, status};
use crate::plain::duration_micros;
use crate::sink::spool::backlog::{Backlog, backlog};
use crate::time::Stamp;

/// A backlog older than this is wrong (the `SaltsightUpstreamBacklogOld`
/// alert's threshold).
const BACKLOG_TOO_OLD_MICROS: i64 = 15 * 60 * 1_000_000;
/// A batch refused within this long is wrong.
const DEAD_LETTER_RECENT_MICROS: i64 = 60 * 60 * 1_000_000;

/// One output's spool.
#[derive(Debug, serde::Serialize)]
struct OutputBacklog {
    output: String,
    #[serde(flatten)]
    backlog: Backlog,
}

/// What `status --json` prints: the history's answer and the spools'.
#[derive(Debug, serde::Serialize)]
struct Answer<'a> {
    #[serde(flatten)]
    status: &'a Status,
    outputs: Vec<OutputBacklog>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<super::live::Live>,
}

/// The spools of the configured outputs that have one (an `otlp` output's
/// spans have a second).
fn spools(config: &Config) -> Vec<OutputBacklog> {
    config
        .outputs
        .iter()
        .flat_map(|o| [o.name.clone(), crate::sink::otlp::traces_spool(&o.name)])
        .filter_map(|name| {
            let dir = config.spool.dir.join(&name);
            backlog(&dir).ok().map(|backlog| OutputBacklog {
                output: name,
                backlog,
            })
        })
        .collect()
}

/// What is wrong with the spools, each said in a few words.
fn spools_wrong(outputs: &[OutputBacklog], now: Stamp) -> Vec<String> {
    let mut wrong = Vec::new();
    for o in outputs {
        if o.backlog
            .oldest
            .is_some_and(|t| now.micros_since(t) > BACKLOG_TOO_OLD_MICROS)
        {
            wrong.push(format!(
                "output {} has records waiting over 15 minutes",
                o.output
            ));
        }
        if o.backlog
            .newest_dead_letter
            .is_some_and(|t| now.micros_since(t) < DEAD_LETTER_RECENT_MICROS)
        {
            wrong.push(format!(
                "output {} had batches refused in the last hour",
                o.output
            ));
        }
    }
    wrong
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub query: QueryArgs,
}

pub fn run(args: &StatusArgs, config: &Config, out: &mut dyn Write) -> Result<Outcome, Failure> {
    let store = open_history(config)?;
    let now = Stamp::now();
    let found = status(&store, now).map_err(|e| Failure::runtime(e.to_string()))?;
    let outputs = spools(config);
    let agent = super::live::address(config).map(super::live::ask);
    let mut wrong = found.wrong();
    wrong.extend(spools_wrong(&outputs, now));
    if agent.as_ref().is_some_and(|a| a.connected == Some(false)) {
        wrong.push("saltsight is not connected to the event bus".into());
    }
    let written = if args.query.json {
        print_json(
            &Answer {
                status: &found,
                outputs,
                agent,
            },
            out,
        )
    } else {
        show(
            &found,
            &outputs,
            agent.as_ref(),
            &wrong,
            now,
            Style::for_stdout(),
            out,
        )
    };
    written.map_err(|e| Failure::runtime(format!("writing the answer: {e}")))?;
    if wrong.is_empty() {
        Ok(Outcome::Ok)
    } else {
        Err(Failure::new(
            exit::RUNTIME,
            format!("wrong now: {}", wrong.join(", ")),
        ))
    }
}

fn show(
    s: &Status,
    outputs: &[OutputBacklog],
    agent: Option<&super::live::Live>,
    wrong: &[String],
    now: Stamp,
    style: Style,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let b = |t: &str| style.paint(Tone::Bold, t);
    let bad = |t: &str| style.paint(Tone::Bad, t);
    let warn = |t: &str| style.paint(Tone::Warn, t);
    for i in &s.incidents {
        writeln!(
            out,
            "{} {} ({}): {} minions, {} jobs, since {}",
            bad("External incident"),
            i.target,
            i.category,
            i.minions,
            i.jobs,
            when(&i.first_seen.to_string())
        )?;
    }
    if let Some(p) = &s.pressure {
        let signals: Vec<String> = p
            .signals
            .iter()
            .map(|f| format!("{} {:.2}", f.signal, f.value))
            .collect();
        writeln!(
            out,
            "{} since {}: {}",
            bad("The master is saturated"),
            when(&p.opened_at.to_string()),
            signals.join(", ")
        )?;
    }
    for r in &s.rollouts {
        let head = format!(
            "{} {} \"{}\"",
            r.repo,
            r.commit.get(..10).unwrap_or(&r.commit),
            cut(&r.subject, 60)
        );
        let standing = format!(
            "{}/{} applied, {} failed, {} pending",
            r.applied, r.known, r.failed, r.pending
        );
        if r.status == crate::record::RolloutStatus::Stalled {
            writeln!(out, "{} {head}: {standing}", bad("Rollout stalled"))?;
        } else {
            writeln!(out, "{} {head}: {standing}", b("Rolling out"))?;
        }
    }
    if !s.failing.is_empty() {
        writeln!(
            out,
            "{} (failed since {}, not run successfully since)",
            bad("Failing now"),
            when(&s.failing_since)
        )?;
        let mut t = Table::new(&["  MINIONS", "JOBS", "CATEGORY", "STATE", "LAST"]);
        for f in &s.failing {
            t.row(vec![
                format!("  {}", f.minions),
                f.jobs.to_string(),
                f.category.clone(),
                f.state(),
                when(&f.last_seen),
            ]);
        }
        t.write(style, out)?;
    }
    if !s.absent.is_empty() {
        writeln!(out, "{}", warn("Missing jobs in a row"))?;
        let mut t = Table::new(&["  MINION", "IN A ROW", "REASON", "SINCE"]);
        for a in &s.absent {
            t.row(vec![
                format!("  {}", a.minion),
                a.streak.to_string(),
                format!("{} ({})", a.reason, a.evidence),
                a.since.as_deref().map(when).unwrap_or_default(),
            ]);
        }
        t.write(style, out)?;
    }
    if !s.drift_detected.is_empty() {
        let drifted: Vec<String> = s
            .drift_detected
            .iter()
            .map(|(m, state)| format!("{m} {state}"))
            .collect();
        writeln!(
            out,
            "{} {}",
            warn("Drift nothing put back:"),
            names(&drifted, 10)
        )?;
    }
    if s.gaps > 0 {
        writeln!(
            out,
            "{} {} in the last hour: events may have been missed",
            warn("Bus gaps:"),
            s.gaps
        )?;
    }
    let fresh = s.newest.as_deref().and_then(Stamp::parse).map_or_else(
        || "no record yet".to_owned(),
        |t| {
            format!(
                "the newest record {} ago",
                duration_micros(now.micros_since(t))
            )
        },
    );
    for o in outputs {
        let b = &o.backlog;
        let waiting = b.oldest.map_or_else(
            || "nothing waiting".to_owned(),
            |t| {
                format!(
                    "{} batches ({} KiB) waiting, the oldest {} old",
                    b.batches,
                    b.bytes >> 10,
                    duration_micros(now.micros_since(t))
                )
            },
        );
        let refused = match b.newest_dead_letter {
            Some(t) => format!(
                "; {} refused by upstream, the last {} ago",
                b.dead_letters,
                duration_micros(now.micros_since(t))
            ),
            None => String::new(),
        };
        let line = format!("output {}: {waiting}{refused}", o.output);
        let tone = if spools_wrong(std::slice::from_ref(o), now).is_empty() {
            Tone::Dim
        } else {
            Tone::Warn
        };
        writeln!(out, "{}", style.paint(tone, &line))?;
    }
    if let Some(a) = agent {
        let line = match (&a.unanswered, a.connected) {
            (Some(why), _) => style.paint(Tone::Dim, &format!("agent on {}: {why}", a.address)),
            (None, Some(false)) => style.paint(
                Tone::Bad,
                &format!("agent on {}: not connected to the event bus", a.address),
            ),
            (None, _) => {
                let lag = a
                    .bus_lag_p99_s
                    .map(|s| format!(", bus lag p99 {}", duration_micros((s * 1e6) as i64)))
                    .unwrap_or_default();
                style.paint(
                    Tone::Dim,
                    &format!("agent on {}: connected to the event bus{lag}", a.address),
                )
            }
        };
        writeln!(out, "{line}")?;
    }
    if wrong.is_empty() {
        writeln!(out, "{}", style.paint(Tone::Good, "Nothing wrong now."))?;
    }
    writeln!(
        out,
        "{}",
        style.paint(
            Tone::Dim,
            &format!(
                "history: {} records, {} MiB, since {}; {fresh}",
                s.records,
                s.bytes >> 20,
                s.oldest.as_deref().map(when).unwrap_or_else(|| "-".into())
            )
        )
    )
}

impl super::Action for StatusArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.query.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, Failure> {
        super::answer(&overrides, |config, out| run(&self, config, out))
    }
}
