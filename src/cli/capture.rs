//! `saltsight capture FILE`: the raw bus bytes with receive times, in the capture
//! format of `bus::recording`, until interrupted or `--duration` ends.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::Args;

use anyhow::Context;

use super::flags::BusArgs;
use super::{Outcome, Session};
use crate::bus::reader::Delivery;
use crate::bus::recording::CaptureWriter;
use crate::bus::{BusGap, Endpoint, Frame};
use crate::config::duration::parse_duration;
use crate::event::Event;
use crate::pipeline::assembly::consumer_of;
use crate::pipeline::{Handler, SourceChoice};
use crate::shutdown;

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Wait for the bus when it cannot be reached (retrying with backoff), instead
    /// of saying why and exiting (69: nothing there, 77: not allowed)
    #[arg(long)]
    pub wait: bool,
    /// The file to write (replaced if it exists)
    pub file: PathBuf,
    /// Stop after this long, e.g. 30s or 10m
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    #[command(flatten, next_help_heading = "Event bus")]
    pub bus: BusArgs,
}

pub struct CaptureHandler {
    writer: CaptureWriter<BufWriter<File>>,
    pub bytes: u64,
}

impl CaptureHandler {
    /// Creates the file 0600: a capture is the bus as it is, secrets included
    /// (docs/security.md), for the operator who made it.
    pub fn create(path: &std::path::Path) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        Ok(Self {
            writer: CaptureWriter::new(BufWriter::with_capacity(1 << 20, file))?,
            bytes: 0,
        })
    }
}

impl Handler for CaptureHandler {
    fn event(&mut self, _event: &Event<'_>, _frame: &Frame) -> anyhow::Result<()> {
        Ok(())
    }

    fn chunk(&mut self, chunk: &Frame) -> anyhow::Result<()> {
        self.bytes += chunk.bytes.len() as u64;
        self.writer.bytes(
            chunk.received_at.unwrap_or_else(SystemTime::now),
            &chunk.bytes,
        )?;
        Ok(())
    }

    fn gap(&mut self, gap: &BusGap) -> anyhow::Result<()> {
        self.writer
            .disconnected(gap.started_at, gap.reason.as_str())?;
        self.writer.flush()?;
        Ok(())
    }

    fn connected(&mut self, endpoint: &Endpoint) -> anyhow::Result<()> {
        self.writer
            .connected(SystemTime::now(), &endpoint.to_string())?;
        self.writer.flush()?;
        Ok(())
    }

    fn finish(&mut self, _recording: bool) -> anyhow::Result<()> {
        self.writer.flush()?;
        Ok(())
    }
}

/// `saltsight capture FILE`: records until interrupted or `--duration` ends.
pub async fn run(args: CaptureArgs, session: Session) -> anyhow::Result<Outcome> {
    let Session { config, cancel, .. } = session;
    if !args.wait {
        super::reach::reachable_or_exit(&config.bus.endpoint).await?;
    }
    let handler = CaptureHandler::create(&args.file)
        .with_context(|| format!("cannot create capture file {}", args.file.display()))?;
    if let Some(duration) = args.duration {
        let stop = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            stop.cancel();
        });
    }
    let consumer = consumer_of(
        &config,
        &SourceChoice::Live,
        Delivery::RawChunks,
        false,
        cancel.clone(),
    );
    let (summary, handler) = shutdown::within_grace(&cancel, consumer.run(handler)).await?;
    eprintln!(
        "captured {} bytes to {}",
        handler.bytes,
        args.file.display()
    );
    Ok(Outcome::of(&summary))
}

impl super::Action for CaptureArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.bus.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, super::Failure> {
        super::on_bus(&overrides, |session| run(self, session))
    }
}
