//! `saltsight run`: the agent. Feeds the job tracker from the pipeline and writes
//! its records (`job_published`, `minion_return`, `minion_missing`,
//! `job_completed`, `late_return`, `bus_gap`) as JSON lines with `--output stdout`.
//!
//! The tracker's clock is chosen here: live, the wall clock, with a wake-up at the
//! next deadline; under replay, event time (the events' `_stamp`), so verdicts come
//! out as they did live, and the end of a recording passes every deadline.

use std::io::{BufWriter, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, ValueEnum};
use tracing::{debug, info};

use crate::app::Handler;
use crate::bus::{BusGap, Endpoint, Frame};
use crate::event::{Event, Stamp};
use crate::jobs::JobTracker;
use crate::record::{Record, RecordBody};
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

/// Which time the tracker runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The wall clock (live).
    Wall,
    /// The latest `_stamp` seen (replay).
    EventTime,
}

/// Drives the job tracker and writes its records to `out`.
pub struct RecordHandler<W: Write> {
    tracker: JobTracker,
    clock: Clock,
    out: Option<BufWriter<W>>,
    flush_each: bool,
    event_now: Stamp,
    /// Receive time minus `_stamp` of the latest event: the master's clock offset
    /// plus bus lag. The idle tick judges at `wall clock - offset`, on the master's
    /// clock, so a skewed master or a lagging bus cannot bring verdicts early.
    offset_micros: i64,
    pending: Vec<Record>,
    pub emitted: u64,
}

impl<W: Write> RecordHandler<W> {
    pub fn new(tracker: JobTracker, clock: Clock, out: W, output: Output) -> Self {
        Self {
            tracker,
            clock,
            out: (output == Output::Stdout).then(|| BufWriter::new(out)),
            flush_each: clock == Clock::Wall,
            event_now: Stamp(i64::MIN),
            offset_micros: 0,
            pending: Vec::new(),
            emitted: 0,
        }
    }

    pub fn tracker(&self) -> &JobTracker {
        &self.tracker
    }

    fn write_pending(&mut self) -> anyhow::Result<()> {
        for record in self.pending.drain(..) {
            self.emitted += 1;
            if let RecordBody::MinionMissing(m) = &record.body {
                info!(jid = %m.jid, minion = %m.minion, fun = %m.fun, reason = m.reason.as_str(), "Minion did not return.");
            } else {
                debug!(kind = record.kind, "Record.");
            }
            if let Some(out) = &mut self.out {
                stdout::write_record(out, &record)?;
            }
        }
        if self.flush_each {
            if let Some(out) = &mut self.out {
                out.flush()?;
            }
        }
        Ok(())
    }
}

impl<W: Write> Handler for RecordHandler<W> {
    fn event(&mut self, event: &Event<'_>, frame: &Frame) -> anyhow::Result<()> {
        if let Some(stamp) = event.stamp {
            self.event_now = self.event_now.max(stamp);
            if let Some(received) = frame.received_at {
                self.offset_micros = Stamp::from_system_time(received).micros_since(stamp);
            }
        }
        // Verdicts due before this event are given first, on event time, live as in
        // replay: a backlog of queued events is judged by when they happened, not
        // by when they were read.
        let now = self.event_now;
        self.tracker.advance(now, &mut self.pending);
        self.tracker.on_event(event, now, &mut self.pending);
        self.write_pending()
    }

    fn gap_started(&mut self, _at: SystemTime) -> anyhow::Result<()> {
        self.tracker.on_gap_start();
        Ok(())
    }

    fn gap(&mut self, gap: &BusGap) -> anyhow::Result<()> {
        info!(
            reason = gap.reason.as_str(),
            dropped_frames = gap.dropped_frames,
            "Bus gap."
        );
        // A raw dump has no receive times: its gaps are placed at event time.
        let (start, end) = if gap.started_at == UNIX_EPOCH {
            (self.event_now, self.event_now)
        } else {
            (
                Stamp::from_system_time(gap.started_at),
                Stamp::from_system_time(gap.ended_at),
            )
        };
        self.tracker.on_gap(
            start,
            end,
            gap.reason.as_str(),
            gap.dropped_frames,
            &mut self.pending,
        );
        self.write_pending()
    }

    fn connected(&mut self, endpoint: &Endpoint) -> anyhow::Result<()> {
        info!(%endpoint, "Watching the event bus.");
        Ok(())
    }

    /// On the wall clock: the next deadline shifted by the master's offset.
    fn next_wakeup(&self) -> Option<Stamp> {
        let deadline = self
            .tracker
            .next_deadline()
            .filter(|_| self.clock == Clock::Wall)?;
        Some(Stamp(deadline.0.saturating_add(self.offset_micros)))
    }

    fn tick(&mut self, now: Stamp) -> anyhow::Result<()> {
        let master_now = Stamp(now.0.saturating_sub(self.offset_micros));
        self.tracker.advance(master_now, &mut self.pending);
        self.write_pending()
    }

    fn finish(&mut self, recording: bool) -> anyhow::Result<()> {
        if recording {
            // The end of a recording: event time moves past every deadline.
            self.tracker.finish(&mut self.pending);
        }
        self.write_pending()?;
        if let Some(out) = &mut self.out {
            out.flush()?;
        }
        Ok(())
    }
}
