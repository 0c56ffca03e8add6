//! `saltsight run`: the agent. For now it logs every event at debug and emits the
//! records the pipeline makes (`bus_gap`) as JSON lines with `--output stdout`.

use std::io::{BufWriter, Write};

use clap::{Args, ValueEnum};
use tracing::info;

use crate::app::Handler;
use crate::bus::{BusGap, Endpoint, Frame};
use crate::event::Event;
use crate::sink::stdout;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Records as JSON lines on stdout.
    Stdout,
    /// No records (logs and counters only).
    None,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where records go
    #[arg(long, value_enum, default_value = "stdout")]
    pub output: Output,
}

/// Emits records to `out` (when the output is stdout).
pub struct RecordHandler<W: Write> {
    out: Option<BufWriter<W>>,
    flush_each: bool,
}

impl<W: Write> RecordHandler<W> {
    pub fn new(out: W, output: Output, flush_each: bool) -> Self {
        Self {
            out: (output == Output::Stdout).then(|| BufWriter::new(out)),
            flush_each,
        }
    }

    fn emit(&mut self, record: &serde_json::Value) -> anyhow::Result<()> {
        if let Some(out) = &mut self.out {
            stdout::write_line(out, record)?;
            if self.flush_each {
                out.flush()?;
            }
        }
        Ok(())
    }
}

impl<W: Write> Handler for RecordHandler<W> {
    fn event(&mut self, _event: &Event<'_>, _frame: &Frame) -> anyhow::Result<()> {
        Ok(())
    }

    fn gap(&mut self, gap: &BusGap) -> anyhow::Result<()> {
        info!(
            reason = gap.reason.as_str(),
            dropped_frames = gap.dropped_frames,
            "Bus gap."
        );
        self.emit(&stdout::gap_record(gap))
    }

    fn connected(&mut self, endpoint: &Endpoint) -> anyhow::Result<()> {
        info!(%endpoint, "Watching the event bus.");
        Ok(())
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        if let Some(out) = &mut self.out {
            out.flush()?;
        }
        Ok(())
    }
}
