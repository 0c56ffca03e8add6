//! `saltsight run`: the agent. Feeds the job tracker, triage and the correlator
//! from the pipeline and hands their records (docs/records.md) to the outputs
//! (`sink`): stdout, files, HTTP through the spool.
//!
//! Per return: triage first (its findings take the job's context from the
//! tracker, as it stands before the return), then the tracker, then the
//! correlator over the tracker's records (HEADs on `job_published`); a job's
//! `failure_group`s follow its `job_completed` (and each amended one).
//!
//! The tracker's clock is chosen here: live, the wall clock, with a wake-up at the
//! next deadline; under replay, event time (the events' `_stamp`), so verdicts come
//! out as they did live, and the end of a recording passes every deadline.

use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, ValueEnum};
use tracing::{debug, info};

use crate::app::Handler;
use crate::bus::{BusGap, Endpoint, Frame};
use crate::config::Config;
use crate::config::outputs::OutputConfig;
use crate::correlate::Correlator;
use crate::event::{Body, Event, Stamp};
use crate::jobs::tracker::context_of_return;
use crate::jobs::{JobTracker, TrackerConfig};
use crate::metrics::Observer;
use crate::record::redact::Redactor;
use crate::record::{JobContext, Record, RecordBody, RecordFactory, RunKind};
use crate::sink::{Outputs, Senders, SinkError};
use crate::triage::{Findings, Triage};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The config's `[[output]]`s (stdout when it has none).
    Config,
    /// Records as JSON lines on stdout only.
    Stdout,
    /// No records (logs and counters only).
    None,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where records go
    #[arg(long, value_enum, default_value = "config")]
    pub output: Output,
    /// Run as root anyway (saltsight needs only read access to the bus socket:
    /// run it as the master's user or a member of its group)
    #[arg(long, env = "SALTSIGHT_ALLOW_ROOT")]
    pub allow_root: bool,
}

/// Opens the outputs `output` selects. Live (`Clock::Wall`), stdout is flushed
/// after each event; replay lets it buffer.
pub fn open_outputs(
    config: &Config,
    output: Output,
    clock: Clock,
) -> Result<(Outputs, Senders), SinkError> {
    let stdout_only = [OutputConfig::stdout()];
    let configs: &[OutputConfig] = match output {
        Output::Config => &config.outputs,
        Output::Stdout => &stdout_only,
        Output::None => &[],
    };
    let flush_each = clock == Clock::Wall;
    Outputs::open(
        configs,
        &config.spool,
        Box::new(std::io::stdout()),
        flush_each,
    )
}

/// Which time the tracker runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The wall clock (live).
    Wall,
    /// The latest `_stamp` seen (replay).
    EventTime,
}

/// The stages records come from, in data-flow order.
pub struct Pipeline {
    pub tracker: JobTracker,
    pub triage: Triage,
    pub correlator: Correlator,
}

impl Pipeline {
    pub fn from_config(config: &Config) -> Self {
        let records = RecordFactory::new(config.master_id.clone());
        let correlator = Correlator::new(&config.correlate, records.clone());
        let mut triage = config.triage.clone();
        triage.want_outcomes = correlator.watches_states();
        Self {
            tracker: JobTracker::new(TrackerConfig::from(&config.jobs), records),
            triage: Triage::new(triage),
            correlator,
        }
    }
}

/// Drives the pipeline and hands its records to the outputs.
pub struct RecordHandler {
    tracker: JobTracker,
    triage: Triage,
    correlator: Correlator,
    clock: Clock,
    outputs: Outputs,
    /// The gate before the outputs, the log and the metrics.
    redactor: Redactor,
    metrics: Observer,
    event_now: Stamp,
    /// Receive time minus `_stamp` of the latest event: the master's clock offset
    /// plus bus lag. The idle tick judges at `wall clock - offset`, on the master's
    /// clock, so a skewed master or a lagging bus cannot bring verdicts early.
    offset_micros: i64,
    pending: Vec<Record>,
    pub emitted: u64,
}

impl RecordHandler {
    pub fn new(
        pipeline: Pipeline,
        clock: Clock,
        outputs: Outputs,
        redactor: Redactor,
        metrics: Observer,
    ) -> Self {
        let Pipeline {
            tracker,
            triage,
            correlator,
        } = pipeline;
        Self {
            tracker,
            triage,
            correlator,
            clock,
            outputs,
            redactor,
            metrics,
            event_now: Stamp(i64::MIN),
            offset_micros: 0,
            pending: Vec::new(),
            emitted: 0,
        }
    }

    pub fn tracker(&self) -> &JobTracker {
        &self.tracker
    }

