//! A big job's expected minions taken a slice at a time. A publication
//! naming more than [`FIRST_SLICE`] minions opens its job with its first
//! [`FIRST_SLICE`] names, read from the event's list, which is kept packed
//! as Salt sent it (`event::text`); the rest are kept by reference to
//! the frame (copied in one piece when the frame is not shared), still
//! packed, and each [`JobTracker::take_more_names`] reads and takes the
//! next slice: listed, and judged not connected when presence says so. The
//! driver takes a slice after each event and each quiet tick, so no step
//! reads a whole 200,000-minion job. A return meanwhile is counted at once
//! and placed when its name is taken; what reads or judges the open jobs'
//! minions first takes what is left ([`JobTracker::finish_intake`]), so
//! nothing else ever sees a job part taken.

use std::sync::Arc;

use bytes::Bytes;
use foldhash::HashMap;

use super::{Job, JobTracker};
use crate::event::args::text_refs;
use crate::event::text::PackedTexts;
use crate::event::{Body, JobPublication, TextList};
use crate::jobs::verdict::{MinionState, Verdict};
use crate::names::NameList;
use crate::record::{MAX_LISTED_MINIONS, MissingEvidence, MissingReason, Record};
use crate::time::Stamp;

/// Names listed per step: a slice takes about a millisecond (the
/// `big_job` bench).
pub const INTAKE_SLICE: usize = 8_192;

/// Names read at a big job's publication: its first slice, and every name
/// its `job_published` record lists.
pub const FIRST_SLICE: usize = if MAX_LISTED_MINIONS > INTAKE_SLICE {
    MAX_LISTED_MINIONS
} else {
    INTAKE_SLICE
};

/// A publication's expected minions as read: every name, or a big job's
/// first names with the list they are the start of.
#[derive(Debug, Clone, Copy)]
pub(super) struct Expected<'e> {
    pub read: &'e [&'e str],
    /// The whole list, when names past `read` are in it, not read yet.
    pub unread: Option<&'e TextList<'e>>,
    /// The frame the list is in, when shared: the names not read are kept
    /// by reference.
    pub frame: Option<&'e Bytes>,
}

impl<'e> Expected<'e> {
    /// Every name, read.
    pub fn whole(read: &'e [&'e str]) -> Self {
        Expected {
            read,
            unread: None,
            frame: None,
        }
    }

    /// How many are expected in all.
    pub fn total(&self) -> usize {
        self.unread.map_or(self.read.len(), TextList::len)
    }
}

/// A job's names not taken yet.
#[derive(Debug)]
pub(super) struct Intake {
    jid: Arc<str>,
    names: PackedTexts,
    /// Where the names not taken begin in `names`, and how many they are.
    at: usize,
    left: usize,
    /// The master's `missing` of the publication, judged once every name
    /// is taken (a name it gives that the job lists is no verdict).
    missing: Vec<Box<str>>,
    /// An open job's list of as many names, while every name taken is in
    /// it: shared once all are.
    sharing: Option<Sharing>,
    /// Returns that came before their minion's name was taken (counted at
    /// once; whether each succeeded): placed when the name is taken, not
    /// targeted if it never is.
    early: HashMap<Box<str>, bool>,
}

impl Intake {
    /// `minion`'s return to job `jid`, counted: `None` when `jid` is not the
    /// job being taken or `minion` is taken already (the return is placed
    /// as any other); `Some(false)` when it returned early already (a
    /// duplicate).
    pub(super) fn early_return(
        &mut self,
        jid: &str,
        minion: &str,
        succeeded: bool,
    ) -> Option<bool> {
        if !self.is_of(jid) {
            return None;
        }
        if self.early.contains_key(minion) {
            return Some(false);
        }
        self.early.insert(minion.into(), succeeded);
        Some(true)
    }

    /// Whether it is job `jid`'s.
    pub(super) fn is_of(&self, jid: &str) -> bool {
        *self.jid == *jid
    }
}

/// What taking names updates beside the job: the list it may share, the
/// returns waiting for their names.
struct Taking<'t> {
    sharing: &'t mut Option<Sharing>,
    early: &'t mut HashMap<Box<str>, bool>,
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

