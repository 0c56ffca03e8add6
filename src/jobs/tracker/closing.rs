//! Closing a job: a verdict for every minion still pending, then its
//! `job_completed`. A job of hundreds of thousands of minions is closed a batch of
//! [`VERDICT_BATCH`] verdicts at a time (the driver asks for more with
//! [`JobTracker::more`] before the next event), so no call holds more than one
//! batch of records. A closed job's missing minions are remembered for their
//! late returns, within `jobs.max_expected` over all closed jobs.

use foldhash::HashMap;

use super::minions::JobMinions;
use super::{ClosedJob, Job, JobClosed, JobTracker, millis_between};
use crate::jobs::verdict::{MinionState, Verdict, verdict};
use crate::record::{BatchEnd, JobCompleted, MissingReason, Record, RecordBody};
use crate::time::Stamp;

/// Verdict records one call gives at most.
pub const VERDICT_BATCH: usize = 4096;

/// A job whose verdicts are being given.
pub(super) struct Closing {
    jid: Box<str>,
    job: Job,
    at: Stamp,
    evicted: bool,
    expected: usize,
    verdicts: Vec<(Box<str>, Verdict)>,
    /// Minions judged at publish, `not_connected` or `not_sent` (their
    /// records are out).
    judged_at_publish: Vec<(Box<str>, MissingReason)>,
    next: usize,
}

impl JobTracker {
    /// Verdicts for the minions still pending, then `job_completed`. An evicted
    /// job's pending minions are not judged: saltsight stopped watching, which
    /// says nothing about them (its `job_completed` says `evicted`).
    pub(super) fn close(
        &mut self,
        jid: Box<str>,
        mut job: Job,
        at: Stamp,
        evicted: bool,
        out: &mut Vec<Record>,
    ) {
        let mut expected = job.minions.len();
        let (overlaps_gap, deadline) = (job.overlaps_gap, job.deadline);
        let presence = &self.presence;
        let mut judged_at_publish = Vec::new();
        let mut verdicts: Vec<(Box<str>, Verdict)> = Vec::new();
        // A batch's minions still queued were never sent the job; an
        // inferred batch with no second sub-batch was an ordinary job, and
        // its queue is forgotten.
        let unsent = Self::unsent_verdict(&job);
        if let Some(batch) = job.batch.as_mut() {
            if batch.info.ended.is_none() {
                batch.info.ended = Some(if batch.queued > 0 {
                    BatchEnd::Deadline
                } else {
                    BatchEnd::Complete
                });
            }
        }
        // In name order: the verdicts come out sorted.
        for (minion, state) in job.minions.iter() {
            match state {
                MinionState::NotConnected => {
                    judged_at_publish.push((minion.into(), MissingReason::NotConnected))
                }
                MinionState::NotSent => {
                    judged_at_publish.push((minion.into(), MissingReason::NotSent))
                }
                MinionState::Queued => match unsent {
                    Some(verdict) if !evicted => verdicts.push((minion.into(), verdict)),
                    Some(_) => {}
                    None => expected -= 1,
                },
                MinionState::Pending { .. } | MinionState::Unreadable if !evicted => {
                    let connection = presence.connection(minion, job.published_at, at);
                    let verdict = Verdict {
                        address: presence.address(minion),
                        ..verdict(state, overlaps_gap, deadline, connection)
                    };
                    verdicts.push((minion.into(), verdict));
                }
                _ => {}
            }
        }
        job.minions = JobMinions::default();
        if unsent.is_none() && job.batch.as_ref().is_some_and(|b| !b.from_events) {
            job.batch = None;
        }
        if let Some(batch) = job.batch.as_mut() {
            batch.queued = 0;
            batch.info.unsent = u32::try_from(
                verdicts
                    .iter()
                    .filter(|(_, v)| v.reason == MissingReason::NotSent)
                    .count()
                    + judged_at_publish
                        .iter()
                        .filter(|(_, r)| *r == MissingReason::NotSent)
                        .count(),
            )
            .unwrap_or(u32::MAX);
        }
        self.expected_total -= job.pending;
        for (_, verdict) in &verdicts {
            *job.missing.entry(verdict.reason).or_default() += 1;
        }
        self.closing.push_back(Closing {
            jid,
            job,
            at,
            evicted,
            expected,
            verdicts,
            judged_at_publish,
            next: 0,
        });
        self.emit_closing(out);
    }

