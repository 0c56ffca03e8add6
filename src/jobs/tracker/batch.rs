//! `salt -b` batches as one job. A batch starts with a `test.ping` to the
//! target (the minions that answer are the batch's; the others are never
//! sent the job), then publishes to a few minions at a time until all have
//! run, or it halts.
//!
//! - Salt 3008.2+ publishes every sub-batch under the batch's one jid and
//!   fires `salt/batch/<jid>/new|progress|complete|halted`: the job opens at
//!   `new` with every minion queued, each sub-batch's `new` sends some, and
//!   `complete` or `halted` ends it.
//! - Earlier releases give each sub-batch a jid of its own and fire no batch
//!   event. A master that fires the bare `<jid>` event (3006, 3007) is one of
//!   those: a list-targeted job following a `test.ping` by the same user, to
//!   some of the minions that answered it, may be a batch's first sub-batch.
//!   It is held open (the others queued) while the next may come, up to
//!   `jobs.batch_gap` after its returns; a job with the same function,
//!   arguments and user, to queued minions, is its next sub-batch, and its
//!   jid names the batch's from then on. A first sub-batch with no second is
//!   an ordinary job after all: its queued minions are forgotten, never judged.
//!
//! A queued minion is not waited for; at the batch's end, one still queued
//! was never sent the job (`not_sent`, `batch_halted` or `batch_ended`), as is
//! a minion that did not answer the batch's ping (`batch_ping_unanswered`).

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::minions::JobMinions;
use super::{Job, JobTracker};
use crate::event::args::{text_refs, texts};
use crate::event::batch::{BatchEvent, BatchStep};
use crate::event::{JobPublication, Raw, Text};
use crate::jobs::verdict::{MinionState, Verdict};
use crate::record::{
    BatchEnd, BatchInfo, MAX_LISTED_MINIONS, MissingEvidence, MissingReason, Record,
};
use crate::time::Stamp;

/// Recent `test.ping` jobs a batch may have chosen its minions with.
const PINGS: usize = 8;
/// How long before a batch its ping may have been published: Salt waits
/// its `timeout` and `gather_job_timeout` for the ping's returns.
const PING_WITHIN: std::time::Duration = std::time::Duration::from_secs(600);

/// A `test.ping` job, as a batch would have chosen its minions with it.
#[derive(Debug)]
pub(super) struct Ping {
    jid: Box<str>,
    user: Option<Box<str>>,
    /// Its target and target type, as a batch event says them.
    target: Box<str>,
    /// Its target as published: the batch's.
    tgt: Vec<String>,
    at: Stamp,
    /// The minions it expected, all pending (only the names are read).
    expected: JobMinions,
}

/// Who answered a ping, and who did not.
type PingOutcome = (Vec<Box<str>>, Vec<Box<str>>);

/// What a batch is, on its job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct BatchRun {
    /// As its records say it (kept current).
    pub(super) info: BatchInfo,
    /// Known from Salt's `salt/batch/...` events (one jid), or inferred from
    /// sub-batches with jids of their own.
    pub(super) from_events: bool,
    /// Minions queued: targeted, not sent yet.
    pub(super) queued: u32,
    /// What its sub-batches repeat (inferred batches): the user and a hash
    /// of the arguments.
    pub(super) user: Option<Box<str>>,
    pub(super) args: u64,
    /// Minions its ping did not hear from, judged once the batch is known
    /// to be one (inferred batches: at its second sub-batch).
    pub(super) unanswered: Vec<Box<str>>,
}

/// Who a batch runs on, as saltsight can tell.
#[derive(Debug, Default)]
struct BatchTargets {
    all: Vec<Box<str>>,
    unanswered: Vec<Box<str>>,
    ping_jid: Option<String>,
}

impl BatchRun {
    fn new(from_events: bool) -> Self {
        BatchRun {
            info: BatchInfo::default(),
            from_events,
            queued: 0,
            user: None,
            args: 0,
            unanswered: Vec::new(),
        }
    }

