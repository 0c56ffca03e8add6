//! A big job's expected minions taken a slice at a time. A publication
//! naming more than [`INTAKE_SLICE`] minions opens its job with the first
//! slice; the rest wait here as one copied string, and each
//! [`JobTracker::more`] takes the next slice: listed, and judged not
//! connected when presence says so. The driver calls `more` until it is
//! done, before the next event, so no step lists a whole 200,000-minion
//! job; anything that reads the job's minions first takes what is left
//! ([`JobTracker::finish_intake`]), so nothing ever sees a job part taken.

use std::sync::Arc;

use super::{Job, JobTracker};
use crate::event::TextList;
use crate::event::args::text_refs;
use crate::jobs::verdict::{MinionState, Verdict};
use crate::names::NameList;
use crate::record::{MissingEvidence, MissingReason, Record};
use crate::time::Stamp;

/// Names listed per step: a slice takes about a millisecond (the
/// `big_job` bench).
pub(super) const INTAKE_SLICE: usize = 8_192;

/// A job's names not taken yet.
#[derive(Debug)]
pub(super) struct Intake {
    jid: Arc<str>,
    /// The names one after another, each ending at its `ends`.
    text: String,
    ends: Vec<usize>,
    /// How many are taken.
    next: usize,
    /// The master's `missing` of the publication, judged once every name
    /// is taken (a name it gives that the job lists is no verdict).
    missing: Vec<Box<str>>,
    /// An open job's list of as many names, while every name taken is in
    /// it: shared once all are.
    sharing: Option<Sharing>,
}

/// A list a job being taken may share, and where each name it took is in it.
#[derive(Debug)]
struct Sharing {
    list: Arc<NameList>,
    places: Vec<u32>,
}

impl Sharing {
    /// `name`, just taken, is in the list too; `false` when not.
    fn follows(&mut self, name: &str) -> bool {
        match self.list.position(name) {
            Some(place) => {
                self.places.push(u32::try_from(place).unwrap_or(u32::MAX));
                true
            }
            None => false,
        }
    }
}

impl Intake {
    fn new(
        jid: Arc<str>,
        rest: &[&str],
        missing: Option<&TextList<'_>>,
        sharing: Option<Sharing>,
    ) -> Self {
        let mut text = String::with_capacity(rest.iter().map(|name| name.len()).sum());
        let mut ends = Vec::with_capacity(rest.len());
        for name in rest {
            text.push_str(name);
            ends.push(text.len());
        }
        Intake {
            jid,
            text,
            ends,
            next: 0,
            missing: text_refs(missing).into_iter().map(Box::from).collect(),
            sharing,
        }
    }

    fn name(&self, at: usize) -> &str {
        let start = at.checked_sub(1).map_or(0, |before| self.ends[before]);
        &self.text[start..self.ends[at]]
    }
}

impl JobTracker {
    /// Whether the job expecting `expected` is listed a slice at a time
    /// (a batch's job is listed whole: its queue is counted at publication).
    pub(super) fn takes_in_slices(expected: &[&str], batch: bool) -> bool {
        !batch && expected.len() > INTAKE_SLICE
    }

    /// `job`, just published expecting `expected`, opened with its first
    /// slice; the rest taken by [`JobTracker::more`].
    pub(super) fn open_in_slices(
        &mut self,
        jid: &str,
        mut job: Job,
        expected: &[&str],
        missing: Option<&TextList<'_>>,
        out: &mut Vec<Record>,
    ) {
        self.finish_intake(out);
        let (first, rest) = expected.split_at(INTAKE_SLICE.min(expected.len()));
        self.expected_total += job.pending;
        self.deadlines.insert(job.deadline, jid);
        // A fleet's highstate every half hour expects the same minions.
        let mut sharing = self.lists.like(expected.len()).map(|list| Sharing {
            places: Vec::with_capacity(list.len()),
            list,
        });
        self.take_names(jid, &mut job, first.iter().copied(), &mut sharing, out);
        let jid: Arc<str> = jid.into();
        self.open.insert(Arc::clone(&jid), job);
        self.intake = Some(Intake::new(jid, rest, missing, sharing));
    }

