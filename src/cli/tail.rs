//! `saltsight tail`: live events on the terminal, readable by default or as JSON
//! lines; from the bus, or from a recording with `--from`.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::app::Handler;
use crate::bus::{BusGap, Endpoint, Frame};
use crate::config::glob;
use crate::event::Event;
use crate::sink::stdout;

#[derive(Debug, Args)]
pub struct TailArgs {
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
}

/// Prints matching events; cancels the source once `count` is reached.
pub struct TailHandler<W: Write> {
    out: BufWriter<W>,
    json: bool,
    tags: Vec<String>,
    remaining: Option<u64>,
    stop: CancellationToken,
    /// Flush after every event (live); a recording flushes at the end.
    flush_each: bool,
}

impl<W: Write> TailHandler<W> {
    pub fn new(out: W, args: &TailArgs, stop: CancellationToken) -> Self {
        Self {
            out: BufWriter::new(out),
            json: args.json,
            tags: args.tags.clone(),
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
        if !self.tags.is_empty() && !self.tags.iter().any(|g| glob::matches(g, event.tag)) {
            return Ok(());
        }
        if self.json {
            stdout::write_line(&mut self.out, &stdout::event_json(event))?;
        } else {
            stdout::write_pretty(&mut self.out, event)?;
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
        eprintln!("{}", stdout::gap_line(gap));
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
