//! `saltsight tail`: live events on the terminal, readable by default or as JSON
//! lines; from the bus, or from a recording with `--from`. Redacted as records
//! are, unless `--no-redact`.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::flags::BusArgs;
use super::tail_format;
use super::{Outcome, Session};
use crate::bus::reader::Delivery;
use crate::bus::{BusGap, Endpoint, Frame};
use crate::config::glob::Glob;
use crate::event::Event;
use crate::event::json::Limits;
use crate::pipeline::assembly::consumer_of;
use crate::pipeline::{Handler, SourceChoice};
use crate::record::redact::{Redacted, Redactor};
use crate::shutdown;

#[derive(Debug, Args)]
pub struct TailArgs {
    /// Wait for the bus when it cannot be reached (retrying with backoff), instead
    /// of saying why and exiting (69: nothing there, 77: not allowed)
    #[arg(long)]
    pub wait: bool,
    /// One JSON object per line: {"tag": ..., "data": {...}}, data as Salt sent it
    #[arg(long)]
    pub json: bool,
    /// Only events whose tag matches this glob (fnmatch, like Salt's); repeatable
    #[arg(long = "tag", value_name = "GLOB")]
    pub tags: Vec<String>,
    /// Read a recording (saltsight capture file or raw socket dump) instead of the bus
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Stop after this many matching events
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Show secrets as the bus carries them (passwords in args, pillar returns...);
    /// by default they are masked as in records (docs/security.md)
    #[arg(long)]
    pub no_redact: bool,
    #[command(flatten, next_help_heading = "Event bus")]
    pub bus: BusArgs,
}

/// Prints matching events; cancels the source once `count` is reached.
pub struct TailHandler<W: Write> {
    out: BufWriter<W>,
    json: bool,
    tags: Vec<Glob>,
    remaining: Option<u64>,
    stop: CancellationToken,
    /// Flush after every event (live); a recording flushes at the end.
    flush_each: bool,
    /// `None` with `--no-redact`.
    redactor: Option<Redactor>,
    /// What one event may build: redacted texts are cut anyway, so they are not
    /// built longer than the redactor looks (four times its cut).
    limits: Limits,
}

impl<W: Write> TailHandler<W> {
    pub fn new(out: W, args: &TailArgs, stop: CancellationToken, redactor: &Redactor) -> Self {
        let limits = if args.no_redact {
            Limits::DEFAULT
        } else {
            Limits {
                max_text: redactor.max_field_bytes().saturating_mul(4),
                ..Limits::DEFAULT
            }
        };
        Self {
            limits,
            redactor: (!args.no_redact).then(|| redactor.clone()),
            out: BufWriter::new(out),
            json: args.json,
            tags: args.tags.iter().map(|t| Glob::new(t)).collect(),
            remaining: args.count,
            stop,
            flush_each: args.from.is_none(),
        }
    }
}

impl<W: Write> Handler for TailHandler<W> {
    fn event(&mut self, event: &Event<'_>, _frame: &Frame) -> anyhow::Result<()> {
        if self.remaining == Some(0) {
            return Ok(());
        }
        if !self.tags.is_empty() && !self.tags.iter().any(|g| g.matches(event.tag)) {
            return Ok(());
        }
        let data = tail_format::event_data(event, self.limits);
        let shown = match &self.redactor {
            Some(redactor) => redactor.event(event.tag, data),
            None => Redacted::waived(event.tag, data),
        };
        if self.json {
            tail_format::write_event_line(&mut self.out, &shown)?;
        } else {
            tail_format::write_pretty(&mut self.out, &shown)?;
        }
        if self.flush_each {
            self.out.flush()?;
        }
        if let Some(n) = &mut self.remaining {
            *n -= 1;
            if *n == 0 {
                self.stop.cancel();
            }
        }
        Ok(())
    }

    fn gap(&mut self, gap: &BusGap) -> anyhow::Result<()> {
        // On the terminal, gaps go to stderr so stdout stays events only.
        eprintln!("{}", tail_format::gap_line(gap));
        Ok(())
    }

    fn connected(&mut self, endpoint: &Endpoint) -> anyhow::Result<()> {
        if !self.json {
            eprintln!("-- connected to {endpoint} --");
        }
        Ok(())
    }

    fn finish(&mut self, _recording: bool) -> anyhow::Result<()> {
        self.out.flush()?;
        Ok(())
    }
}

/// `saltsight tail`: the bus (or `--from` a recording) shown until interrupted.
pub async fn run(args: TailArgs, session: Session) -> anyhow::Result<Outcome> {
    let Session {
        config,
        redactor,
        cancel,
        ..
    } = session;
    if args.from.is_none() && !args.wait {
        super::reach::reachable_or_exit(&config.bus.endpoint).await?;
    }
    let handler = TailHandler::new(std::io::stdout(), &args, cancel.clone(), &redactor);
    let source = match &args.from {
        Some(path) => SourceChoice::Recording { path: path.clone() },
        None => SourceChoice::Live,
    };
    let consumer = consumer_of(&config, &source, Delivery::Frames, false, cancel.clone());
    let (summary, _) = shutdown::within_grace(&cancel, consumer.run(handler)).await?;
    Ok(Outcome::of(&summary))
}

impl super::Action for TailArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.bus.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, super::Failure> {
        super::on_bus(&overrides, |session| run(self, session))
    }
}
