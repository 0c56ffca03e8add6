//! The agent's handler: drives the [`Stages`] on the right clock and hands every
//! record through the redaction gate to the log, the metrics and the outputs.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::{debug, info, warn};

use super::checkpoint::{Checkpointer, Restored};
use super::clock::{Clock, EventClock};
use super::consumer::Handler;
use super::stages::Stages;
use crate::bus::{BusGap, Endpoint, Frame, GapReason};
use crate::counter::Counts;
use crate::event::tag::ParsedTag;
use crate::event::{self, Body, Event, TagClass};
use crate::master_connections::ConnectionWatch;
use crate::master_processes::MasterProcesses;
use crate::metrics::Observer;
use crate::record::redact::Redactor;
use crate::record::{Record, RecordBody};
use crate::sink::Outputs;
use crate::time::Stamp;
use tokio::time::Instant;

/// Stages in, records out to every output.
pub struct Agent {
    stages: Stages,
    clock: EventClock,
    outputs: Outputs,
    /// The gate before the outputs, the log and the metrics.
    redactor: Redactor,
    metrics: Observer,
    /// Records handed to the outputs.
    pub emitted: u64,
    /// Records queued on the outputs and not yet written (until the read's end).
    unflushed: bool,
    /// The stages' memory on disk (`run` only), and when it is next written.
    checkpoint: Option<(Checkpointer, Option<Instant>)>,
    /// Events, gaps or verdicts since the last checkpoint: an idle agent with
    /// nothing new writes none (and sets no timer for one).
    unsaved: bool,
    /// A checkpoint was restored: the restart is a gap from here to the
    /// first connection.
    restart_gap_from: Option<Stamp>,
    /// The bus has been lost since (a gap begun and not yet ended).
    gap_since: Option<Stamp>,
    /// The master's pressure is judged every `interval` (`run` only), from its
    /// processes when they can be read.
    master: Option<MasterWatch>,
    /// Which minions hold a connection to the master (live only).
    connections: Option<ConnectionsWatch>,
    /// The vector an event's records are made in, kept empty between events.
    records: Vec<Record>,
}

/// Records an event's vector keeps room for between events (408 bytes each).
const KEPT_RECORDS: usize = 16;

/// The master's connections, sampled when a job is published, before
/// verdicts are given, and every [`CONNECTIONS_WHILE_OPEN`] while a job is
/// open (so that a connection lost during a job is dated within that), at
/// most once per [`CONNECTIONS_FRESH`]: nothing is read while no job is open.
struct ConnectionsWatch {
    watch: ConnectionWatch,
    last: Option<Instant>,
    /// The last sample failed (logged once until it works again).
    failing: bool,
}

/// A sample younger than this is fresh enough for a publish or a verdict.
const CONNECTIONS_FRESH: std::time::Duration = std::time::Duration::from_secs(1);
/// While a job is open, the connections are read again this often.
const CONNECTIONS_WHILE_OPEN: std::time::Duration = std::time::Duration::from_secs(5);

/// The master's processes, sampled on the agent's timer while there is
/// something to judge: events since the last sample, jobs waiting for their
/// returns, or an open episode to close. An idle master wakes nothing.
struct MasterWatch {
    processes: Option<MasterProcesses>,
    interval: std::time::Duration,
    next: Instant,
    /// Events came since the last sample.
    busy: bool,
    /// The last sample failed (logged once until it works again).
    failing: bool,
}

impl Agent {
    pub fn new(
        stages: Stages,
        clock: Clock,
        outputs: Outputs,
        redactor: Redactor,
        metrics: Observer,
    ) -> Self {
        Self {
            stages,
            clock: EventClock::new(clock),
            outputs,
            redactor,
            metrics,
            emitted: 0,
            unflushed: false,
            checkpoint: None,
            unsaved: false,
            restart_gap_from: None,
            gap_since: None,
            master: None,
            connections: None,
            records: Vec::new(),
        }
    }

