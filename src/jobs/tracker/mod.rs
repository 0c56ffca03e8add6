//! The job tracker: events in, records out, time passed in. No IO and no clock:
//! live, the driver passes the wall clock; under replay, event time, so replay
//! gives the verdicts live gave.
//!
//! Per jid it keeps the expected minions (`new`), their returns, and the evidence
//! about those that have not returned: a start event after the publish (restarted),
//! `saltutil.find_job` answers (still running, or no longer running), a bus gap
//! during the job (cannot know). At the deadline every minion without a return gets
//! exactly one `minion_missing` with one reason, then the job gets `job_completed`.
//! A return after that is a `late_return`, and the job's `job_completed` is
//! re-emitted with the next revision.
//!
//! Invariants:
//! - memory is bounded: at most `max_jobs` open jobs and `max_expected` expected
//!   returns; past that the job with the earliest deadline is closed early
//!   (`evicted: true`) and counted;
//! - a verdict is never "missing" for a job whose life overlaps a bus gap: those
//!   minions are `unknown_gap`;
//! - `minion_start` events within `restart_grace` after a gap are minions
//!   re-announcing themselves to a restarted master, not restarts.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use compact_str::CompactString;
use foldhash::{HashMap, HashMapExt};

use self::minions::{JobMinions, SharedLists};
use super::context::ContextRules;
pub use super::context::context_of_return;
use super::deadlines::{Deadlines, prune};
use super::presence::Presence;
pub use super::settings::{TrackerConfig, TrackerStats};
use super::streaks::Streaks;
use super::verdict::{Evidence, MinionState, Verdict};
use crate::config::glob::Glob;
use crate::event::args::{raw_to_json, timeout_kwarg};
use crate::event::{Body, Event, JobReturn, Raw, TextList};
use crate::record::episodes::{EpisodeWindow, episode_during};
use crate::record::{
    BusGapRecord, JobCompleted, JobContext, MAX_LISTED_MINIONS, MinionMissing, MissingReason,
    Record, RecordBody, RecordFactory, Shared,
};
use crate::time::Stamp;
pub use intake::{FIRST_SLICE, INTAKE_SLICE};

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Job {
    /// Shared with its returns' `minion_return` records.
    fun: Arc<str>,
    tgt: Vec<String>,
    context: Shared<JobContext>,
    published_at: Stamp,
    deadline: Stamp,
    minions: JobMinions,
    pending: usize,
    returned: u32,
    succeeded: u32,
    failed: u32,
    missing: BTreeMap<MissingReason, u32>,
    first_return: Option<Stamp>,
    last_return: Option<Stamp>,
    overlaps_gap: bool,
    /// A `salt -b` run: its sub-batches, and who it has not sent to yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    batch: Option<Box<batch::BatchRun>>,
}

impl Job {
    /// Nothing left to wait for: every minion sent the job has answered (or
    /// been judged), and its batch, if any, has nobody queued or has ended.
    fn done(&self) -> bool {
        self.pending == 0
            && self
                .batch
                .as_ref()
                .is_none_or(|b| b.queued == 0 || b.info.ended.is_some())
    }

    /// A return counted, at `at`.
    fn counted(&mut self, succeeded: bool, at: Stamp) {
        self.returned += 1;
        if succeeded {
            self.succeeded += 1
        } else {
            self.failed += 1
        }
        self.first_return.get_or_insert(at);
        self.last_return = Some(at);
    }

    /// A return [`Job::counted`] taken back (its minion was not targeted;
    /// its times stay: it did answer then).
    fn uncounted(&mut self, succeeded: bool) {
        self.returned -= 1;
        if succeeded {
            self.succeeded -= 1
        } else {
            self.failed -= 1
        }
    }
}

/// A job the tracker completed (its `job_completed` of `revision` was emitted at
/// `at`): the next stages close what they kept for it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobClosed {
    pub jid: String,
    pub revision: u32,
    pub context: Shared<JobContext>,
    pub at: Stamp,
}

/// Which commit of each watched state tree a job runs under (tree → commit).
pub type Commits = BTreeMap<String, String>;

/// How the tracker judged the return the last event was, for the stages
/// after it (who and what ran are the event's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReturnSeen {
    pub succeeded: bool,
    /// Run with `test=True` (its job's context).
    pub test: bool,
}

/// A job past its verdict that still has missing minions, waiting for late returns.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct ClosedJob {
    summary: JobCompleted,
    missing: HashMap<Box<str>, MissingReason>,
}

