//! A job's publication (`salt/job/<jid>/new`): who is expected, who is
//! judged at once (not connected, or never sent by its batch), the job's
//! `job_published`; the salt CLI's own jobs taken as evidence; a batch's
//! next sub-batch handed to `batch`.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::intake::Expected;
use super::minions::JobMinions;
use super::{Commits, Job, JobTracker, batch, listed};
use crate::event::args::{first_arg, is_internal, raw_to_json, text_refs, texts};
use crate::event::{JobPublication, Text};
use crate::jobs::verdict::MinionState;
use crate::record::{JobPublished, Record, RecordBody, Shared};
use crate::time::Stamp;

impl JobTracker {
    pub(super) fn on_new(
        &mut self,
        p: &JobPublication<'_>,
        frame: Option<&Bytes>,
        at: Stamp,
        commits: &mut dyn FnMut(&str, Stamp) -> Commits,
        out: &mut Vec<Record>,
    ) {
        let jid = p.jid.as_str();
        let fun = p.fun.as_ref().map_or("", Text::as_str);
        if is_internal(fun) {
            self.stats.internal_jobs.inc();
            if let Some(watched) = first_arg(p.arg) {
                // A sub-batch's own jid is its batch's job.
                let watched = match self.batch_of(&watched) {
                    Some(batch) => batch.to_string(),
                    None => watched,
                };
                // Who is asked: an answer clears it, silence is evidence too.
                if let Some(job) = self.open.get_mut(watched.as_str()) {
                    for minion in text_refs(p.minions.as_ref()) {
                        job.minions.update(minion, |state| {
                            if let MinionState::Pending { asked_at, .. } = state {
                                *asked_at = Some(at);
                            }
                        });
                    }
                }
                self.remember_find_job(jid, watched, at);
            }
            return;
        }
        // A batch's next sub-batch: under its own jid (3008.2+), or under one
        // of its own (before).
        if let Some(job) = self.open.get(jid) {
            let names = text_refs(p.minions.as_ref());
            let sends = job.batch.is_some() || names.iter().any(|m| !job.minions.contains(m));
            if sends {
                self.send_sub_batch(jid, None, p, at, out);
            }
            return; // else a repeated `new`
        }
        if self.closed.contains_key(jid) {
            return; // seen already (a repeated `new`)
        }
        if let Some(batch) = self.next_sub_batch_of(p) {
            self.send_sub_batch(&batch, Some(jid), p, at, out);
            return;
        }
        let (read, unread) = self.read_expected(p, fun);
        if fun == "test.ping" {
            self.remember_ping(p, &read, at);
        }
        let batch = self.first_sub_batch(p, &read, at);
        match &batch {
            Some((run, queued)) => {
                let queued: Vec<&str> = queued.iter().map(|m| &**m).collect();
                let run = run.clone();
                let expected = Expected::whole(&read);
                self.publish(p, expected, Some((run, &queued)), at, commits, out);
            }
            None => {
                let expected = Expected {
                    read: &read,
                    unread,
                    frame,
                };
                self.publish(p, expected, None, at, commits, out);
            }
        }
    }