    /// Reads which minions hold a connection to the master's publish port
    /// (live only: a recording has no connections).
    pub fn with_connection_watch(mut self, watch: ConnectionWatch) -> Self {
        self.connections = Some(ConnectionsWatch {
            watch,
            last: None,
            failing: false,
        });
        self
    }

    /// The deadline of the verdicts due at `now`, if any: the connections as
    /// they are then decide between a hung minion and a gone one.
    fn verdicts_due(&self, now: Stamp) -> Option<Stamp> {
        self.stages.tracker().next_deadline().filter(|d| *d <= now)
    }

    /// Samples the master's connections (unless a sample is fresh) and hands
    /// them to the stages, as of `as_of` (a verdict's deadline: the sample
    /// taken for it speaks for the deadline) or of now.
    fn sample_connections(&mut self, now: Instant, as_of: Option<Stamp>) {
        let Some(c) = &mut self.connections else {
            return;
        };
        if c.last
            .is_some_and(|last| now.duration_since(last) < CONNECTIONS_FRESH)
        {
            return;
        }
        c.last = Some(now);
        match c.watch.sample() {
            Ok(view) => {
                if std::mem::replace(&mut c.failing, false) {
                    info!(
                        minions = view.seen.len(),
                        "Reading the master's connections again."
                    );
                }
                let now = self.clock.master_time(now);
                let at = as_of.map_or(now, |d| d.min(now));
                self.stages.on_connections(&view, at);
            }
            Err(error) => {
                if !std::mem::replace(&mut c.failing, true) {
                    warn!(%error, "Cannot read which minions are connected; a minion that did not return is not told down from hung until it can.");
                }
            }
        }
    }

    /// Judges the master's pressure every `interval`, from `processes` when
    /// given (read from /proc) and from the bus.
    pub fn with_master_watch(
        mut self,
        processes: Option<MasterProcesses>,
        interval: std::time::Duration,
    ) -> Self {
        self.master = Some(MasterWatch {
            processes,
            interval,
            next: Instant::now() + interval,
            busy: false,
            failing: false,
        });
        self
    }

    /// What runs on the agent's own timers, when due at `now`: the master's
    /// pressure, the checkpoint. From `tick` when the bus is quiet, and from
    /// events (at their receipt) when it never is.
    fn timed_work(&mut self, now: Instant) -> anyhow::Result<()> {
        if self.master.as_ref().is_some_and(|m| m.next <= now) {
            self.watch_master(now)?;
        }
        if self
            .next_connections_sample()
            .is_some_and(|next| next <= now)
        {
            self.sample_connections(now, None);
        }
        if self.unsaved
            && self
                .checkpoint
                .as_ref()
                .and_then(|(_, next)| *next)
                .is_some_and(|next| next <= now)
        {
            self.save(now, true);
        }
        Ok(())
    }

    /// When the connections are next read, while a job is open.
    fn next_connections_sample(&self) -> Option<Instant> {
        let c = self.connections.as_ref()?;
        if self.stages.tracker().open_jobs() == 0 {
            return None;
        }
        Some(
            c.last
                .map_or_else(Instant::now, |last| last + CONNECTIONS_WHILE_OPEN),
        )
    }

    /// Something the checkpoint keeps changed at `now`. After an idle stretch
    /// the next checkpoint is an interval from now, not at once.
    fn changed(&mut self, now: Instant) {
        if std::mem::replace(&mut self.unsaved, true) {
            return;
        }
        if let Some((checkpointer, Some(next))) = &mut self.checkpoint {
            if *next <= now {
                *next = now + checkpointer.interval;
            }
        }
    }