    /// Whether a job's names are part way taken.
    pub(super) fn taking(&self) -> bool {
        self.intake.is_some()
    }

    /// The next slice of the job being taken; when it is the last, the
    /// master's `missing` judged and the job closed if nothing is left to
    /// wait for.
    pub(super) fn take_slice(&mut self, out: &mut Vec<Record>) {
        let Some(mut intake) = self.intake.take() else {
            return;
        };
        // Closed meanwhile (it cannot be: whatever closes a job takes the
        // rest first): nothing to take.
        let Some((jid, mut job)) = self.open.remove_entry(&*intake.jid) else {
            return;
        };
        let end = (intake.next + INTAKE_SLICE).min(intake.ends.len());
        let slice = intake.next..end;
        let mut sharing = intake.sharing.take();
        let names = slice.map(|at| intake.name(at));
        self.take_names(&jid, &mut job, names, &mut sharing, out);
        intake.sharing = sharing;
        intake.next = end;
        if intake.next < intake.ends.len() {
            self.open.insert(jid, job);
            self.intake = Some(intake);
            return;
        }
        // Every name taken: the same names as an open job's are its list.
        match intake.sharing.take() {
            Some(Sharing { list, places }) if places.len() == list.len() => {
                job.minions.share(list, &places)
            }
            _ => self.lists.keep(job.minions.names()),
        }
        self.judge_master_missing(&jid, &mut job, intake.missing.iter().map(|m| &**m), out);
        let at = job.published_at;
        self.reopen(&jid, job, at, out);
    }

    /// Every name left of the job being taken, at once: before anything
    /// reads the open jobs' minions.
    pub(super) fn finish_intake(&mut self, out: &mut Vec<Record>) {
        while self.intake.is_some() {
            self.take_slice(out);
        }
    }

    /// Lists `names` for `job`, each pending, or not connected when
    /// presence says so now (the publish did not reach it).
    fn take_names<'n>(
        &mut self,
        jid: &str,
        job: &mut Job,
        names: impl Iterator<Item = &'n str>,
        sharing: &mut Option<Sharing>,
        out: &mut Vec<Record>,
    ) {
        for name in names {
            let (position, new) = job.minions.take(name);
            if !new {
                continue;
            }
            if sharing.as_mut().is_some_and(|s| !s.follows(name)) {
                *sharing = None;
            }
            if let Some(since) = self.presence.absent_now(name) {
                job.minions.set(position, MinionState::NotConnected);
                job.pending -= 1;
                self.expected_total -= 1;
                self.judged_not_connected(jid, job, name, since, out);
            }
        }
    }

    /// A minion judged not connected at publish: counted, and its verdict.
    pub(super) fn judged_not_connected(
        &mut self,
        jid: &str,
        job: &mut Job,
        minion: &str,
        since: Option<Stamp>,
        out: &mut Vec<Record>,
    ) {
        *job.missing.entry(MissingReason::NotConnected).or_default() += 1;
        let verdict = Verdict {
            disconnected_at: since,
            ..Verdict::new(MissingReason::NotConnected, MissingEvidence::PresenceAbsent)
        };
        let record = self.missing_record(jid, job, minion, verdict, true);
        out.push(record);
    }

    /// The minions the master's `new` says are not connected, those the
    /// job does not list: each a verdict now.
    pub(super) fn judge_master_missing<'m>(
        &mut self,
        jid: &str,
        job: &mut Job,
        missing: impl Iterator<Item = &'m str>,
        out: &mut Vec<Record>,
    ) {
        for minion in missing {
            if job.minions.contains(minion) {
                continue;
            }
            *job.missing.entry(MissingReason::NotConnected).or_default() += 1;
            let verdict = Verdict::new(
                MissingReason::NotConnected,
                MissingEvidence::NewEventMissing,
            );
            out.push(self.missing_record(jid, job, minion, verdict, true));
        }
    }
}
