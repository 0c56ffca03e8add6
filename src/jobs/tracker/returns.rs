//! A minion's return: counted against its job (a success, a failure, or a
//! late return after the verdict), a find_job answer taken as evidence, and a
//! return that could not be read.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{JobClosed, JobTracker, millis_between};
use crate::event::args::is_internal;
use crate::event::args::is_state_run;
use crate::event::states::trimmed;
use crate::event::{JobReturn, Text};
use crate::jobs::verdict::{Evidence, MinionState};
use crate::record::{MinionReturn, MissingReason, Record, RecordBody, Trimmed};
use crate::time::Stamp;

impl JobTracker {
    pub(super) fn on_return(&mut self, r: &JobReturn<'_>, at: Stamp, out: &mut Vec<Record>) {
        let (jid, minion) = (r.jid.as_str(), r.minion.as_str());
        if let Some((_, watched)) = self.find_jobs.get(jid) {
            // A find_job answer: `{}` means the minion no longer runs the job.
            let running = r.ret.is_some_and(|raw| !matches!(raw.0, [0x80] | [0xc0]));
            let evidence = if running {
                Evidence::StillRunning
            } else {
                Evidence::NotRunning
            };
            let watched = watched.clone();
            self.note_evidence(&watched, minion, evidence);
            return;
        }
        let fun = r.fun.as_ref().map_or("", Text::as_str);
        if is_internal(fun) {
            return;
        }
        self.stats.returns.inc();
        self.streaks.returned(minion);
        self.stats
            .minions_missing_repeatedly
            .set(self.streaks.repeatedly());
        let states = r.states().map(|states| states.counts());
        let trimmed = r.ret.and_then(|raw| trimmed(raw.0));
        if trimmed.is_some() {
            self.stats.trimmed_returns.inc();
        }
        // A state run Salt trimmed whole or by state hides its failed states.
        let hidden =
            is_state_run(fun) && matches!(trimmed, Some(Trimmed::Return | Trimmed::States));
        let succeeded = r.retcode.unwrap_or(0) == 0
            && r.success != Some(false)
            && states.as_ref().is_none_or(|s| s.failed == 0)
            && !hidden;
        // An open job's jid, function and context are shared by its returns'
        // records.
        let (jid_text, job_fun, context) = match self.open.get_key_value(jid) {
            Some((key, job)) => (Arc::clone(key), Some(&job.fun), job.context.clone()),
            None => (Arc::from(jid), None, self.context_of(r)),
        };
        let mut record = MinionReturn {
            jid: jid_text,
            minion: r.minion_name(),
            fun: r.fun.as_ref().map(|f| match job_fun {
                Some(shared) if **shared == *f.as_str() => Arc::clone(shared),
                _ => Arc::from(f.as_str()),
            }),
            retcode: r.retcode,
            salt_success: r.success,
            succeeded,
            context,
            schedule: r.schedule.as_ref().map(|s| s.as_str().to_owned()),
            duration_ms: None,
            states,
            trimmed,
            return_trace: crate::jobs::context::trace_of(r.traceparent.as_ref()),
        };
        if let Some(job) = self.open.get_mut(jid) {
            record.duration_ms = Some(millis_between(job.published_at, at));
            // Judged not connected at publish, yet it answered: a late return
            // of a job still open.
            let position = job.minions.position(minion);
            let late = match position.map(|at| (at, job.minions.state(at))) {
                Some((
                    position,
                    state @ (MinionState::Pending { .. }
                    | MinionState::NotConnected
                    | MinionState::Queued
                    | MinionState::NotSent),
                )) => {
                    job.minions.set(position, MinionState::Returned);
                    let late = match state {
                        MinionState::NotConnected => {
                            take_back(&mut job.missing, MissingReason::NotConnected);
                            true
                        }
                        MinionState::NotSent => {
                            take_back(&mut job.missing, MissingReason::NotSent);
                            if let Some(batch) = job.batch.as_mut() {
                                batch.info.unsent = batch.info.unsent.saturating_sub(1);
                            }
                            true
                        }
                        // Its sub-batch's `new` was not seen: sent all the same.
                        MinionState::Queued => {
                            if let Some(batch) = job.batch.as_mut() {
                                batch.queued = batch.queued.saturating_sub(1);
                                batch.info.unsent = batch.info.unsent.saturating_sub(1);
                            }
                            false
                        }
                        _ => {
                            job.pending -= 1;
                            self.expected_total -= 1;
                            false
                        }
                    };
                    job.counted(succeeded, at);
                    late
                }
                Some((_, MinionState::Returned | MinionState::Unreadable)) => {
                    self.stats.duplicate_returns.inc();
                    return;
                }
                // Its job's names are being taken and its name is not yet:
                // counted now, placed when it is.
                None => match self
                    .intake
                    .as_mut()
                    .and_then(|intake| intake.early_return(jid, minion, succeeded))
                {
                    Some(true) => {
                        job.pending -= 1;
                        self.expected_total -= 1;
                        job.counted(succeeded, at);
                        false
                    }
                    Some(false) => {
                        self.stats.duplicate_returns.inc();
                        return;
                    }
                    None => {
                        // Not targeted: reported, not counted.
                        self.stats.unplaced_returns.inc();
                        tracing::debug!(
                            jid,
                            minion,
                            "A return from a minion its job did not target."
                        );
                        false
                    }
                },
            };
            if late {
                out.push(
                    self.records
                        .make(at, &[jid, minion], RecordBody::LateReturn(record)),
                );
                return;
            }
            out.push(
                self.records
                    .make(at, &[jid, minion], RecordBody::MinionReturn(record)),
            );
            // A job part way taken is closed once every name is.
            let taking = self.intake.as_ref().is_some_and(|i| i.is_of(jid));
            if job.done() && !taking {
                if let Some(job) = self.open.remove(jid) {
                    self.deadlines.remove(job.deadline, jid);
                    self.close(jid.into(), job, at, false, out);
                }
            } else if job.pending == 0 {
                self.between_sub_batches(jid, at);
            }
            return;
        }
        if let Some(closed) = self.closed.get_mut(jid) {
            let Some(reason) = closed.missing.remove(minion) else {
                // Closed without waiting for it: a second return, or one
                // from a minion it did not target. Kept as a record all
                // the same, never dropped unsaid.
                self.stats.unplaced_returns.inc();
                self.unplaced = true;
                tracing::debug!(
                    jid,
                    minion,
                    "A return to a closed job that did not wait for it."
                );
                out.push(
                    self.records
                        .make(at, &[jid, minion], RecordBody::MinionReturn(record)),
                );
                return;
            };
            self.closed_missing -= 1;
            record.duration_ms = Some(millis_between(closed.summary.published_at, at));
            let summary = &mut closed.summary;
            summary.returned += 1;
            if succeeded {
                summary.succeeded += 1
            } else {
                summary.failed += 1
            }
            take_back(&mut summary.missing, reason);
            summary.revision += 1;
            summary.duration_ms = millis_between(summary.published_at, at);
            summary.first_return_ms.get_or_insert(summary.duration_ms);
            let amended = summary.clone();
            let revision = amended.revision.to_string();
            self.closed_now.push(JobClosed {
                jid: jid.to_owned(),
                revision: amended.revision,
                context: amended.context.clone(),
                at,
            });
            out.push(
                self.records
                    .make(at, &[jid, minion], RecordBody::LateReturn(record)),
            );
            out.push(
                self.records
                    .make(at, &[jid, &revision], RecordBody::JobCompleted(amended)),
            );
            return;
        }
        self.on_unpublished_return(record, at, out);
    }