    /// Opens the job `p` publishes, expecting `expected` (a batch's job: with
    /// its run and the minions it has queued), and says so.
    pub(super) fn publish(
        &mut self,
        p: &JobPublication<'_>,
        expected: Expected<'_>,
        batch: Option<(Box<batch::BatchRun>, &[&str])>,
        at: Stamp,
        commits: &mut dyn FnMut(&str, Stamp) -> Commits,
        out: &mut Vec<Record>,
    ) {
        let jid = p.jid.as_str();
        let fun = p.fun.as_ref().map_or("", Text::as_str);
        let not_connected = text_refs(p.missing.as_ref());
        let queued = batch.as_ref().map_or(0, |(_, queued)| queued.len());
        // A job larger than the cap on its own is not tracked minion by minion (it
        // would empty the tracker and still exceed the cap): published, then
        // closed as evicted. A job expecting nobody needs no room.
        let total = expected.total();
        let oversized = total + queued > self.config.max_expected;
        if !oversized && total + queued > 0 {
            self.make_room(total + queued, at, out);
        }
        let deadline = at.plus(self.deadline_for(fun, p.arg));
        let tgt = texts(p.tgt.as_ref());
        let context = Shared::new(self.contexts.for_publication(p, &tgt, at));
        self.stats.jobs_published.inc();
        // A big job's names are listed a slice at a time, then shared.
        let mut minions = match expected.unread {
            Some(_) => JobMinions::growing(total),
            None => JobMinions::pending_shared(&mut self.lists, expected.read),
        };
        let mut batch_run = None;
        if let Some((mut run, queued)) = batch {
            run.queued = u32::try_from(minions.add(
                &mut self.lists,
                queued.iter().copied(),
                MinionState::Queued,
            ))
            .unwrap_or(u32::MAX);
            run.info.unsent = run.queued + u32::try_from(run.unanswered.len()).unwrap_or(0);
            batch_run = Some(run);
        }
        let mut job = Job {
            fun: fun.into(),
            tgt,
            context,
            published_at: at,
            deadline,
            pending: total,
            minions,
            returned: 0,
            succeeded: 0,
            failed: 0,
            missing: BTreeMap::new(),
            first_return: None,
            last_return: None,
            overlaps_gap: self.gap_open,
            batch: batch_run,
        };
        // A batch known from its events announces every minion it targets,
        // those its ping did not hear from too.
        let (announced, announced_count): (std::borrow::Cow<'_, [&str]>, usize) = match &job.batch {
            Some(run) if run.from_events => {
                let mut all: Vec<&str> = job.minions.iter().map(|(m, _)| m).collect();
                all.extend(run.unanswered.iter().map(|m| &**m));
                all.sort_unstable();
                let count = all.len();
                (all.into(), count)
            }
            _ => (expected.read.into(), total),
        };
        out.push(self.records.make(
            at,
            &[jid],
            RecordBody::JobPublished(Box::new(JobPublished {
                jid: jid.to_owned(),
                fun: fun.to_owned(),
                arg: raw_to_json(p.arg),
                tgt: job.tgt.clone(),
                tgt_type: p.tgt_type.as_ref().map(|t| t.as_str().to_owned()),
                user: p.user.as_ref().map(|t| t.as_str().to_owned()),
                expected: listed(&announced),
                expected_count: u32::try_from(announced_count).unwrap_or(u32::MAX),
                not_connected: listed(&not_connected),
                deadline,
                context: job.context.clone(),
                commits: commits(jid, at),
                batch: Self::published_batch(&job),
            })),
        ));
        if let Some(unread) = expected.unread {
            self.open_in_slices(jid, job, expected, unread, p.missing.as_ref(), out);
            return;
        }
        self.judge_absent_at_publish(jid, &mut job, expected.read, p.missing.as_ref(), out);
        self.expected_total += job.pending;
        if oversized {
            self.stats.evicted_jobs.inc();
            self.close(jid.into(), job, at, true, out);
        } else if job.done() {
            self.close(jid.into(), job, at, false, out);
        } else {
            self.deadlines.insert(deadline, jid);
            self.open.insert(jid.into(), job);
        }
    }

    /// Minions just sent the job that presence has not connected now (the
    /// publish did not reach them: judged now), and those the master's
    /// `new` says are not connected.
    pub(super) fn judge_absent_at_publish(
        &mut self,
        jid: &str,
        job: &mut Job,
        sent: &[&str],
        missing: Option<&crate::event::TextList<'_>>,
        out: &mut Vec<Record>,
    ) {
        let absent: Vec<(&str, Option<Stamp>)> = sent
            .iter()
            .filter_map(|&m| Some((m, self.presence.absent_now(m)?)))
            .collect();
        for (minion, since) in absent {
            match job.minions.position(minion) {
                Some(position)
                    if matches!(job.minions.state(position), MinionState::Pending { .. }) =>
                {
                    job.minions.set(position, MinionState::NotConnected);
                }
                _ => continue,
            }
            job.pending -= 1;
            self.judged_not_connected(jid, job, minion, since, out);
        }
        self.judge_master_missing(jid, job, text_refs(missing).into_iter(), out);
    }
}