    /// The tracker's records from `from` on: HEADs on `job_published`, and the
    /// failure groups of every job completed (or amended) among them.
    fn after_tracker(&mut self, from: usize) {
        self.correlator.on_job_records(&mut self.pending, from);
        let completed: Vec<(String, u32, JobContext, Stamp)> = self.pending[from..]
            .iter()
            .filter_map(|r| match &r.body {
                RecordBody::JobCompleted(c) => {
                    Some((c.jid.clone(), c.revision, c.context.clone(), r.at))
                }
                _ => None,
            })
            .collect();
        for (jid, revision, context, at) in completed {
            let groups = self.triage.close_job(&jid);
            self.correlator
                .on_groups(groups, &context, revision, at, &mut self.pending);
        }
    }

    /// Triage of a return, into records with the job's context.
    fn triage_event(&mut self, event: &Event<'_>, at: Stamp) -> Option<(String, JobContext)> {
        let (findings, context): (Findings, JobContext) = match &event.body {
            Body::JobReturn(r) => {
                let findings = self.triage.on_return(r, at)?;
                let context = self
                    .tracker
                    .context(r.jid.as_str())
                    .cloned()
                    .unwrap_or_else(|| context_of_return(r));
                (findings, context)
            }
            Body::RunReturn(r) => {
                let findings = self.triage.on_runner_return(r, at)?;
                let context = JobContext {
                    run_kind: RunKind::Runner,
                    ..JobContext::default()
                };
                (findings, context)
            }
            _ => return None,
        };
        self.correlator
            .on_findings(&findings, &context, at, &mut self.pending);
        Some((findings.jid, context))
    }

    fn write_pending(&mut self) -> anyhow::Result<()> {
        for record in self.pending.drain(..) {
            self.emitted += 1;
            let record = self.redactor.record(record);
            if let RecordBody::MinionMissing(m) = &record.body {
                info!(jid = %m.jid, minion = %m.minion, fun = %m.fun, reason = m.reason.as_str(), "Minion did not return.");
            } else {
                debug!(kind = record.kind.as_str(), "Record.");
            }
            self.metrics.record(&record);
            self.outputs.write(&record)?;
        }
        self.outputs.flush()?;
        self.sync_metrics();
        Ok(())
    }

    /// The stages' own counts, copied for the next scrape (a few stores).
    fn sync_metrics(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.metrics.jobs_tracked(self.tracker.open_jobs());
        let counts = self.metrics.pipeline();
        let tracker = &self.tracker.stats;
        counts
            .unknown_job_returns
            .store(tracker.unknown_job_returns, Relaxed);
        counts
            .duplicate_returns
            .store(tracker.duplicate_returns, Relaxed);
        counts.evicted_jobs.store(tracker.evicted_jobs, Relaxed);
        let correlate = &self.correlator.stats;
        counts.git_calls.store(correlate.git_calls, Relaxed);
        counts.git_errors.store(correlate.git_errors, Relaxed);
        counts
            .lost_records
            .store(self.outputs.lost_records, Relaxed);
    }
}

impl Handler for RecordHandler {
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
        self.metrics.event(event);
        let now = self.event_now;
        self.tracker.advance(now, &mut self.pending);
        self.after_tracker(0);
        let at = event.stamp.unwrap_or(now);
        let triaged = self.triage_event(event, at);
        let from = self.pending.len();
        self.tracker.on_event(event, now, &mut self.pending);
        self.after_tracker(from);
        // A job the tracker does not follow (scheduled, runner, published
        // unseen) has one return: its groups are complete now.
        if let Some((jid, context)) = triaged {
            if self.tracker.context(&jid).is_none() {
                let groups = self.triage.close_job(&jid);
                self.correlator
                    .on_groups(groups, &context, 0, at, &mut self.pending);
            }
        }
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
        self.after_tracker(0);
        self.write_pending()
    }

    fn connected(&mut self, endpoint: &Endpoint) -> anyhow::Result<()> {
        info!(%endpoint, "Watching the event bus.");
        Ok(())
    }

    /// On the wall clock: the next deadline shifted by the master's offset, or
    /// the next batch to seal by age, whichever comes first.
    fn next_wakeup(&self) -> Option<Stamp> {
        if self.clock != Clock::Wall {
            return None;
        }
        let deadline = self
            .tracker
            .next_deadline()
            .map(|d| Stamp(d.0.saturating_add(self.offset_micros)));
        let seal = self.outputs.next_seal_at().map(Stamp::from_system_time);
        deadline.into_iter().chain(seal).min()
    }

    fn tick(&mut self, now: Stamp) -> anyhow::Result<()> {
        let master_now = Stamp(now.0.saturating_sub(self.offset_micros));
        self.tracker.advance(master_now, &mut self.pending);
        self.after_tracker(0);
        self.write_pending()?;
        self.outputs.seal(now.to_system_time(), false);
        Ok(())
    }

    fn finish(&mut self, recording: bool) -> anyhow::Result<()> {
        if recording {
            // The end of a recording: event time moves past every deadline.
            self.tracker.finish(&mut self.pending);
            self.after_tracker(0);
        }
        self.write_pending()?;
        self.outputs.close()?;
        Ok(())
    }
}