    /// What a batch event says of it: its size, and whether it ended.
    fn update(&mut self, b: &BatchEvent<'_>) {
        if let Some(size) = b.size.and_then(|s| u32::try_from(s).ok()) {
            self.info.size = Some(size);
        }
        if b.halted || b.step == BatchStep::Halted {
            self.info.ended = Some(BatchEnd::Halted);
            if let Some(reason) = &b.halted_reason {
                self.info.halted_reason = Some(reason.as_str().to_owned());
            }
        } else if b.step == BatchStep::Complete && self.info.ended.is_none() {
            self.info.ended = Some(BatchEnd::Complete);
        }
        self.info.unsent = self.queued + u32::try_from(self.unanswered.len()).unwrap_or(0);
    }

    /// An inferred batch with one sub-batch so far may be an ordinary job.
    pub(super) fn confirmed(&self) -> bool {
        self.from_events || self.info.sub_batches >= 2
    }
}

/// The target a ping or a batch was published to, as one key.
fn target_key(tgt: &[String], tgt_type: Option<&str>) -> Box<str> {
    format!("{}\u{0}{}", tgt.join(","), tgt_type.unwrap_or("glob")).into()
}

fn args_hash(arg: Option<Raw<'_>>) -> u64 {
    let bytes: &[u8] = arg.map_or(&[], |a| a.0);
    // The low half of the stable hash: only compared with itself.
    crate::record::stable_hash([bytes]) as u64
}

impl JobTracker {
    /// Remembers a `test.ping` a batch may follow.
    pub(super) fn remember_ping(&mut self, p: &JobPublication<'_>, expected: &[&str], at: Stamp) {
        let tgt = texts(p.tgt.as_ref());
        if self.pings.len() >= PINGS {
            self.pings.pop_front();
        }
        self.pings.push_back(Ping {
            jid: p.jid.as_str().into(),
            user: p.user.as_ref().map(|u| u.as_str().into()),
            target: target_key(&tgt, p.tgt_type.as_ref().map(Text::as_str)),
            tgt,
            at,
            expected: JobMinions::pending(expected.iter().copied()),
        });
    }

    /// Who answered a remembered ping and who did not (`None`: the ping's
    /// job is forgotten).
    fn ping_outcome(&self, ping: &Ping) -> Option<PingOutcome> {
        let (mut answered, mut unanswered) = (Vec::new(), Vec::new());
        if let Some(job) = self.open.get(&*ping.jid) {
            for (minion, state) in job.minions.iter() {
                if state == MinionState::Returned {
                    answered.push(minion.into());
                } else {
                    unanswered.push(minion.into());
                }
            }
        } else {
            let closed = self.closed.get(&*ping.jid)?;
            for (minion, _) in ping.expected.iter() {
                if closed.missing.contains_key(minion) {
                    unanswered.push(minion.into());
                } else {
                    answered.push(minion.into());
                }
            }
        }
        Some((answered, unanswered))
    }

    /// The latest ping that fits: published by `user` before `at`, to
    /// `target` when it is given.
    fn ping_before(&self, user: Option<&str>, target: Option<&str>, at: Stamp) -> Option<&Ping> {
        self.pings.iter().rev().find(|ping| {
            ping.at <= at
                && at.micros_since(ping.at) <= PING_WITHIN.as_micros() as i64
                && ping.user.as_deref() == user
                && target.is_none_or(|t| *ping.target == *t)
        })
    }

    /// The batch jid a sub-batch's own jid stands for (Salt before 3008.2):
    /// every stage takes the sub-batch's events as the batch's.
    pub fn batch_of(&self, jid: &str) -> Option<&Arc<str>> {
        if self.sub_jids.is_empty() {
            return None;
        }
        self.sub_jids.get(jid)
    }