pub struct JobTracker {
    /// `config.deadlines`' patterns, compiled, in the same order.
    deadline_globs: Vec<(Glob, Duration)>,
    config: TrackerConfig,
    records: RecordFactory,
    /// By jid, shared with their returns' `minion_return` records.
    open: HashMap<Arc<str>, Job>,
    /// The open jobs' lists of expected minions, each kept once.
    lists: SharedLists,
    deadlines: Deadlines,
    expected_total: usize,
    closed: HashMap<Box<str>, ClosedJob>,
    closed_order: VecDeque<(Stamp, Box<str>)>,
    /// find_job jid → the jid it asks about.
    find_jobs: HashMap<Box<str>, (Stamp, Box<str>)>,
    find_jobs_order: VecDeque<(Stamp, Box<str>)>,
    runners: HashMap<Box<str>, (Box<str>, Stamp)>,
    contexts: ContextRules,
    last_gap_end: Option<Stamp>,
    /// A gap has begun and its end is not known yet: nothing can be judged.
    gap_open: bool,
    /// Jobs completed (or amended) since the last [`JobTracker::drain_closed`].
    closed_now: Vec<JobClosed>,
    /// Each minion's run of jobs missed.
    streaks: Streaks,
    /// Which minions the master has connected.
    presence: Presence,
    /// Jobs being closed, their verdicts given a batch at a time.
    closing: VecDeque<closing::Closing>,
    /// A big job just published, its names taken a slice at a time.
    intake: Option<intake::Intake>,
    /// Missing minions remembered by closed jobs, for their late returns.
    closed_missing: usize,
    /// The master pressure episodes, as the pressure stage last said:
    /// verdicts and jobs that overlapped one carry its id.
    pressure: Vec<EpisodeWindow>,
    /// The return the last event was, as judged here.
    last_return: Option<ReturnSeen>,
    /// The last event was a return kept as a record but not counted.
    unplaced: bool,
    /// Recent `test.ping` jobs, which a batch chooses its minions with.
    pings: batch::Pings,
    /// A sub-batch's own jid → its batch's (Salt before 3008.2).
    sub_jids: crate::fifo::FifoMap<Arc<str>>,
    /// The master fires the bare `<jid>` event (3006, 3007): its batches
    /// give each sub-batch a jid of its own.
    legacy_batches: bool,
    pub stats: std::sync::Arc<TrackerStats>,
}

fn millis_between(from: Stamp, to: Stamp) -> u64 {
    u64::try_from(to.micros_since(from).max(0) / 1000).unwrap_or(0)
}

/// The first [`MAX_LISTED_MINIONS`] of a job's minions, as a record lists them.
fn listed(minions: &[&str]) -> Vec<CompactString> {
    minions
        .iter()
        .take(MAX_LISTED_MINIONS)
        .map(|&minion| CompactString::from(minion))
        .collect()
}

impl JobTracker {
    pub fn new(mut config: TrackerConfig, records: RecordFactory) -> Self {
        let streaks = Streaks::new(config.max_minions);
        let presence = Presence::new(config.max_minions);
        let api_users = config.api_users.clone();
        // Longest glob first: the most specific pattern wins.
        config
            .deadlines
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        let max_jobs = config.max_jobs;
        let deadline_globs = config
            .deadlines
            .iter()
            .map(|(pattern, d)| (Glob::new(pattern), *d))
            .collect();
        Self {
            deadline_globs,
            config,
            records,
            open: HashMap::new(),
            lists: SharedLists::default(),
            deadlines: Deadlines::default(),
            expected_total: 0,
            closed: HashMap::new(),
            closed_order: VecDeque::new(),
            find_jobs: HashMap::new(),
            find_jobs_order: VecDeque::new(),
            runners: HashMap::new(),
            contexts: ContextRules::new(api_users),
            last_gap_end: None,
            gap_open: false,
            closed_now: Vec::new(),
            closing: VecDeque::new(),
            intake: None,
            streaks,
            presence,
            closed_missing: 0,
            pressure: Vec::new(),
            last_return: None,
            unplaced: false,
            pings: batch::Pings::new(),
            sub_jids: crate::fifo::FifoMap::new(max_jobs.max(1)),
            legacy_batches: false,
            stats: std::sync::Arc::default(),
        }
    }

    /// The jobs completed or amended since the last call, in order.
    pub fn drain_closed(&mut self) -> Vec<JobClosed> {
        std::mem::take(&mut self.closed_now)
    }

