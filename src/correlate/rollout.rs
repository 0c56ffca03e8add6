//! Rollouts: for each commit a watched state tree's HEAD moves to, where each
//! minion of the fleet stands: applied (a successful, non-test highstate, or
//! state.apply of an SLS the commit changed, under it or a descendant),
//! failed (with its root cause), or pending; and how long it took to reach
//! half, 95% and all of the fleet, from the commit's time and from the move.
//!
//! Pure bookkeeping: the correlator does the git (ancestry, changed files)
//! and hands in answers. Bounded: at most `max_open` open rollouts per state
//! tree (the oldest closes as superseded), each minion one small entry, and
//! samples capped. A run is counted as it comes and its samples kept
//! (`samples`): the fleet is walked when a rollout opens, when the fleet
//! changed otherwise than by growing, and rarely for samples.

use std::sync::Arc;
use std::time::Duration;

use foldhash::{HashMap, HashMapExt};

use self::samples::{Candidates, Gathering};
use crate::cow::CowMap;
use crate::record::{
    Delays, PullRequest, Record, RecordBody, RecordFactory, Rollout, RolloutFailure, RolloutStatus,
};
use crate::time::Stamp;

/// Samples of failed and pending minions a rollout record lists.
pub const SAMPLES: usize = 10;
/// SLS names a rollout lists.
pub const MAX_CHANGED_SLS: usize = 50;
/// A rollout a closed job changed goes out at once, or this long after its
/// last revision: one count of the fleet per second at most, however many
/// jobs close (a fleet's scheduled highstates close one job per return).
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// What a state run covers: everything (a highstate, `state.apply` without
/// SLS), or these SLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coverage {
    All,
    Sls(Vec<String>),
}

/// Where one minion stands on one rollout.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Standing {
    Applied(Stamp),
    Failed {
        at: Stamp,
        /// Shared with the run's records (a failed run's are triage's).
        jid: Arc<str>,
        fingerprint: Option<Arc<str>>,
    },
}

/// One open rollout.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Open {
    record: Rollout,
    /// Copy on write: a checkpoint's copy of a rollout costs its record and
    /// 64 pointers, not its fleet.
    minions: CowMap<Box<str>, Standing>,
    emissions: u32,
    emitted_at: Stamp,
    /// Changed since its last revision.
    dirty: bool,
    /// The fleet's [`Members::generation`] when last counted whole.
    #[serde(skip)]
    counted_in: u64,
    /// Kept since it was last counted whole; none when restored (counted
    /// whole at its next revision).
    #[serde(skip)]
    samples: Option<Samples>,
}

/// The smallest names of a rollout's failed and of its pending members.
#[derive(Debug, Clone)]
struct Samples {
    failed: Candidates,
    pending: Candidates,
}

impl Open {
    pub fn commit(&self) -> &str {
        &self.record.commit
    }

    /// Counted against the whole fleet (`listed`, of `generation`), as it
    /// stands now.
    fn count_whole(&mut self, listed: &[&str], generation: u64) {
        let kept = tally(
            &mut self.record,
            &self.minions,
            listed,
            self.samples.as_ref(),
        );
        self.samples = Some(kept);
        self.counted_in = generation;
        self.write_samples();
    }

    /// Brought up to the fleet as it stands: the members who joined since
    /// taken in (pending unless they ran already); counted whole when it
    /// changed otherwise. The counts' consequences are the caller's
    /// ([`progress`]).
    fn follow(&mut self, fleet: &(impl Members + ?Sized)) {
        let count = u32::try_from(fleet.count()).unwrap_or(u32::MAX);
        let record = &mut self.record;
        match &mut self.samples {
            Some(samples) if self.counted_in == fleet.generation() && count >= record.known => {
                if count > record.known {
                    for joined in fleet.joined(record.known as usize) {
                        match self.minions.get(joined) {
                            None => samples.pending.add(joined),
                            Some(Standing::Applied(_)) => record.applied += 1,
                            Some(Standing::Failed { .. }) => {
                                record.failed += 1;
                                samples.failed.add(joined);
                            }
                        }
                    }
                    record.known = count;
                }
            }
            _ => self.count_whole(&fleet.listed(), fleet.generation()),
        }
    }