    /// A `new` the batch `jid` sends (3008.2+: its own jid; before: the
    /// sub-batch's `sub_jid`): its minions leave the queue and are waited for.
    pub(super) fn send_sub_batch(
        &mut self,
        jid: &str,
        sub_jid: Option<&str>,
        p: &JobPublication<'_>,
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        let deadline = at.plus(self.deadline_for(p.fun.as_ref().map_or("", Text::as_str), p.arg));
        let Some(mut job) = self.open.remove(jid) else {
            return;
        };
        let names = text_refs(p.minions.as_ref());
        let mut sent: Vec<&str> = Vec::new();
        let mut unknown: Vec<&str> = Vec::new();
        for &minion in &names {
            match job.minions.position(minion) {
                Some(position) if job.minions.state(position) == MinionState::Queued => {
                    job.minions.set(position, MinionState::pending());
                    sent.push(minion);
                }
                Some(_) => {}
                None => unknown.push(minion),
            }
        }
        let added = job.minions.add(
            &mut self.lists,
            unknown.iter().copied(),
            MinionState::pending(),
        );
        let newly = sent.len() + added;
        let batch = job
            .batch
            .get_or_insert_with(|| Box::new(BatchRun::new(sub_jid.is_none())));
        batch.queued -= u32::try_from(sent.len()).unwrap_or(0).min(batch.queued);
        batch.info.unsent = batch.queued + u32::try_from(batch.unanswered.len()).unwrap_or(0);
        batch.info.sub_batches += 1;
        if let Some(sub) = sub_jid {
            if batch.info.sub_jids.len() < MAX_LISTED_MINIONS {
                batch.info.sub_jids.push(sub.to_owned());
            }
            let batch_jid = Arc::<str>::from(jid);
            self.sub_jids.insert(sub, batch_jid);
        }
        self.stats.batch_sub_batches.inc();
        job.pending += newly;
        self.expected_total += newly;
        if deadline > job.deadline {
            self.deadlines.remove(job.deadline, jid);
            job.deadline = deadline;
            self.deadlines.insert(deadline, jid);
        }
        let just_confirmed = job
            .batch
            .as_ref()
            .is_some_and(|b| !b.from_events && b.info.sub_batches == 2);
        if just_confirmed {
            // The batch's target is its ping's, not its first sub-batch's list.
            let ping = job.batch.as_ref().and_then(|b| b.info.ping_jid.as_deref());
            if let Some(ping) = self.pings.iter().find(|p| Some(&*p.jid) == ping) {
                job.tgt = ping.tgt.clone();
            }
            self.judge_unanswered(jid, &mut job, out);
        }
        let newly_sent: Vec<&str> = sent.iter().chain(&unknown).copied().collect();
        self.judge_absent_at_publish(jid, &mut job, &newly_sent, p.missing.as_ref(), out);
        self.reopen(jid, job, at, out);
    }

    /// A job back in the open set after a change: closed now if it has
    /// nothing left to wait for.
    pub(super) fn reopen(&mut self, jid: &str, job: Job, at: Stamp, out: &mut Vec<Record>) {
        if job.done() {
            self.deadlines.remove(job.deadline, jid);
            self.close(jid.into(), job, at, false, out);
        } else {
            self.open.insert(jid.into(), job);
        }
    }

    /// The minions a batch's ping did not hear from: never sent the job.
    fn judge_unanswered(&mut self, jid: &str, job: &mut Job, out: &mut Vec<Record>) {
        let Some(batch) = job.batch.as_mut() else {
            return;
        };
        let unanswered = std::mem::take(&mut batch.unanswered);
        let added = job.minions.add(
            &mut self.lists,
            unanswered.iter().map(|m| &**m),
            MinionState::NotSent,
        );
        if added == 0 {
            return;
        }
        for minion in &unanswered {
            *job.missing.entry(MissingReason::NotSent).or_default() += 1;
            let verdict = Verdict {
                disconnected_at: self.presence.absent_now(minion).flatten(),
                ..Verdict::new(MissingReason::NotSent, MissingEvidence::BatchPingUnanswered)
            };
            let record = self.missing_record(jid, job, minion, verdict, true);
            out.push(record);
        }
        if let Some(batch) = job.batch.as_mut() {
            batch.info.unsent = batch.queued + u32::try_from(unanswered.len()).unwrap_or(0);
        }
    }

    /// Who a batch event's batch runs on: the minions it names, or (the
    /// master's own batches name none) those its ping heard from; those its
    /// ping did not hear from; and the ping's jid.
    fn batch_targets(&self, b: &BatchEvent<'_>, at: Stamp) -> BatchTargets {
        let user = b.user.as_ref().map(Text::as_str);
        let target = target_key(
            &texts(b.tgt.as_ref()),
            b.tgt_type.as_ref().map(Text::as_str),
        );
        let ping = self.ping_before(user, Some(&target), at);
        let outcome = ping.and_then(|ping| self.ping_outcome(ping));
        let named: Vec<Box<str>> = text_refs(b.minions.as_ref())
            .into_iter()
            .map(Box::from)
            .collect();
        let (all, unanswered) = match outcome {
            Some((answered, unanswered)) => {
                let all = if b.minions.is_some() { named } else { answered };
                let unanswered = unanswered
                    .into_iter()
                    .filter(|m| !all.contains(m))
                    .collect();
                (all, unanswered)
            }
            None => (named, Vec::new()),
        };
        BatchTargets {
            all,
            unanswered,
            ping_jid: ping.map(|p| p.jid.to_string()),
        }
    }