    /// Samples the master (IO: a few small /proc files) and judges its pressure.
    fn watch_master(&mut self, now: Instant) -> anyhow::Result<()> {
        let Some(watch) = &mut self.master else {
            return Ok(());
        };
        watch.next = now + watch.interval;
        watch.busy = false;
        let sample = match watch.processes.as_ref().map(MasterProcesses::sample) {
            Some(Ok(sample)) => {
                if std::mem::replace(&mut watch.failing, false) {
                    info!(pid = sample.pid, "Reading the master's processes again.");
                }
                Some(sample)
            }
            Some(Err(error)) => {
                if !std::mem::replace(&mut watch.failing, true) {
                    warn!(%error, "Cannot read the master's processes; its workers' CPU is not a pressure signal until it can.");
                }
                None
            }
            None => None,
        };
        let at = self.clock.master_time(now);
        let records = self.stages.on_master_sample(sample.as_ref(), at);
        self.write(records)
    }

    /// Keeps the stages' memory on disk with `checkpointer`, after taking back
    /// `restored` (the restart is then a gap until the bus is read again).
    pub fn with_checkpoint(
        mut self,
        checkpointer: Checkpointer,
        restored: Option<Restored>,
    ) -> anyhow::Result<Self> {
        if let Some(restored) = restored {
            let now = Stamp::now();
            let records = self.stages.restore(restored.stages, now);
            self.stages.gap_started();
            self.restart_gap_from = Some(restored.header.bus_until);
            self.write(records)?;
        }
        let first =
            (!checkpointer.interval.is_zero()).then(|| Instant::now() + checkpointer.interval);
        self.checkpoint = Some((checkpointer, first));
        Ok(self)
    }

    /// Writes the checkpoint (between events: no job is part way through its
    /// verdicts, the agent hands every batch on before it returns, nor
    /// through its names): a periodic one on the checkpoint's thread, the
    /// last one (`periodic` false) whole before this returns.
    fn save(&mut self, now: Instant, periodic: bool) {
        // Not while a big job's names are part way taken: the next timed
        // work, once they are (the last save takes them all first).
        if periodic && self.stages.taking() {
            return;
        }
        let Some((checkpointer, next)) = &mut self.checkpoint else {
            return;
        };
        // Events were read up to now, unless the bus is lost (since then) or
        // was never reached since a restore (the restart's gap still open).
        let bus_until = self
            .restart_gap_from
            .or(self.gap_since)
            .unwrap_or_else(|| self.clock.master_time(now));
        if periodic {
            checkpointer.write_behind(|| self.stages.snapshot(), bus_until);
        } else {
            checkpointer.write(self.stages.snapshot(), bus_until);
        }
        self.unsaved = false;
        if let Some(next) = next {
            *next = now + checkpointer.interval;
        }
    }

    pub fn stages(&self) -> &Stages {
        &self.stages
    }

    /// The stages' and the outputs' own counts, for the scrape.
    pub fn counts(&self) -> Vec<Arc<dyn Counts>> {
        let mut counts = self.stages.counts();
        counts.push(self.outputs.counts());
        if let Some(c) = &self.connections {
            counts.push(c.watch.counts.clone());
        }
        counts
    }

    /// Hands `records` on, then every batch a large job's verdicts still owe,
    /// and writes the outputs.
    fn write(&mut self, mut records: Vec<Record>) -> anyhow::Result<()> {
        self.queue(&mut records)?;
        self.outputs.flush()?;
        self.unflushed = false;
        Ok(())
    }