    /// Up to the fleet, with its samples written into its record: from
    /// those kept, or from a walk when too few are kept to say.
    fn revise(&mut self, fleet: &(impl Members + ?Sized)) {
        self.follow(fleet);
        progress(&mut self.record);
        if !self.write_samples() {
            self.count_whole(&fleet.listed(), fleet.generation());
        }
    }

    /// The samples kept written into the record; false when too few are
    /// kept to say.
    fn write_samples(&mut self) -> bool {
        let Some(samples) = &self.samples else {
            return false;
        };
        let (Some(failed), Some(pending)) = (samples.failed.first(), samples.pending.first())
        else {
            return false;
        };
        let record = &mut self.record;
        record.sample_failed = failed
            .filter_map(|minion| match self.minions.get(minion) {
                Some(Standing::Failed {
                    jid, fingerprint, ..
                }) => Some(RolloutFailure {
                    minion: minion.to_owned(),
                    jid: jid.to_string(),
                    fingerprint: fingerprint.as_deref().map(str::to_owned),
                }),
                _ => None,
            })
            .collect();
        record.sample_pending = pending.map(str::to_owned).collect();
        true
    }

    /// Whether a run covering `coverage` covers this commit's change.
    pub fn covered_by(&self, coverage: &Coverage) -> bool {
        coverage.covers(&self.record.changed_sls)
    }
}

impl Coverage {
    /// Whether a run covering this covers a change of `changed_sls`: a
    /// highstate covers every SLS of the minion's top file.
    pub fn covers(&self, changed_sls: &[String]) -> bool {
        match self {
            Coverage::All => true,
            Coverage::Sls(sls) => changed_sls
                .iter()
                .any(|changed| sls.iter().any(|s| s == changed)),
        }
    }
}

/// What the correlator knows of a commit when a rollout opens.
#[derive(Debug, Clone)]
pub struct CommitFacts {
    pub repo: String,
    pub commit: String,
    pub subject: String,
    pub pull_request: Option<PullRequest>,
    pub committed_at: Option<Stamp>,
    pub changed_sls: Vec<String>,
}

/// The fleet a rollout is counted against. A run is counted against it as
/// it comes, by whether its minion is a member; the whole fleet is walked
/// only when a rollout is emitted (its samples) or the fleet changed
/// otherwise than by growing.
pub trait Members {
    fn has(&self, minion: &str) -> bool;
    fn count(&self) -> usize;
    fn listed(&self) -> Vec<&str>;
    /// The members past the first `since` of a fleet that only grew since it
    /// had `since` members (of one [`Members::generation`]): who joined, in
    /// the order they did.
    fn joined(&self, since: usize) -> impl Iterator<Item = &str>;
    /// Changes when the membership changed otherwise than by minions joining
    /// it (who joined has no standing yet: a minion joins the fleet before
    /// its run is counted). A fleet that only grows keeps one.
    fn generation(&self) -> u64 {
        0
    }
    /// Standings a rollout keeps at most for minions outside the fleet (a
    /// run seen before its key is listed again, a syndic's minion).
    fn bound(&self) -> usize {
        usize::MAX
    }
}

impl Members for [&str] {
    fn has(&self, minion: &str) -> bool {
        self.contains(&minion)
    }

    fn count(&self) -> usize {
        self.len()
    }

    fn listed(&self) -> Vec<&str> {
        self.to_vec()
    }

    fn joined(&self, since: usize) -> impl Iterator<Item = &str> {
        self.get(since..).unwrap_or_default().iter().copied()
    }
}

/// One minion's state run under a rollout's commit (or a descendant) that
/// covers it.
#[derive(Debug, Clone)]
pub struct RunOutcome<'a> {
    pub minion: &'a str,
    pub jid: &'a str,
    /// `jid` as triage already holds it (a failed run's), shared by its
    /// standing rather than copied.
    pub shared_jid: Option<&'a Arc<str>>,
    pub succeeded: bool,
    pub fingerprint: Option<&'a Arc<str>>,
}

