//! Drift: each change a non-test state run makes, told apart from the commit
//! the minion had applied (`classify`): a commit's change (intentional), drift
//! put back (corrected), drift seen by a `test=True` run (detected), a state
//! not settled yet (unsettled), or a state judged non-idempotent. `drift`
//! records for the runs that found drift, when their job closes (a job's
//! minions decide whether a repeated change is drift or a state that does not
//! settle); `non_idempotent` records when a state is judged so, and when it
//! settles.
//!
//! Bounded: (minion, state) pairs remembered, minions, commits, jobs held.
//! Every refusal is counted.

pub mod classify;
pub mod saved;
pub mod tally;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use classify::{Judgement, Prior, after_run, judge, unsettled_in_job};
use foldhash::{HashMap, HashMapExt};

use crate::config::drift::DriftConfig;
use crate::cow::CowVec;
use crate::event::changes::{Changed, changed, state_run};
use crate::event::states::{States, trimmed};
use crate::minion_states::MinionStates;
use crate::record::drift::hint_for;
use crate::record::{
    ChangeKind, Drift, DriftedState, JobContext, NonIdempotent, Record, RecordBody, RecordFactory,
    SettleStatus, Shared, Trimmed, stable_hash,
};
use crate::time::Stamp;

/// Commits whose ids are kept to ask git about (an older one is "unknown":
/// its states' next changes are taken as intentional).
const MAX_COMMITS: usize = 4_096;
/// How far back "minions drifted in the last day" looks.
const DAY: Duration = Duration::from_secs(86_400);

crate::counts! {
    /// The drift stage's own counts, read at scrape.
    pub struct DriftStats {
        counter intentional = "saltsight_drift_changes_intentional",
            "Changed states of non-test state runs that applied a commit (or an SLS) the minion had not applied: not drift";
        counter unsettled = "saltsight_drift_changes_unsettled",
            "Changed states that changed in the run before too, under the same commit: not settled yet, not drift";
        counter never_settles = "saltsight_drift_changes_never_settles",
            "Changed states judged non-idempotent: not drift";
        counter changed_not_read = "saltsight_drift_changes_not_read",
            "Changed states past drift.max_changed_read in one return: not judged";
        counter runs_unjudged = "saltsight_drift_runs_unjudged",
            "State runs not judged for drift: no watched state tree said which commit they ran under";
        counter remembered_refused = "saltsight_drift_remembered_refused",
            "New (minion, state) pairs not remembered: drift.max_remembered (or its blocks' room, twice that) reached (their changes stay intentional)";
        counter commits_forgotten = "saltsight_drift_commits_forgotten",
            "Commit ids forgotten past 4,096 commits: a state last run under one of them changes as intentional next";
        counter tally_refused = "saltsight_drift_tally_refused",
            "States of one job not tallied past 10,000: a repeated change of theirs in that job is corrected, not unsettled";
        counter jobs_decided_early = "saltsight_drift_jobs_decided_early",
            "Jobs whose drift was decided before they closed: drift.max_open_jobs reached";
        gauge remembered = "saltsight_drift_states_remembered",
            "(minion, state) pairs whose last run is remembered";
        gauge minions_last_day = "saltsight_drift_minions_last_day",
            "Minions with drift (corrected or detected) in the last 24 hours";
    }
}

/// One minion's state run, as drift needs it.
#[derive(Debug, Clone, Copy)]
pub struct StateRunSeen<'a> {
    pub jid: &'a str,
    pub minion: &'a str,
    pub fun: &'a str,
    pub test: bool,
    pub context: &'a Shared<JobContext>,
    /// The watched state tree and the HEAD the run ran under.
    pub tree: Option<(&'a str, &'a str)>,
    /// The return, raw msgpack.
    pub ret: &'a [u8],
    /// Its states, walked (`None`: not a map of states, e.g. render errors).
    pub states: Option<&'a States<'a>>,
    pub at: Stamp,
}

/// Whether the SLS `sls` differs between two commits (`None`: git cannot say).
pub trait SlsHistory {
    fn sls_changed(&mut self, old: &str, new: &str, sls: &str) -> Option<bool>;
}

/// A state judged non-idempotent.
#[derive(Debug, Clone)]
pub(crate) struct Judged {
    record: NonIdempotent,
    /// Runs of it without a change since (on any minion), in a row.
    calm: u32,
}

/// A run with drift (or candidates), held until its job closes.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Held {
    minion: Box<str>,
    fun: Box<str>,
    context: Shared<JobContext>,
    repo: Box<str>,
    commit: Box<str>,
    at: Stamp,
    states: Vec<(u64, DriftedState, bool)>,
    changed_not_read: u32,
    intentional: u32,
    unsettled: u32,
    never_settles: u32,
    trimmed: Option<Trimmed>,
}