    /// A return that came but could not be read (`salt/job/<jid>/ret/<minion>`
    /// undecodable, or over the frame cap): the minion answered, so it is not
    /// waited for, and its verdict is `unknown_gap`, never a false `no_response`.
    pub fn on_unreadable_return(
        &mut self,
        jid: &str,
        minion: &str,
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        let start = out.len();
        self.finish_intake(out);
        self.unreadable_return(jid, minion, at, out);
        self.mark_pressure(&mut out[start..]);
    }

    fn unreadable_return(&mut self, jid: &str, minion: &str, at: Stamp, out: &mut Vec<Record>) {
        self.stats.unreadable_returns.inc();
        if self.find_jobs.contains_key(jid) {
            return;
        }
        let Some(job) = self.open.get_mut(jid) else {
            return;
        };
        let Some(position) = job.minions.position(minion) else {
            return;
        };
        if !matches!(job.minions.state(position), MinionState::Pending { .. }) {
            return;
        }
        job.minions.set(position, MinionState::Unreadable);
        job.pending -= 1;
        job.last_return = Some(at);
        self.expected_total -= 1;
        if job.done() {
            if let Some(job) = self.open.remove(jid) {
                self.deadlines.remove(job.deadline, jid);
                self.close(jid.into(), job, at, false, out);
            }
        } else if job.pending == 0 {
            self.between_sub_batches(jid, at);
        }
        self.stats.open_jobs.set(self.open.len() as u64);
    }
}

/// A missing verdict taken back (its minion answered after all): one fewer
/// of `reason`, and the reason gone at none.
fn take_back(missing: &mut BTreeMap<MissingReason, u32>, reason: MissingReason) {
    if let Some(n) = missing.get_mut(&reason) {
        *n -= 1;
        if *n == 0 {
            missing.remove(&reason);
        }
    }
}