/// The open rollouts of every watched state tree.
#[derive(Debug)]
pub struct Rollouts {
    records: RecordFactory,
    update_every: Duration,
    stall_after: Duration,
    max_open: usize,
    /// Per repo, oldest first.
    open: HashMap<String, Vec<Open>>,
    /// A job closed: changed rollouts go out within [`FLUSH_EVERY`].
    flush_asked: bool,
    /// Runs of minions outside the fleet not remembered: a rollout held
    /// [`Members::bound`] standings.
    pub refused: u64,
}

impl Rollouts {
    pub fn new(
        records: RecordFactory,
        update_every: Duration,
        stall_after: Duration,
        max_open: usize,
    ) -> Self {
        Self {
            records,
            update_every,
            stall_after,
            max_open: max_open.max(1),
            open: HashMap::new(),
            flush_asked: false,
            refused: 0,
        }
    }

    pub fn open_rollouts(&self, repo: &str) -> &[Open] {
        self.open.get(repo).map_or(&[], Vec::as_slice)
    }

    /// The HEAD of `facts.repo` is now `facts.commit` (`moved`: it moved
    /// there; else it was already there at the first read). The rollouts still
    /// pending are superseded by it; the new one opens with the fleet pending.
    pub fn head(
        &mut self,
        facts: CommitFacts,
        moved: bool,
        fleet: &(impl Members + ?Sized),
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        let list = self.open.entry(facts.repo.clone()).or_default();
        if list.iter().any(|o| o.record.commit == facts.commit) {
            return; // back to a commit already followed
        }
        for mut older in list.drain(..) {
            older.revise(fleet);
            older.record.status = RolloutStatus::Superseded;
            older.record.superseded_by = Some(facts.commit.clone());
            out.push(emit(&self.records, &mut older, at));
        }
        let record = Rollout {
            repo: facts.repo.clone(),
            commit: facts.commit,
            subject: facts.subject,
            pull_request: facts.pull_request,
            committed_at: facts.committed_at,
            seen_at: at,
            seen_move: moved,
            status: RolloutStatus::InProgress,
            revision: 0,
            known: 0,
            applied: 0,
            failed: 0,
            pending: 0,
            changed_sls: facts
                .changed_sls
                .into_iter()
                .take(MAX_CHANGED_SLS)
                .collect(),
            sample_failed: Vec::new(),
            sample_pending: Vec::new(),
            reached_50: None,
            reached_95: None,
            reached_100: None,
            delay_from_commit: Delays::default(),
            delay_from_seen: Delays::default(),
            superseded_by: None,
            last_progress: at,
        };
        let mut open = Open {
            record,
            minions: CowMap::default(),
            emissions: 0,
            emitted_at: at,
            dirty: true,
            counted_in: 0,
            samples: None,
        };
        open.count_whole(&fleet.listed(), fleet.generation());
        out.push(emit(&self.records, &mut open, at));
        let list = self.open.entry(facts.repo).or_default();
        list.push(open);
        while list.len() > self.max_open {
            let mut oldest = list.remove(0);
            oldest.revise(fleet);
            oldest.record.status = RolloutStatus::Superseded;
            out.push(emit(&self.records, &mut oldest, at));
        }
    }