impl JobTracker {
    /// The minions `p` expects, as read now: a big job's first slice and
    /// its list (not a ping's, which a batch is chosen by, nor a job that
    /// may be a batch's, whose queue is counted at publication, nor a job
    /// over the cap, which is not followed minion by minion).
    pub(super) fn read_expected<'e>(
        &self,
        p: &'e JobPublication<'e>,
        fun: &str,
    ) -> (Vec<&'e str>, Option<&'e TextList<'e>>) {
        let names = p.minions.as_ref();
        let count = names.map_or(0, TextList::len);
        let sliced = count > FIRST_SLICE
            && count <= self.config.max_expected
            && fun != "test.ping"
            && !self.may_open_a_batch(p);
        match names {
            Some(list) if sliced => (list.iter().take(FIRST_SLICE).collect(), Some(list)),
            _ => (text_refs(names), None),
        }
    }

    /// `job`, just published expecting the names of `unread`, opened with
    /// those read (`expected.read`); the rest taken by [`JobTracker::more`].
    pub(super) fn open_in_slices(
        &mut self,
        jid: &str,
        mut job: Job,
        expected: Expected<'_>,
        unread: &TextList<'_>,
        missing: Option<&TextList<'_>>,
        out: &mut Vec<Record>,
    ) {
        self.finish_intake(out);
        self.expected_total += job.pending;
        self.deadlines.insert(job.deadline, jid);
        // A fleet's highstate every half hour expects the same minions.
        let mut sharing = self.lists.like(unread.len()).map(|list| Sharing {
            places: Vec::with_capacity(list.len()),
            list,
        });
        let first = expected.read;
        let mut taking = Taking {
            sharing: &mut sharing,
            early: &mut HashMap::default(),
        };
        self.take_names(jid, &mut job, first.iter().copied(), &mut taking, out);
        let jid: Arc<str> = jid.into();
        self.open.insert(Arc::clone(&jid), job);
        let names = unread.packed_after(first.len(), expected.frame);
        self.intake = Some(Intake {
            jid,
            left: names.len(),
            names,
            at: 0,
            missing: text_refs(missing).into_iter().map(Box::from).collect(),
            sharing,
            early: HashMap::default(),
        });
    }

    /// Whether a job's names are part way taken: the driver calls
    /// [`JobTracker::take_more_names`] between events until it is not.
    pub fn taking(&self) -> bool {
        self.intake.is_some()
    }

    /// The next slice of the job being taken (see [`JobTracker::taking`]).
    pub fn take_more_names(&mut self, out: &mut Vec<Record>) {
        let start = out.len();
        self.take_slice(out);
        self.mark_pressure(&mut out[start..]);
    }

    /// Whether `event` needs every name of the job being taken first: what
    /// reads or judges open jobs' minions (a publication, a minion's
    /// progress or start, presence, a batch); not a return, which is
    /// placed or waits for its minion's name, nor the job's `publish`.
    pub(super) fn needs_every_name(&self, event: &Body<'_>) -> bool {
        self.intake.is_some()
            && matches!(
                event,
                Body::JobNew(_)
                    | Body::JobProgress(_)
                    | Body::MinionStart(_)
                    | Body::Presence(_)
                    | Body::Batch(_)
            )
    }

    /// The next slice of the job being taken; when it is the last, the
    /// returns of minions never taken made not targeted, the master's
    /// `missing` judged and the job closed if nothing is left to wait for.
    fn take_slice(&mut self, out: &mut Vec<Record>) {
        let Some(mut intake) = self.intake.take() else {
            return;
        };
        // Closed meanwhile (it cannot be: whatever closes a job takes the
        // rest first): nothing to take.
        let Some((jid, mut job)) = self.open.remove_entry(&*intake.jid) else {
            return;
        };
        let mut sharing = intake.sharing.take();
        let mut names = intake.names.read_from(intake.at, intake.left);
        let slice = names.by_ref().take(INTAKE_SLICE);
        let mut taking = Taking {
            sharing: &mut sharing,
            early: &mut intake.early,
        };
        self.take_names(&jid, &mut job, slice, &mut taking, out);
        let (read, left) = (names.position(), names.len());
        intake.sharing = sharing;
        intake.at += read;
        intake.left = left;
        if intake.left > 0 {
            self.open.insert(jid, job);
            self.intake = Some(intake);
            return;
        }
        // Returns of minions the job does not list: not counted after all.
        for (_, succeeded) in intake.early.drain() {
            job.pending += 1;
            self.expected_total += 1;
            job.uncounted(succeeded);
            self.stats.unplaced_returns.inc();
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

    /// Lists `names` for `job`, each pending, returned when it returned
    /// early, or not connected when presence says so now (the publish did
    /// not reach it).
    fn take_names<'n>(
        &mut self,
        jid: &str,
        job: &mut Job,
        names: impl Iterator<Item = &'n str>,
        taking: &mut Taking<'_>,
        out: &mut Vec<Record>,
    ) {
        let sharing = &mut *taking.sharing;
        for name in names {
            let (position, new) = job.minions.take(name);
            if !new {
                continue;
            }
            if sharing.as_mut().is_some_and(|s| !s.follows(name)) {
                *sharing = None;
            }
            if !taking.early.is_empty() && taking.early.remove(name).is_some() {
                // Counted when it came.
                job.minions.set(position, MinionState::Returned);
                continue;
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