    /// Like [`Agent::write`], leaving the outputs' write to the end of the
    /// read ([`Handler::batch_end`]): one write per read, not per event.
    /// `records` is left empty, its room kept.
    fn queue(&mut self, records: &mut Vec<Record>) -> anyhow::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.unflushed = true;
        self.queue_batch(records.drain(..))?;
        while let Some(more) = self.stages.more() {
            // A large job's verdicts come in bounded batches: each written
            // before the next is made, so the outputs hold one at a time.
            self.outputs.flush()?;
            self.queue_batch(more.into_iter())?;
        }
        Ok(())
    }

    fn queue_batch(&mut self, records: impl Iterator<Item = Record>) -> anyhow::Result<()> {
        for record in records {
            self.emitted += 1;
            let record = self.redactor.record(record);
            match &record.body {
                RecordBody::MinionMissing(m) => {
                    debug!(jid = %m.jid, minion = %m.minion, fun = %m.fun, reason = m.reason.as_str(), "Minion did not return.");
                }
                // One line per job, however many minions it is missing.
                RecordBody::JobCompleted(c) if !c.missing.is_empty() => {
                    let missing: Vec<String> = c
                        .missing
                        .iter()
                        .map(|(reason, n)| format!("{reason}={n}"))
                        .collect();
                    // Once a job: a late return's amendment is a detail.
                    if c.revision == 0 {
                        info!(jid = %c.jid, fun = %c.fun, expected = c.expected, returned = c.returned, missing = %missing.join(" "), "Job completed with minions missing.");
                    } else {
                        debug!(jid = %c.jid, revision = c.revision, returned = c.returned, missing = %missing.join(" "), "Job amended by a late return.");
                    }
                }
                _ => debug!(kind = record.kind.as_str(), "Record."),
            }
            self.metrics.record(&record);
            self.outputs.write(&record)?;
        }
        Ok(())
    }
}

impl Handler for Agent {
    fn event(&mut self, event: &Event<'_>, frame: &Frame) -> anyhow::Result<()> {
        self.clock.observe(event.stamp, frame.received_mono);
        if let Some(watch) = &mut self.master {
            watch.busy = true;
        }
        self.metrics.event(event);
        if let (Some(lag), Some(stamp)) = (super::clock::bus_lag_micros(event, frame), event.stamp)
        {
            self.stages.on_lag(lag as f64 / 1e6, stamp);
        }
        let published = matches!(&event.body, Body::JobNew(p)
            if !p.fun.as_ref().is_some_and(|f| crate::event::args::is_internal(f.as_str())));
        if self.connections.is_some() {
            let due = self.verdicts_due(self.clock.now());
            if published || due.is_some() {
                let received = frame.received_mono.unwrap_or_else(Instant::now);
                self.sample_connections(received, due);
            }
        }
        // One vector for every event's records: room for a few is kept, a
        // large job's verdicts' is not.
        let mut records = std::mem::take(&mut self.records);
        let taking = self.stages.taking();
        self.stages.on_event(event, self.clock.now(), &mut records);
        let mut queued = self.queue(&mut records);
        // A big job's names: a slice an event after its publication (which
        // took the first), the returns between them placed or waiting for
        // their names.
        if taking && queued.is_ok() {
            if let Some(mut names) = self.stages.take_names() {
                queued = self.queue(&mut names);
            }
        }
        if records.capacity() <= KEPT_RECORDS {
            self.records = records;
        }
        queued
    }

    fn batch_end(&mut self, received: Option<Instant>) -> anyhow::Result<()> {
        if self.unflushed {
            self.outputs.flush()?;
            self.unflushed = false;
        }
        match received {
            Some(received) => {
                self.changed(received);
                self.timed_work(received)
            }
            None => {
                self.changed(Instant::now());
                Ok(())
            }
        }
    }

    fn gap_started(&mut self, at: SystemTime) -> anyhow::Result<()> {
        self.stages.gap_started();
        if self.gap_since.is_none() && at != UNIX_EPOCH {
            self.gap_since = Some(Stamp::from_system_time(at));
        }
        Ok(())
    }

    fn gap(&mut self, gap: &BusGap) -> anyhow::Result<()> {
        self.changed(Instant::now());
        info!(
            reason = gap.reason.as_str(),
            dropped_frames = gap.dropped_frames,
            "Bus gap."
        );
        // A raw dump has no receive times: its gaps are placed at event time.
        let (mut start, end) = if gap.started_at == UNIX_EPOCH {
            (self.clock.now(), self.clock.now())
        } else {
            (
                Stamp::from_system_time(gap.started_at),
                Stamp::from_system_time(gap.ended_at),
            )
        };
        // A lost connection lost what came after the last event read: when the
        // master dropped a stalled subscriber, the frames read last are old, and
        // their `_stamp` (the master is on this host, one clock) is where the loss
        // began, not the moment they were read.
        let lost_connection = matches!(
            gap.reason,
            GapReason::Disconnected
                | GapReason::Discarded
                | GapReason::ReadError
                | GapReason::Desync
        );
        if lost_connection && self.clock.now() > Stamp(i64::MIN) {
            start = start.min(self.clock.now());
        }
        self.gap_since = None;
        let records = self
            .stages
            .on_gap(start, end, gap.reason.as_str(), gap.dropped_frames);
        self.write(records)
    }