    /// A run of `repo`'s rollout `index` (the correlator found it under that
    /// commit or a descendant, and covering it). Counted as it comes, its
    /// samples kept (the fleet is walked again only when it changed
    /// otherwise than by growing), so a return costs the same on any fleet.
    pub fn outcome(
        &mut self,
        repo: &str,
        index: usize,
        run: &RunOutcome<'_>,
        fleet: &(impl Members + ?Sized),
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        let Some(open) = self.open.get_mut(repo).and_then(|l| l.get_mut(index)) else {
            return;
        };
        let failed_before = match open.minions.get(run.minion) {
            Some(Standing::Applied(_)) => return, // applied stays applied
            Some(Standing::Failed { .. }) => true,
            None if open.minions.len() >= fleet.bound() && !fleet.has(run.minion) => {
                self.refused += 1;
                return;
            }
            None => false,
        };
        // Who joined the fleet (this minion perhaps) taken in first, pending
        // until now as the run being counted was.
        open.follow(fleet);
        let standing = if run.succeeded {
            Standing::Applied(at)
        } else {
            Standing::Failed {
                at,
                jid: run.shared_jid.map_or_else(|| run.jid.into(), Arc::clone),
                fingerprint: run.fingerprint.cloned(),
            }
        };
        // A minion seen before keeps its key (a name allocated once a rollout).
        match open.minions.get_mut(run.minion) {
            Some(held) => *held = standing,
            None => {
                open.minions.insert(run.minion.into(), standing);
            }
        }
        if let Some(samples) = open.samples.as_mut().filter(|_| fleet.has(run.minion)) {
            let record = &mut open.record;
            record.failed = record.failed.saturating_sub(u32::from(failed_before));
            samples.pending.remove(run.minion);
            if run.succeeded {
                record.applied += 1;
                samples.failed.remove(run.minion);
            } else {
                record.failed += 1;
                samples.failed.add(run.minion);
            }
        }
        open.record.last_progress = at;
        open.dirty = true;
        let was = open.record.status;
        progress(&mut open.record);
        if open.record.status != was || open.emitted_at.plus(self.update_every) <= at {
            open.revise(fleet);
            out.push(emit(&self.records, open, at));
        }
        if open.record.status == RolloutStatus::Complete {
            self.close_finished(repo);
        }
    }

    /// The fleet changed (a key accepted or removed): every open rollout is
    /// counted again, and may be complete now.
    pub fn fleet_changed(
        &mut self,
        fleet: &(impl Members + ?Sized),
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        let (listed, generation) = (fleet.listed(), fleet.generation());
        let repos: Vec<String> = self.open.keys().cloned().collect();
        for repo in repos {
            if let Some(list) = self.open.get_mut(&repo) {
                for open in list.iter_mut() {
                    let was = (open.record.status, open.record.known);
                    open.count_whole(&listed, generation);
                    if (open.record.status, open.record.known) != was {
                        out.push(emit(&self.records, open, at));
                    }
                }
            }
            self.close_finished(&repo);
        }
    }

    /// Time moved to `now`: pending revisions go out (brought up to `fleet`
    /// first), rollouts with no progress for `stall_after` are stalled.
    pub fn advance(&mut self, now: Stamp, fleet: &(impl Members + ?Sized), out: &mut Vec<Record>) {
        for list in self.open.values_mut() {
            for open in list.iter_mut() {
                let stalled = open.record.status == RolloutStatus::InProgress
                    && open.record.pending > 0
                    && open.record.last_progress.plus(self.stall_after) <= now;
                let every = if self.flush_asked {
                    FLUSH_EVERY.min(self.update_every)
                } else {
                    self.update_every
                };
                let due = open.dirty && open.emitted_at.plus(every) <= now;
                if stalled || due {
                    open.revise(fleet);
                    if stalled && open.record.status != RolloutStatus::Complete {
                        open.record.status = RolloutStatus::Stalled;
                    }
                    out.push(emit(&self.records, open, now));
                }
            }
        }
        if self.open.values().flatten().all(|o| !o.dirty) {
            self.flush_asked = false;
        }
        let repos: Vec<String> = self.open.keys().cloned().collect();
        for repo in repos {
            self.close_finished(&repo);
        }
    }

    /// A job closed: every rollout its runs changed goes out now (brought up
    /// to `fleet` first) if its last revision is [`FLUSH_EVERY`] old,
    /// else that long after it, not at the next `update_every`: an answer
    /// read right after a highstate has it.
    pub fn flush(&mut self, now: Stamp, fleet: &(impl Members + ?Sized), out: &mut Vec<Record>) {
        self.flush_asked = true;
        self.advance(now, fleet, out);
    }

    /// When [`Rollouts::advance`] next has something to do.
    pub fn next_due(&self) -> Option<Stamp> {
        self.open
            .values()
            .flatten()
            .filter_map(|o| {
                let stall = (o.record.status == RolloutStatus::InProgress && o.record.pending > 0)
                    .then(|| o.record.last_progress.plus(self.stall_after));
                let every = if self.flush_asked {
                    FLUSH_EVERY.min(self.update_every)
                } else {
                    self.update_every
                };
                let update = o.dirty.then(|| o.emitted_at.plus(every));
                stall.into_iter().chain(update).min()
            })
            .min()
    }