    /// When the next verdict is due.
    pub fn next_deadline(&self) -> Option<Stamp> {
        self.deadlines.next()
    }

    pub fn open_jobs(&self) -> usize {
        self.open.len()
    }

    /// How long a closed job is remembered for its late returns.
    pub fn late_window(&self) -> std::time::Duration {
        self.config.late_window
    }

    /// Whether the job is open (published and not yet closed).
    pub fn is_open(&self, jid: &str) -> bool {
        self.open.contains_key(jid)
    }

    /// An open job's jid and function, as its returns' records share them,
    /// and its context.
    pub fn open_job(&self, jid: &str) -> Option<(&Arc<str>, &Arc<str>, &Shared<JobContext>)> {
        self.open
            .get_key_value(jid)
            .map(|(jid, job)| (jid, &job.fun, &job.context))
    }

    /// What is known of a job's context (open, or closed within the late window).
    pub fn context(&self, jid: &str) -> Option<&Shared<JobContext>> {
        match self.open.get(jid) {
            Some(job) => Some(&job.context),
            None => self.closed.get(jid).map(|c| &c.summary.context),
        }
    }

    /// The context of return `r`'s records: its job's when the job is known
    /// (open or closed), what the return itself says of a job never seen
    /// published.
    pub fn context_of(&self, r: &JobReturn<'_>) -> Shared<JobContext> {
        self.context(r.jid.as_str())
            .cloned()
            .unwrap_or_else(|| Shared::new(context_of_return(r)))
    }

    pub fn expected_outstanding(&self) -> usize {
        self.expected_total
    }

    fn deadline_for(&self, fun: &str, arg: Option<Raw<'_>>) -> Duration {
        let configured = self
            .deadline_globs
            .iter()
            .find(|(pattern, _)| pattern.matches(fun))
            .map_or(self.config.default_deadline, |(_, d)| *d);
        match timeout_kwarg(arg) {
            Some(t) if t + self.config.timeout_grace > configured => t + self.config.timeout_grace,
            _ => configured,
        }
    }

    /// Takes one event observed at `now` (its own `_stamp` is preferred).
    pub fn on_event(&mut self, event: &Event<'_>, now: Stamp, out: &mut Vec<Record>) {
        self.on_event_with(event, now, &mut |_, _| Commits::new(), out);
    }

    /// [`JobTracker::on_event`], with `commits` asked, for a job it publishes
    /// (jid, at), which commit of each watched tree the job runs under: the
    /// `job_published` record is made whole, with its commits.
    pub fn on_event_with(
        &mut self,
        event: &Event<'_>,
        now: Stamp,
        commits: &mut dyn FnMut(&str, Stamp) -> Commits,
        out: &mut Vec<Record>,
    ) {
        let start = out.len();
        self.unplaced = false;
        if self.needs_every_name(&event.body) {
            self.finish_intake(out);
        }
        self.take_event(event, now, commits, out);
        self.last_return = out[start..]
            .iter()
            .rev()
            .filter(|_| !self.unplaced)
            .find_map(|r| match &r.body {
                RecordBody::MinionReturn(m) | RecordBody::LateReturn(m) => Some(ReturnSeen {
                    succeeded: m.succeeded,
                    test: m.context.test,
                }),
                _ => None,
            });
        self.mark_pressure(&mut out[start..]);
        self.stats.open_jobs.set(self.open.len() as u64);
    }

    /// The return the last event was (none when it was no return, or one
    /// not counted: a duplicate, a find_job answer).
    pub fn last_return(&self) -> Option<ReturnSeen> {
        self.last_return
    }

    /// The master pressure episodes as the pressure stage now says them.
    pub fn set_pressure(&mut self, windows: Vec<EpisodeWindow>) {
        self.pressure = windows;
    }

    /// Verdicts and jobs whose window overlapped a master pressure episode
    /// carry its id: set here, on the tracker's own records, before they are
    /// handed on.
    fn mark_pressure(&self, records: &mut [Record]) {
        if self.pressure.is_empty() {
            return;
        }
        for record in records {
            let at = record.at;
            match &mut record.body {
                RecordBody::MinionMissing(m) => {
                    m.during_master_pressure =
                        episode_during(&self.pressure, m.published_at, m.deadline)
                            .map(str::to_owned);
                }
                RecordBody::JobCompleted(c) => {
                    c.during_master_pressure =
                        episode_during(&self.pressure, c.published_at, at).map(str::to_owned);
                }
                _ => {}
            }
        }
    }