    /// A return that could not be read costs its minion a verdict; a frame that
    /// names nothing could have been any event: a gap.
    fn unreadable(&mut self, tag: Option<&str>, at: SystemTime) -> anyhow::Result<()> {
        let at = if at == UNIX_EPOCH {
            self.clock.now()
        } else {
            Stamp::from_system_time(at)
        };
        let records = match tag.map(event::tag::parse) {
            Some(ParsedTag {
                class: TagClass::JobReturn,
                jid: Some(jid),
                minion: Some(minion),
                ..
            }) => self.stages.on_unreadable_return(jid, minion, at),
            Some(_) => return Ok(()),
            None => {
                self.stages.gap_started();
                self.stages.on_gap(at, at, GapReason::FrameLost.as_str(), 1)
            }
        };
        self.write(records)
    }

    fn connected(&mut self, endpoint: &Endpoint) -> anyhow::Result<()> {
        info!(%endpoint, "Watching the event bus.");
        // The first connection after a restore ends the restart's gap.
        if let Some(from) = self.restart_gap_from.take() {
            let now = Stamp::now();
            info!(from = %from, to = %now, "Bus gap: saltsight was not running.");
            let records = self
                .stages
                .on_gap(from.min(now), now, GapReason::Restart.as_str(), 0);
            self.write(records)?;
        }
        Ok(())
    }

    /// The next deadline when the master's clock reaches it, or the next batch
    /// to seal by age, whichever comes first (monotonic).
    fn next_wakeup(&self) -> Option<Instant> {
        if self.clock.clock != Clock::Wall {
            return None;
        }
        if self.stages.taking() {
            return Some(Instant::now());
        }
        let deadline = self
            .stages
            .next_deadline()
            .map(|d| self.clock.instant_of(d));
        let seal = self.outputs.next_seal_at();
        let checkpoint = self
            .checkpoint
            .as_ref()
            .and_then(|(_, next)| *next)
            .filter(|_| self.unsaved);
        // Something to judge: traffic, jobs waiting for their returns (a
        // drowning master can be silent), or an episode to close.
        let watching = self.stages.under_pressure() || self.stages.tracker().open_jobs() > 0;
        let master = self
            .master
            .as_ref()
            .filter(|m| m.busy || watching)
            .map(|m| m.next);
        deadline
            .into_iter()
            .chain(seal)
            .chain(checkpoint)
            .chain(master)
            .chain(self.next_connections_sample())
            .min()
    }

    fn tick(&mut self, now: Instant) -> anyhow::Result<()> {
        // A big job's names, a slice a tick while the bus is quiet: its
        // deadline, the verdicts and the rest wait for the last.
        if let Some(records) = self.stages.take_names() {
            self.changed(now);
            return self.write(records);
        }
        let master_now = self.clock.master_time(now);
        if let Some(deadline) = self.verdicts_due(master_now) {
            self.sample_connections(now, Some(deadline));
        }
        let records = self.stages.advance(master_now);
        if !records.is_empty() {
            self.changed(now);
        }
        self.write(records)?;
        self.outputs.seal(now, false);
        self.timed_work(now)
    }

    fn finish(&mut self, recording: bool) -> anyhow::Result<()> {
        if recording {
            // The end of a recording: event time moves past every deadline.
            let records = self.stages.finish();
            self.write(records)?;
        } else {
            // A big job part way taken is saved whole.
            while let Some(records) = self.stages.take_names() {
                self.write(records)?;
            }
            self.save(Instant::now(), false);
        }
        self.outputs.close()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