/// A run's changed states as judged: the drifted ones (and candidates), and
/// how many of the others were of each kind. Most runs have none drifted: such
/// a run is not held, and costs no copy of its names.
#[derive(Debug, Default)]
struct RunChanges {
    states: Vec<(u64, DriftedState, bool)>,
    intentional: u32,
    unsettled: u32,
    never_settles: u32,
}

/// A job's runs with drift, and per state how many of its minions ran it and
/// changed it again (`tally.rs`): runs counted by their shape, and per state
/// what is not (candidates; a checkpoint written before shapes has only these).
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct OpenJob {
    /// Copy on write: a checkpoint's copy of a job's runs is its parts'
    /// pointers, and the list grows a part at a time, never copied whole.
    runs: CowVec<Held>,
    tally: BTreeMap<u64, (u32, u32)>,
    #[serde(default)]
    shapes: Vec<tally::ShapeRuns>,
}

pub struct DriftStage {
    config: DriftConfig,
    records: RecordFactory,
    memory: MinionStates<Prior>,
    commits: HashMap<u64, Box<str>>,
    judged: HashMap<u64, Judged>,
    open: HashMap<Box<str>, OpenJob>,
    open_order: VecDeque<Box<str>>,
    /// Minion → its last drift, for the last day's count.
    drifted: HashMap<Box<str>, Stamp>,
    /// A run's states and its candidates to count against its job: the room
    /// kept from run to run, up to [`SPARE_TALLY`] states.
    spare_tally: (Vec<u64>, Vec<u64>),
    /// The states runs are made of, shared by the jobs that count them.
    shapes: tally::Shapes,
    pub stats: Arc<DriftStats>,
}

/// States of a run whose tally's room is kept for the next run, at most
/// (64 KiB); a larger run allocates its own.
const SPARE_TALLY: usize = 4_096;

/// A `non_idempotent` record's id key: the state, the status, the judgement's start.
fn judgement_key(record: &NonIdempotent, status: &str) -> [String; 5] {
    [
        record.sls.clone(),
        record.state_id.clone(),
        record.function.clone(),
        status.to_owned(),
        record.since.to_string(),
    ]
}

fn commit_hash(commit: &str) -> u64 {
    stable_hash([commit.as_bytes()]) as u64
}