    fn take_event(
        &mut self,
        event: &Event<'_>,
        now: Stamp,
        commits: &mut dyn FnMut(&str, Stamp) -> Commits,
        out: &mut Vec<Record>,
    ) {
        let at = event.stamp.unwrap_or(now);
        match &event.body {
            Body::JobNew(p) => self.on_new(p, event.frame, at, commits, out),
            Body::JobPublish(p) => {
                if let Some(job) = self.open.get_mut(p.jid.as_str()) {
                    if let Some(meta) = raw_to_json(p.metadata) {
                        let context = job.context.make_mut();
                        if meta.get(crate::record::RETRY_OF).is_some() {
                            context.run_kind = crate::record::RunKind::Reactor;
                        }
                        context.metadata = Some(meta);
                    }
                    // The publish event carries the job's trace too, when `new` did not.
                    if job.context.trace.is_none() {
                        job.context.make_mut().trace =
                            crate::jobs::context::trace_of(p.traceparent.as_ref());
                    }
                }
            }
            Body::JobReturn(r) => self.on_return(r, at, out),
            Body::JobProgress(p) => {
                self.note_evidence(p.jid.as_str(), p.minion.as_str(), Evidence::StillRunning)
            }
            Body::MinionStart(s) => self.on_minion_start(s.minion.as_str(), at),
            Body::RunNew(r) => self.on_runner_new(r.jid.as_str(), r.fun.as_ref(), at, commits, out),
            Body::RunReturn(r) => {
                self.on_runner_return(r.jid.as_str(), r.fun.as_ref(), r.success, at, out)
            }
            Body::RunArgs(r) => self.contexts.on_orchestration_step(r, at),
            Body::Presence(p) => self.on_presence(p, at),
            Body::Batch(b) => self.on_batch(b, at, commits, out),
            Body::JobMinions(_) => self.legacy_batches = true,
            _ => {}
        }
    }

    fn note_evidence(&mut self, jid: &str, minion: &str, new: Evidence) {
        let Some(job) = self.open.get_mut(jid) else {
            return;
        };
        job.minions.update(minion, |state| {
            if let MinionState::Pending {
                evidence, asked_at, ..
            } = state
            {
                *evidence = new;
                *asked_at = None;
            }
        });
    }

    /// What the master's connections to its publish port say at `at` (read
    /// by the agent, live only: a recording has no connections).
    pub fn on_connections(&mut self, view: &crate::master_connections::ConnectionView, at: Stamp) {
        let refused = self.presence.refused;
        self.presence.observe(view, at);
        self.count_presence(refused);
    }

    /// Presence's figures after it took something in (`refused` minions not
    /// followed before).
    fn count_presence(&mut self, refused: u64) {
        self.stats
            .presence_not_followed
            .add(self.presence.refused - refused);
        self.stats
            .minions_connected
            .set(self.presence.connected() as u64);
    }

    /// `salt/presence/present` (the master's whole list) or `.../change`.
    fn on_presence(&mut self, p: &crate::event::Presence<'_>, at: Stamp) {
        let refused = self.presence.refused;
        if let Some(present) = &p.present {
            self.presence.present(present.iter(), at);
        }
        if p.new.is_some() || p.lost.is_some() {
            let new = p.new.iter().flat_map(TextList::iter);
            let lost = p.lost.iter().flat_map(TextList::iter);
            self.presence.change(new, lost, at);
        }
        self.count_presence(refused);
    }

    fn on_minion_start(&mut self, minion: &str, at: Stamp) {
        let after_gap = self
            .last_gap_end
            .is_some_and(|end| at >= end && at <= end.plus(self.config.restart_grace));
        if after_gap {
            self.stats.restarts_ignored_after_gap.inc();
            return;
        }
        for job in self.open.values_mut() {
            if job.published_at < at {
                job.minions.update(minion, |state| {
                    if let MinionState::Pending { restarted, .. } = state {
                        *restarted = true;
                    }
                });
            }
        }
    }

    /// A gap has begun (the connection was lost, or frames are being dropped):
    /// every open job overlaps it, and so does every job seen until it ends.
    pub fn on_gap_start(&mut self) {
        self.gap_open = true;
        self.presence.forget_view();
        for job in self.open.values_mut() {
            job.overlaps_gap = true;
        }
    }