    /// `salt/batch/<jid>/...` (3008.2+).
    pub(super) fn on_batch(
        &mut self,
        b: &BatchEvent<'_>,
        at: Stamp,
        commits: &mut dyn FnMut(&str, Stamp) -> super::Commits,
        out: &mut Vec<Record>,
    ) {
        let jid = b.jid.as_str();
        self.stats.batch_events.inc();
        if self.closed.contains_key(jid) {
            return;
        }
        let known = self
            .open
            .get(jid)
            .and_then(|job| job.batch.as_ref())
            .is_some_and(|b| b.from_events);
        let targets = (!known).then(|| self.batch_targets(b, at));
        if !self.open.contains_key(jid) {
            if b.step.ends() {
                return; // a batch that ended before saltsight saw it begin
            }
            let targets = targets.unwrap_or_default();
            self.open_batch(b, targets, at, commits, out);
            return;
        }
        let Some(mut job) = self.open.remove(jid) else {
            return;
        };
        if let Some(targets) = targets {
            // Joined once running: a sub-batch's `new` came first (the
            // master's own batches), or saltsight started mid-batch.
            let queued = job.minions.add(
                &mut self.lists,
                targets.all.iter().map(|m| &**m),
                MinionState::Queued,
            );
            let batch = job
                .batch
                .get_or_insert_with(|| Box::new(BatchRun::new(true)));
            batch.from_events = true;
            batch.queued += u32::try_from(queued).unwrap_or(u32::MAX);
            batch.info.ping_jid = batch.info.ping_jid.take().or(targets.ping_jid);
            batch.info.sub_batches = batch.info.sub_batches.max(1);
            batch.unanswered = targets.unanswered;
            self.judge_unanswered(jid, &mut job, out);
        }
        // Minions it halted before sending to, when saltsight did not know
        // them: queued, so that they are judged never sent.
        let abandoned = job.minions.add(
            &mut self.lists,
            text_refs(b.abandoned.as_ref()),
            MinionState::Queued,
        );
        let batch = job
            .batch
            .get_or_insert_with(|| Box::new(BatchRun::new(true)));
        batch.queued += u32::try_from(abandoned).unwrap_or(u32::MAX);
        batch.update(b);
        self.reopen(jid, job, at, out);
    }

    /// A batch seen first by its own event: its job, every minion queued,
    /// those its ping did not hear from judged at once.
    fn open_batch(
        &mut self,
        b: &BatchEvent<'_>,
        targets: BatchTargets,
        at: Stamp,
        commits: &mut dyn FnMut(&str, Stamp) -> super::Commits,
        out: &mut Vec<Record>,
    ) {
        let publication = JobPublication {
            jid: b.jid.clone(),
            fun: b.fun.clone(),
            arg: b.arg,
            tgt: b.tgt.clone(),
            tgt_type: b.tgt_type.clone(),
            user: b.user.clone(),
            minions: None,
            missing: None,
            metadata: None,
            traceparent: None,
        };
        let mut batch = BatchRun::new(true);
        batch.info.ping_jid = targets.ping_jid;
        batch.unanswered = targets.unanswered;
        batch.update(b);
        let all: Vec<&str> = targets.all.iter().map(|m| &**m).collect();
        self.publish(
            &publication,
            super::intake::Expected::whole(&[]),
            Some((Box::new(batch), &all)),
            at,
            commits,
            out,
        );
        let jid = b.jid.as_str();
        if let Some(mut job) = self.open.remove(jid) {
            self.judge_unanswered(jid, &mut job, out);
            self.reopen(jid, job, at, out);
        }
    }