impl DriftStage {
    pub fn new(config: DriftConfig, records: RecordFactory) -> Self {
        Self {
            memory: MinionStates::new(config.max_remembered),
            config,
            records,
            commits: HashMap::new(),
            judged: HashMap::new(),
            open: HashMap::new(),
            open_order: VecDeque::new(),
            drifted: HashMap::new(),
            spare_tally: (Vec::new(), Vec::new()),
            shapes: tally::Shapes::default(),
            stats: Arc::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// A job was published expecting `minions`: room for them in the memory
    /// (see [`MinionStates::expect_minions`]).
    pub fn expect_minions(&mut self, minions: usize) {
        if self.config.enabled {
            self.memory.expect_minions(minions);
        }
    }

    /// One minion's state run (`state.apply`, `highstate`, `state.sls`):
    /// its changes judged, the memory updated (not by `test=True` runs), and
    /// its drift held for its job's close. A `non_idempotent` record in `out`
    /// when a state is judged so, or settles.
    pub fn on_state_run(
        &mut self,
        run: &StateRunSeen<'_>,
        git: &mut dyn SlsHistory,
        out: &mut Vec<Record>,
    ) {
        if !self.config.enabled {
            return;
        }
        let Some((repo, commit)) = run.tree else {
            self.stats.runs_unjudged.inc();
            return;
        };
        let Some(walked) = run.states else {
            return;
        };
        let states = state_run(
            walked,
            self.config.max_changed_read,
            self.config.summary_bytes,
        );
        self.stats
            .changed_not_read
            .add(u64::from(states.changed_not_read));
        let now = commit_hash(commit);
        if self.commits.len() >= MAX_COMMITS && !self.commits.contains_key(&now) {
            self.stats.commits_forgotten.add(self.commits.len() as u64);
            self.commits.clear();
        }
        self.commits.entry(now).or_insert_with(|| commit.into());
        let minion = self.minion_id(run.minion);
        let mut changes = RunChanges::default();
        let mut read = states.changed.iter().peekable();
        let (mut ran, mut candidates) = std::mem::take(&mut self.spare_tally);
        for (index, entry) in walked.entries().iter().enumerate() {
            let state = walked.key_hash(index);
            let this: Option<&Changed> = read.next_if(|c| c.index == index);
            if entry.result == Some(false) || (changed(entry) && this.is_none()) {
                // Failed (triage's), or changed past the read cap (counted).
                continue;
            }
            let key = minion.map(|m| (m, state));
            let prior = key.and_then(|(m, state)| self.memory.get(m, state));
            let judgement = this.map(|c| {
                let judged = self.judged.contains_key(&state);
                let commits = &self.commits;
                judge(
                    prior,
                    |p| {
                        if p.commit == now {
                            return Some(true);
                        }
                        let old = commits.get(&p.commit)?;
                        git.sls_changed(old, commit, &c.sls).map(|changed| !changed)
                    },
                    judged,
                    run.test,
                )
            });
            if let (Some(c), Some(j)) = (this, judgement) {
                self.take(&mut changes, state, c, j);
                if j.candidate {
                    candidates.push(state);
                }
            }
            ran.push(state);
            if !run.test {
                self.remember(key, prior, now, judgement);
                self.watch_settling(state, prior, now, this, judgement, run, repo, commit, out);
            }
        }
        let mut shapes = std::mem::take(&mut self.shapes);
        let job = self.open_job(run.jid, out);
        let refused = job.count_run(&ran, &candidates, &mut shapes);
        if changes.states.is_empty() {
            self.count_others(
                changes.intentional,
                changes.unsettled,
                changes.never_settles,
            );
        } else {
            job.runs.push(Held {
                minion: run.minion.into(),
                fun: run.fun.into(),
                context: run.context.clone(),
                repo: repo.into(),
                commit: commit.into(),
                at: run.at,
                states: changes.states,
                changed_not_read: states.changed_not_read,
                intentional: changes.intentional,
                unsettled: changes.unsettled,
                never_settles: changes.never_settles,
                trimmed: trimmed(run.ret),
            });
        }
        self.shapes = shapes;
        self.stats.tally_refused.add(refused);
        if ran.capacity() <= SPARE_TALLY {
            ran.clear();
            candidates.clear();
            self.spare_tally = (ran, candidates);
        }
    }

    /// The job `jid` closed (or is not followed: one return): its runs'
    /// drift decided → `drift` records.
    pub fn close_job(&mut self, jid: &str, out: &mut Vec<Record>) {
        let Some(job) = self.open.remove(jid) else {
            return;
        };
        if let Some(i) = self.open_order.iter().position(|j| &**j == jid) {
            self.open_order.remove(i);
        }
        self.decide(jid, job, out);
    }

    fn decide(&mut self, jid: &str, mut job: OpenJob, out: &mut Vec<Record>) {
        let mut latest = None;
        for mut run in std::mem::take(&mut job.runs) {
            let mut states = Vec::new();
            for (state, drifted, candidate) in run.states.drain(..) {
                let (ran, candidates) = job.tally_of(state).unwrap_or((1, 1));
                if candidate && unsettled_in_job(candidates, ran, self.config.fleet_share) {
                    run.unsettled += 1;
                } else {
                    states.push(drifted);
                }
            }
            self.count_others(run.intentional, run.unsettled, run.never_settles);
            if states.is_empty() {
                continue;
            }
            self.drifted.insert(run.minion.clone(), run.at);
            latest = latest.max(Some(run.at));
            let listed = states.len().min(self.config.max_states_listed);
            let change = if states.iter().any(|s| s.change == ChangeKind::Detected) {
                ChangeKind::Detected
            } else {
                ChangeKind::Corrected
            };
            let body = Drift {
                jid: jid.to_owned(),
                minion: run.minion.to_string(),
                fun: run.fun.to_string(),
                change,
                repo: run.repo.to_string(),
                commit: run.commit.to_string(),
                states_not_listed: u32::try_from(states.len() - listed).unwrap_or(u32::MAX),
                states: states.into_iter().take(listed).collect(),
                changed_not_read: run.changed_not_read,
                intentional: run.intentional,
                unsettled: run.unsettled,
                never_settles: run.never_settles,
                trimmed: run.trimmed,
                context: run.context,
            };
            let minion = body.minion.clone();
            out.push(
                self.records
                    .make(run.at, &[jid, &minion], RecordBody::Drift(body)),
            );
        }
        // The minions drifted in the day before the job's last drift: one
        // pass a job, not one a drifted run (quadratic over a fleet's job).
        if let Some(latest) = latest {
            let since = Stamp(latest.0 - DAY.as_micros() as i64);
            self.drifted.retain(|_, at| *at >= since);
            self.stats.minions_last_day.set(self.drifted.len() as u64);
        }
    }

    /// A run's changed states that were not drift, by kind.
    fn count_others(&self, intentional: u32, unsettled: u32, never_settles: u32) {
        self.stats.intentional.add(u64::from(intentional));
        self.stats.unsettled.add(u64::from(unsettled));
        self.stats.never_settles.add(u64::from(never_settles));
    }

    /// A changed state's judgement, on the run.
    fn take(&self, changes: &mut RunChanges, state: u64, c: &Changed, j: Judgement) {
        match j.kind {
            ChangeKind::Intentional => changes.intentional += 1,
            ChangeKind::Unsettled => changes.unsettled += 1,
            ChangeKind::NeverSettles => changes.never_settles += 1,
            ChangeKind::Corrected | ChangeKind::Detected => changes.states.push((
                state,
                DriftedState {
                    sls: c.sls.clone(),
                    state_id: c.state_id.clone(),
                    function: c.function.clone(),
                    name: c.name.clone(),
                    change: j.kind,
                    summary: c.summary.clone(),
                },
                j.candidate,
            )),
        }
    }

    fn remember(
        &mut self,
        key: Option<(u32, u64)>,
        prior: Option<Prior>,
        now: u64,
        j: Option<Judgement>,
    ) {
        let Some(key) = key else {
            return;
        };
        let (minion, state) = key;
        if self
            .memory
            .insert(minion, state, after_run(prior, now, j))
            .is_err()
        {
            self.stats.remembered_refused.inc();
            return;
        }
        self.stats.remembered.set(self.memory.len() as u64);
    }

    /// A state changing run after run is judged non-idempotent; a judged one
    /// that runs without a change `never_settles_after` times settles.
    #[allow(clippy::too_many_arguments)]
    fn watch_settling(
        &mut self,
        state: u64,
        prior: Option<Prior>,
        now: u64,
        changed: Option<&Changed>,
        j: Option<Judgement>,
        run: &StateRunSeen<'_>,
        repo: &str,
        commit: &str,
        out: &mut Vec<Record>,
    ) {
        let limit = self.config.never_settles_after;
        if let Some(judged) = self.judged.get_mut(&state) {
            if changed.is_some() {
                judged.calm = 0;
                return;
            }
            judged.calm += 1;
            if judged.calm >= limit {
                let mut record = judged.record.clone();
                self.judged.remove(&state);
                record.status = SettleStatus::Settled;
                record.jid = run.jid.to_owned();
                record.minion = run.minion.to_owned();
                let key = judgement_key(&record, "settled");
                let keys: Vec<&str> = key.iter().map(String::as_str).collect();
                out.push(self.records.make(
                    run.at,
                    &keys,
                    RecordBody::NonIdempotent(Box::new(record)),
                ));
            }
            return;
        }
        let (Some(c), Some(j)) = (changed, j) else {
            return;
        };
        let streak = after_run(prior, now, Some(j)).streak;
        if streak < limit || j.kind == ChangeKind::Intentional {
            return;
        }
        let minions = u32::try_from(
            self.memory
                .of_state(state)
                .filter(|p| p.streak >= 2)
                .count(),
        )
        .unwrap_or(u32::MAX);
        let record = NonIdempotent {
            sls: c.sls.clone(),
            state_id: c.state_id.clone(),
            function: c.function.clone(),
            name: c.name.clone(),
            status: SettleStatus::NeverSettles,
            hint: hint_for(&c.function).to_owned(),
            jid: run.jid.to_owned(),
            minion: run.minion.to_owned(),
            changed_runs: streak,
            minions: minions.max(1),
            repo: repo.to_owned(),
            commit: commit.to_owned(),
            since: run.at,
        };
        let key = judgement_key(&record, "never_settles");
        let keys: Vec<&str> = key.iter().map(String::as_str).collect();
        out.push(self.records.make(
            run.at,
            &keys,
            RecordBody::NonIdempotent(Box::new(record.clone())),
        ));
        self.judged.insert(state, Judged { record, calm: 0 });
    }

    /// The minion's index (`None`: the memory is full and it is new).
    fn minion_id(&mut self, minion: &str) -> Option<u32> {
        let id = self.memory.minion(minion).ok();
        if id.is_none() {
            self.stats.remembered_refused.inc();
        }
        id
    }

    /// The job `jid`'s held runs; the oldest job decided first past
    /// `max_open_jobs`.
    fn open_job(&mut self, jid: &str, out: &mut Vec<Record>) -> &mut OpenJob {
        if !self.open.contains_key(jid) {
            while self.open.len() >= self.config.max_open_jobs {
                let Some(old) = self.open_order.pop_front() else {
                    break;
                };
                if let Some(job) = self.open.remove(&old) {
                    self.stats.jobs_decided_early.inc();
                    self.decide(&old, job, out);
                }
            }
            self.open_order.push_back(jid.into());
            self.open.insert(jid.into(), OpenJob::default());
        }
        self.open.get_mut(jid).expect("the job was just held")
    }
}

#[cfg(test)]
mod tests;