    fn close_finished(&mut self, repo: &str) {
        if let Some(list) = self.open.get_mut(repo) {
            list.retain(|o| o.record.status != RolloutStatus::Complete);
        }
    }

    /// Every open rollout, for a checkpoint.
    pub fn all(&self) -> impl Iterator<Item = &Open> {
        self.open.values().flatten()
    }

    /// Takes back saved rollouts (at most `max_open` per repo).
    pub fn restore(&mut self, saved: Vec<Open>) {
        self.open.clear();
        for open in saved {
            let list = self.open.entry(open.record.repo.clone()).or_default();
            if list.len() < self.max_open {
                list.push(open);
            }
        }
        for list in self.open.values_mut() {
            list.sort_by_key(|o| o.record.seen_at);
        }
    }
}

/// Counts the fleet's minions by standing and finds the smallest names of
/// each kind (one pass, no sort of the fleet), then [`progress`] and the
/// samples: the names it found (as many as `before` kept, more of a kind it
/// ran short of).
fn tally(
    record: &mut Rollout,
    minions: &CowMap<Box<str>, Standing>,
    fleet: &[&str],
    before: Option<&Samples>,
) -> Samples {
    let (mut applied, mut failed) = (0u32, 0u32);
    let mut failed_names = Gathering::new(before.map(|b| &b.failed));
    let mut pending_names = Gathering::new(before.map(|b| &b.pending));
    for minion in fleet {
        match minions.get(*minion) {
            Some(Standing::Applied(_)) => applied += 1,
            Some(Standing::Failed { .. }) => {
                failed += 1;
                failed_names.offer(minion);
            }
            None => pending_names.offer(minion),
        }
    }
    let kept = Samples {
        failed: failed_names.done(),
        pending: pending_names.done(),
    };
    record.known = u32::try_from(fleet.len()).unwrap_or(u32::MAX);
    record.applied = applied;
    record.failed = failed;
    progress(record);
    kept
}

/// What the counts say: pending, the reach times (first reached only), the
/// delays, and `Complete` when every minion applied it.
fn progress(record: &mut Rollout) {
    let (known, applied) = (record.known, record.applied);
    record.pending = known.saturating_sub(applied + record.failed);
    let share = if known == 0 {
        0.0
    } else {
        f64::from(applied) / f64::from(known)
    };
    let at = record.last_progress;
    for (reach, slot) in [
        (0.5, &mut record.reached_50),
        (0.95, &mut record.reached_95),
        (1.0, &mut record.reached_100),
    ] {
        if slot.is_none() && known > 0 && share >= reach {
            *slot = Some(at);
        }
    }
    record.delay_from_commit = delays(record, record.committed_at);
    record.delay_from_seen = delays(record, Some(record.seen_at));
    if known > 0 && applied == known {
        record.status = RolloutStatus::Complete;
    } else if record.status == RolloutStatus::Complete {
        record.status = RolloutStatus::InProgress;
    }
}

fn delays(record: &Rollout, from: Option<Stamp>) -> Delays {
    let secs = |to: Option<Stamp>| {
        let (from, to) = (from?, to?);
        Some((to.micros_since(from) as f64 / 1e6).max(0.0))
    };
    Delays {
        p50_s: secs(record.reached_50),
        p95_s: secs(record.reached_95),
        p100_s: secs(record.reached_100),
    }
}

/// The rollout's next revision (0 when it opens).
fn emit(records: &RecordFactory, open: &mut Open, at: Stamp) -> Record {
    open.record.revision = open.emissions;
    open.emissions += 1;
    open.emitted_at = at;
    open.dirty = false;
    let revision = open.record.revision.to_string();
    records.make(
        at,
        &[&open.record.repo, &open.record.commit, &revision],
        RecordBody::Rollout(Box::new(open.record.clone())),
    )
}

mod samples;
#[cfg(test)]
mod tests;