    /// Salt before 3008.2: the batch a list-targeted `new` is the next
    /// sub-batch of (same user, function and arguments, to minions it has
    /// queued), if any.
    pub(super) fn next_sub_batch_of(&self, p: &JobPublication<'_>) -> Option<Arc<str>> {
        if !self.legacy_batches || p.tgt_type.as_ref().map(Text::as_str) != Some("list") {
            return None;
        }
        let names = text_refs(p.minions.as_ref());
        let first = *names.first()?;
        let (user, fun, args) = (
            p.user.as_ref().map(Text::as_str),
            p.fun.as_ref().map_or("", Text::as_str),
            args_hash(p.arg),
        );
        self.open.iter().find_map(|(jid, job)| {
            let batch = job.batch.as_ref()?;
            let fits = !batch.from_events
                && batch.queued > 0
                && batch.user.as_deref() == user
                && batch.args == args
                && *job.fun == *fun
                && job
                    .minions
                    .position(first)
                    .is_some_and(|at| job.minions.state(at) == MinionState::Queued);
            fits.then(|| Arc::clone(jid))
        })
    }

    /// Whether `p` may be a batch's first sub-batch (Salt before 3008.2
    /// publishes each as a job of its own, targeted by list).
    pub(super) fn may_open_a_batch(&self, p: &JobPublication<'_>) -> bool {
        self.legacy_batches && p.tgt_type.as_ref().map(Text::as_str) == Some("list")
    }

    /// Salt before 3008.2: a list-targeted `new` to some of the minions that
    /// answered a recent ping by the same user may be a batch's first
    /// sub-batch: the rest of those are queued behind it.
    pub(super) fn first_sub_batch(
        &self,
        p: &JobPublication<'_>,
        expected: &[&str],
        at: Stamp,
    ) -> Option<(Box<BatchRun>, Vec<Box<str>>)> {
        if !self.may_open_a_batch(p) || expected.is_empty() {
            return None;
        }
        let ping = self.ping_before(p.user.as_ref().map(Text::as_str), None, at)?;
        if *ping.jid == *p.jid.as_str() {
            return None;
        }
        let (answered, unanswered) = self.ping_outcome(ping)?;
        let sent: std::collections::BTreeSet<&str> = expected.iter().copied().collect();
        if !sent.iter().all(|m| answered.iter().any(|a| &**a == *m)) {
            return None;
        }
        let queued: Vec<Box<str>> = answered
            .into_iter()
            .filter(|m| !sent.contains(&**m))
            .collect();
        if queued.is_empty() {
            return None;
        }
        let mut batch = BatchRun::new(false);
        batch.info.sub_batches = 1;
        batch.info.ping_jid = Some(ping.jid.to_string());
        batch.info.size = u32::try_from(expected.len()).ok();
        batch.user = p.user.as_ref().map(|u| u.as_str().into());
        batch.args = args_hash(p.arg);
        batch.unanswered = unanswered;
        Some((Box::new(batch), queued))
    }

    /// The records' view of a job's batch, at its publication.
    pub(super) fn published_batch(job: &Job) -> Option<BatchInfo> {
        job.batch
            .as_ref()
            .filter(|b| b.confirmed())
            .map(|b| b.info.clone())
    }

    /// Every minion sent the job has answered, and the batch has more to
    /// send. An inferred batch's next sub-batch comes within
    /// `jobs.batch_gap`, or it has ended.
    pub(super) fn between_sub_batches(&mut self, jid: &str, at: Stamp) {
        let gap = self.config.batch_gap;
        let Some(job) = self.open.get_mut(jid) else {
            return;
        };
        if job.batch.as_ref().is_some_and(|b| !b.from_events) && at.plus(gap) < job.deadline {
            self.deadlines.remove(job.deadline, jid);
            job.deadline = at.plus(gap);
            self.deadlines.insert(job.deadline, jid);
        }
    }

    /// How the job's queued minions fare at its close: judged `not_sent`
    /// (the batch ended first), or forgotten (an inferred batch that never
    /// had a second sub-batch: an ordinary job).
    pub(super) fn unsent_verdict(job: &Job) -> Option<Verdict> {
        let batch = job.batch.as_ref()?;
        if !batch.confirmed() {
            return None;
        }
        let evidence = match batch.info.ended {
            Some(BatchEnd::Halted) => MissingEvidence::BatchHalted,
            _ => MissingEvidence::BatchEnded,
        };
        Some(Verdict::new(MissingReason::NotSent, evidence))
    }
}

/// Pings remembered, in the order published.
pub(super) type Pings = VecDeque<Ping>;