    /// A bus gap: every open job published before its end overlaps it.
    pub fn on_gap(
        &mut self,
        started_at: Stamp,
        ended_at: Stamp,
        reason: &'static str,
        dropped: u64,
        out: &mut Vec<Record>,
    ) {
        for job in self.open.values_mut() {
            if job.published_at <= ended_at {
                job.overlaps_gap = true;
            }
        }
        self.gap_open = false;
        // Minions re-announce themselves to a master that restarted: only a lost
        // connection can mean that, not frames dropped or a desync.
        if matches!(reason, "disconnected" | "read_error") {
            self.last_gap_end = Some(ended_at);
        }
        let key = started_at.0.to_string();
        out.push(self.records.make(
            ended_at,
            &[&key, reason],
            RecordBody::BusGap(BusGapRecord {
                reason,
                started_at,
                ended_at,
                duration_ms: millis_between(started_at, ended_at),
                dropped_frames: dropped,
            }),
        ));
    }

    /// Gives verdicts to every job whose deadline is at or before `now`, and forgets
    /// closed jobs past the late window.
    pub fn advance(&mut self, now: Stamp, out: &mut Vec<Record>) {
        let start = out.len();
        // A deadline due may be the job being taken's.
        if self.deadlines.next().is_some_and(|due| due <= now) {
            self.finish_intake(out);
        }
        while let Some((deadline, jid)) = self.deadlines.pop_due(now) {
            if let Some(job) = self.open.remove(&*jid) {
                self.close(jid, job, deadline, false, out);
            }
        }
        self.stats.open_jobs.set(self.open.len() as u64);
        let (window, cap) = (self.config.late_window, self.config.max_jobs);
        self.prune_closed(now, window, cap);
        prune(
            &mut self.find_jobs_order,
            &mut self.find_jobs,
            now,
            window,
            cap,
        );
        self.mark_pressure(&mut out[start..]);
    }

    /// End of a recording: every open job reaches its deadline.
    pub fn finish(&mut self, out: &mut Vec<Record>) {
        let start = out.len();
        self.finish_intake(out);
        while let Some((deadline, jid)) = self.deadlines.pop_first() {
            if let Some(job) = self.open.remove(&*jid) {
                self.close(jid, job, deadline, false, out);
            }
        }
        self.stats.open_jobs.set(0);
        self.mark_pressure(&mut out[start..]);
    }

    fn remember_find_job(&mut self, jid: &str, watched: String, at: Stamp) {
        self.find_jobs.insert(jid.into(), (at, watched.into()));
        self.find_jobs_order.push_back((at, jid.into()));
    }

    /// Closes the jobs with the earliest deadlines until `incoming` more expected
    /// returns and one more job fit the caps.
    fn make_room(&mut self, incoming: usize, at: Stamp, out: &mut Vec<Record>) {
        while !self.open.is_empty()
            && (self.open.len() >= self.config.max_jobs
                || self.expected_total + incoming > self.config.max_expected)
        {
            let Some((_, jid)) = self.deadlines.pop_first() else {
                break;
            };
            if let Some(job) = self.open.remove(&*jid) {
                self.stats.evicted_jobs.inc();
                self.close(jid, job, at, true, out);
            }
        }
    }

    /// A verdict's record: given at publish (`at_publish`: the master's
    /// `missing`, or presence had the minion not connected), or at the deadline.
    fn missing_record(
        &mut self,
        jid: &str,
        job: &Job,
        minion: &str,
        verdict: Verdict,
        at_publish: bool,
    ) -> Record {
        let reason = verdict.reason;
        let (streak, since) = self
            .streaks
            .missed(minion, reason, job.published_at)
            .unwrap_or_else(|| {
                self.stats.minions_not_followed.inc();
                (1, None)
            });
        self.stats
            .minions_missing_repeatedly
            .set(self.streaks.repeatedly());
        self.records.make(
            if at_publish {
                job.published_at
            } else {
                job.deadline
            },
            &[jid, minion],
            RecordBody::MinionMissing(MinionMissing {
                jid: jid.to_owned(),
                minion: minion.to_owned(),
                fun: job.fun.to_string(),
                reason,
                evidence: verdict.evidence,
                disconnected_at: verdict.disconnected_at,
                address: verdict.address.map(|a| a.to_string()),
                streak,
                missing_since: since.filter(|_| streak > 1),
                published_at: job.published_at,
                deadline: job.deadline,
                during_master_pressure: None,
                context: job.context.clone(),
            }),
        )
    }
}

mod batch;
mod closing;
mod intake;
mod minions;
mod publish;
mod returns;
mod runners;
pub mod saved;
mod unpublished;

#[cfg(test)]
mod tests;