    /// Whether a job is part way through its verdicts: call
    /// [`JobTracker::more`] before the next event.
    pub fn has_more(&self) -> bool {
        !self.closing.is_empty()
    }

    /// The next batch of verdicts of the jobs being closed.
    pub fn more(&mut self, out: &mut Vec<Record>) {
        let start = out.len();
        self.emit_closing(out);
        self.mark_pressure(&mut out[start..]);
    }

    fn emit_closing(&mut self, out: &mut Vec<Record>) {
        let limit = out.len() + VERDICT_BATCH;
        while let Some(mut closing) = self.closing.pop_front() {
            while closing.next < closing.verdicts.len() {
                if out.len() >= limit {
                    self.closing.push_front(closing);
                    return;
                }
                let (minion, verdict) = &closing.verdicts[closing.next];
                out.push(self.missing_record(&closing.jid, &closing.job, minion, *verdict, false));
                closing.next += 1;
            }
            self.complete(closing, out);
        }
    }

    /// Every verdict given: the job's `job_completed`, and it is remembered for
    /// the late window.
    fn complete(&mut self, closing: Closing, out: &mut Vec<Record>) {
        let Closing {
            jid,
            mut job,
            at,
            evicted,
            expected,
            verdicts,
            judged_at_publish,
            ..
        } = closing;
        let end = if job.pending == 0 {
            job.last_return.unwrap_or(at)
        } else {
            at
        };
        let summary = JobCompleted {
            jid: jid.to_string(),
            fun: job.fun.to_string(),
            tgt: std::mem::take(&mut job.tgt),
            expected: u32::try_from(expected).unwrap_or(u32::MAX),
            returned: job.returned,
            succeeded: job.succeeded,
            failed: job.failed,
            missing: job.missing.clone(),
            published_at: job.published_at,
            duration_ms: millis_between(job.published_at, end),
            first_return_ms: job
                .first_return
                .map(|t| millis_between(job.published_at, t)),
            revision: 0,
            evicted,
            during_master_pressure: None,
            context: std::mem::take(&mut job.context),
            batch: job.batch.take().map(|b| Box::new(b.info)),
        };
        out.push(
            self.records
                .make(at, &[&jid, "0"], RecordBody::JobCompleted(summary.clone())),
        );
        self.closed_now.push(JobClosed {
            jid: jid.to_string(),
            revision: 0,
            context: summary.context.clone(),
            at,
        });
        let missing: HashMap<Box<str>, MissingReason> = verdicts
            .into_iter()
            .map(|(minion, verdict)| (minion, verdict.reason))
            .chain(judged_at_publish)
            .collect();
        self.closed_missing += missing.len();
        // Kept for the late window even with nothing missing: a repeated `new`
        // must not open the job again.
        self.closed_order.push_back((at, jid.clone()));
        if let Some(old) = self.closed.insert(jid, ClosedJob { summary, missing }) {
            self.closed_missing -= old.missing.len();
        }
        self.forget_closed_beyond_bound();
    }

    /// Forgets closed jobs past the late window, or beyond `cap` of them.
    pub(super) fn prune_closed(&mut self, now: Stamp, window: std::time::Duration, cap: usize) {
        while let Some((at, _)) = self.closed_order.front() {
            if at.plus(window) > now && self.closed_order.len() <= cap {
                break;
            }
            if let Some((_, jid)) = self.closed_order.pop_front() {
                if let Some(old) = self.closed.remove(&jid) {
                    self.closed_missing -= old.missing.len();
                }
            }
        }
    }

    /// Closed jobs' missing minions stay within `max_expected` in all: the oldest
    /// closed jobs are forgotten first (their late returns then count as unknown).
    fn forget_closed_beyond_bound(&mut self) {
        while self.closed_missing > self.config.max_expected {
            let Some((_, jid)) = self.closed_order.pop_front() else {
                break;
            };
            if let Some(old) = self.closed.remove(&jid) {
                self.closed_missing -= old.missing.len();
                self.stats.closed_jobs_forgotten.inc();
            }
        }
    }
}
