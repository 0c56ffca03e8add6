//! The grain of sand: from a failed state run, the state that caused it (told
//! apart from requisite fallout), its category with evidence, and a fingerprint
//! that groups the same failure across minions and jobs. Render errors (an SLS
//! that did not render) are named with their SLS.
//!
//! Pure: returns in, findings out; the correlator turns findings into records.
//! Memory is bounded: groups are kept per job while it is open and for the late
//! window after its last failure (at most `max_jobs`, oldest forgotten first),
//! and first sightings of fingerprints up to `max_fingerprints`, oldest
//! forgotten first.

pub mod category;
pub mod evidence;
pub mod failures;
pub mod fingerprint;
mod memo;
pub mod patterns;
pub mod render;
pub mod rules;
pub mod saved;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};

pub use crate::config::TriageConfig;
use crate::event::states::{States, orchestration_states};
use crate::event::{JobReturn, RunJob, Text};
use crate::record::CommandOutput;
use crate::time::Stamp;
pub use category::{Capped, Category, Classification, FailureText, classify};
pub use failures::Judged;
use failures::{
    Decoded, FailedState, RootCause, RootScratch, SPARE_FAILED_STATES, Spare, root_causes,
    walk_with,
};
use fingerprint::{StateKey, normalise};
use render::{RenderError, render_errors};

/// A root cause found in one minion's return: the state, how many failed
/// states are its fallout, and what triage made of it (shared by every
/// minion that failed the same way; reads go through to it, `f.fingerprint`).
#[derive(Debug, Clone, PartialEq)]
pub struct StateFailure {
    pub state: FailedState,
    pub fallout: u32,
    pub judged: Arc<Judged>,
}

impl std::ops::Deref for StateFailure {
    type Target = Judged;

    fn deref(&self) -> &Judged {
        &self.judged
    }
}

impl StateFailure {
    /// The command's exit code and the ends of its output, when it ran one.
    pub fn output(&self) -> CommandOutput {
        CommandOutput {
            retcode: self.state.exit_code,
            stderr: self.state.stderr.clone(),
            stdout: self.state.stdout.clone(),
        }
    }
}

/// One render error in one minion's return.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderFailure {
    pub error: RenderError,
    pub message: Capped,
    /// The message as fingerprinted.
    pub normalised: String,
    pub classification: Classification,
    pub fingerprint: String,
}

/// What triage found in one return.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Findings {
    /// Shared with the records made of the findings.
    pub jid: Arc<str>,
    pub minion: Arc<str>,
    pub fun: Arc<str>,
    pub state_failures: Vec<StateFailure>,
    pub render_failures: Vec<RenderFailure>,
    /// Fallout whose failed requisite is not in the return.
    pub unexplained_fallout: u32,
    /// Per state: hash of (module, id, function), succeeded (when asked for).
    pub outcomes: Vec<(u64, bool)>,
}

impl Findings {
    pub fn is_empty(&self) -> bool {
        self.state_failures.is_empty() && self.render_failures.is_empty()
    }
}

/// One failure across the minions of one job.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FailureGroup {
    pub jid: String,
    pub fingerprint: String,
    pub sls: Option<String>,
    /// The SLS is a pillar's (a render failure of the pillar).
    #[serde(default)]
    pub pillar: bool,
    /// `None` for render failures.
    pub state_id: Option<String>,
    pub function: Option<String>,
    /// [`crate::event::states::state_hash`] of the state's key (`None` for render failures).
    pub state_key_hash: Option<u64>,
    pub classification: Classification,
    /// The first minion's comment (or render message), capped.
    pub comment: Capped,
    /// The comment as fingerprinted (what varies replaced).
    pub normalised: String,
    /// The first minion's command output.
    pub output: CommandOutput,
    /// Minions with this failure.
    pub count: u32,
    /// The first few of them, sorted.
    pub minions: Vec<String>,
    /// The first job this agent saw the fingerprint in (this job if it is new).
    pub first_seen_jid: String,
    pub first_seen_at: Stamp,
}

#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
struct JobGroups {
    /// fingerprint → group.
    groups: BTreeMap<String, FailureGroup>,
    /// Changed since it was last emitted.
    dirty: bool,
    /// When a failure was last counted in it (`None` in a checkpoint of an
    /// older saltsight: taken as the time it was restored).
    #[serde(default)]
    last_at: Option<Stamp>,
}

crate::counts! {
    /// Triage's own counts, read at scrape.
    pub struct TriageStats {
        counter state_runs = "saltsight_triage_state_runs",
            "State-run returns walked for failures";
        internal state_failures;
        internal render_failures;
        internal fallout_states;
        counter failures_not_examined = "saltsight_triage_failures_not_examined",
            "Failed states past the first 10,000 of one return: counted, not examined";
        counter evicted_jobs = "saltsight_triage_jobs_evicted",
            "Jobs whose failure groups were dropped to respect the job bound";
        counter forgotten_jobs = "saltsight_triage_jobs_forgotten",
            "Jobs whose failure groups were forgotten: closed, and no failure counted for the late window";
        counter texts_recalled = "saltsight_triage_texts_recalled",
            "Failed states whose text was classified before (the same failure on another minion): read from the memo or the shared decode";
        counter texts_forgotten = "saltsight_triage_texts_forgotten",
            "Distinct failure texts forgotten to keep the memo within its bound (4,096)";
        counter states_recalled = "saltsight_triage_states_recalled",
            "Failed states whose shared fields were decoded before (the same failure on another minion): read from the memo";
        counter states_forgotten = "saltsight_triage_states_forgotten",
            "Decoded failed states forgotten to keep their memo within its bound (128)";
    }
}

pub struct Triage {
    config: TriageConfig,
    jobs: HashMap<Box<str>, JobGroups>,
    jobs_order: VecDeque<Box<str>>,
    first_seen: HashMap<String, (String, Stamp)>,
    first_seen_order: VecDeque<String>,
    /// When idle jobs are looked for next (at most once a [`FORGET_EVERY`]).
    next_forget_at: Stamp,
    /// Classifications and normalised comments of the texts seen lately.
    memo: memo::Memo,
    /// What the failed states seen lately decoded to.
    decoded: Decoded,
    /// The last return's vectors of failed states and outcomes, emptied,
    /// for the next.
    spare: Spare,
    /// The last findings' vector of state failures, emptied, for the next
    /// ([`Triage::recycle`]).
    spare_found: Vec<StateFailure>,
    /// What finding root causes works in, kept for the next return.
    root_scratch: RootScratch,
    pub stats: std::sync::Arc<TriageStats>,
}

pub use crate::event::args::is_state_run;

/// An open job's jid and function, as the tracker holds them for its
/// returns' records.
pub type JobTexts<'j> = (&'j Arc<str>, &'j Arc<str>);

/// Whose return triage reads: its job, minion and function, and the job's
/// texts to share when the job is open.
struct Names<'r> {
    jid: &'r str,
    /// Shared with the return's record ([`JobReturn::minion_name`]).
    minion: Arc<str>,
    fun: &'r str,
    shared: Option<JobTexts<'r>>,
}

/// How often, in event time, triage looks for jobs to forget: a pass over
/// every job it holds (at most `max_jobs`).
pub const FORGET_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

impl Triage {
    pub fn new(config: TriageConfig) -> Self {
        Self {
            config,
            jobs: HashMap::new(),
            jobs_order: VecDeque::new(),
            first_seen: HashMap::new(),
            first_seen_order: VecDeque::new(),
            next_forget_at: Stamp(i64::MIN),
            memo: memo::Memo::default(),
            decoded: Decoded::default(),
            spare: Spare::default(),
            spare_found: Vec::new(),
            root_scratch: RootScratch::default(),
            stats: std::sync::Arc::default(),
        }
    }

    /// Findings done with: their vectors' room kept, emptied, for the next
    /// return's (a failing return's findings made three of them).
    pub fn recycle(&mut self, findings: Findings) {
        let Findings {
            mut state_failures,
            outcomes,
            ..
        } = findings;
        if state_failures.capacity() <= SPARE_FAILED_STATES {
            state_failures.clear();
            self.spare_found = state_failures;
        }
        self.spare.keep_outcomes(outcomes);
    }

    /// Whether findings report every state's outcome (the correlator's history
    /// and open incidents need them; they cost a hash per state).
    pub fn want_outcomes(&mut self, want: bool) {
        self.config.want_outcomes = want;
    }

    /// A minion's return: findings for state runs, `None` for anything else,
    /// counted in their job's failure groups.
    pub fn on_return(&mut self, r: &JobReturn<'_>, at: Stamp) -> Option<Findings> {
        let findings = self.on_job_return(r, None)?;
        self.add_to_groups(&findings, at);
        Some(findings)
    }

    /// What a minion's return of a job whose jid and function may be `shared`
    /// (an open job's, the tracker's: the findings hold them, not copies)
    /// says, not yet counted: the pipeline counts it
    /// ([`Triage::add_to_groups`]) once the tracker has counted the return,
    /// so that a duplicate is counted once.
    pub fn on_job_return(
        &mut self,
        r: &JobReturn<'_>,
        shared: Option<JobTexts<'_>>,
    ) -> Option<Findings> {
        let fun = r.fun.as_ref().map_or("", Text::as_str);
        if !is_state_run(fun) {
            return None;
        }
        let raw = r.ret?.0;
        self.triage(
            Names {
                jid: r.jid.as_str(),
                minion: r.minion_name(),
                fun,
                shared,
            },
            raw,
            r.states(),
            r.retcode,
        )
    }

    /// An orchestration's return (`salt/run/<jid>/ret` of `state.orchestrate`):
    /// its steps are states of the master's own run, under `return.data.<id>`.
    /// Not yet counted, as [`Triage::on_job_return`].
    pub fn on_runner_return(&mut self, r: &RunJob<'_>) -> Option<Findings> {
        let fun = r.fun.as_ref().map_or("", Text::as_str);
        if !matches!(
            fun,
            "runner.state.orchestrate" | "runner.state.orch" | "runner.state.sls"
        ) {
            return None;
        }
        let (minion, raw) = orchestration_states(r.ret?.0)?;
        let states = States::of(raw);
        let names = Names {
            jid: r.jid.as_str(),
            minion: minion.into(),
            fun,
            shared: None,
        };
        self.triage(names, raw, states.as_ref(), None)
    }

    fn triage(
        &mut self,
        names: Names<'_>,
        raw: &[u8],
        states: Option<&States<'_>>,
        retcode: Option<i64>,
    ) -> Option<Findings> {
        let (jid, fun) = match names.shared {
            Some((jid, fun)) if **jid == *names.jid => (
                Arc::clone(jid),
                if **fun == *names.fun {
                    Arc::clone(fun)
                } else {
                    names.fun.into()
                },
            ),
            _ => (names.jid.into(), names.fun.into()),
        };
        let mut findings = Findings {
            jid,
            minion: names.minion,
            fun,
            ..Findings::default()
        };
        let max = self.config.comment_max_bytes;
        let (recalled, forgotten) = (self.decoded.recalled, self.decoded.forgotten);
        let run = states.map(|states| {
            let spare = std::mem::take(&mut self.spare);
            walk_with(states, self.config.want_outcomes, &mut self.decoded, spare)
        });
        self.stats
            .states_recalled
            .add(self.decoded.recalled - recalled);
        self.stats
            .states_forgotten
            .add(self.decoded.forgotten - forgotten);
        if let Some(mut run) = run {
            self.stats.state_runs.inc();
            self.stats
                .fallout_states
                .add(run.failed.iter().filter(|s| s.is_fallout()).count() as u64);
            findings.outcomes = run.outcomes;
            self.stats
                .failures_not_examined
                .add(u64::from(run.not_examined));
            let (mut causes, unexplained) = root_causes(&mut run.failed, &mut self.root_scratch);
            self.spare.keep_failed(run.failed);
            findings.unexplained_fallout = unexplained;
            findings.state_failures = std::mem::take(&mut self.spare_found);
            findings.state_failures.reserve_exact(causes.len());
            for RootCause { state, fallout } in causes.drain(..) {
                let judged = match state.judged.get() {
                    Some(judged) => {
                        self.stats.texts_recalled.inc();
                        Arc::clone(judged)
                    }
                    None => {
                        let judged = Arc::new(self.judge(&state));
                        // Kept with the decode, for the job's other minions.
                        let _ = state.judged.set(Arc::clone(&judged));
                        judged
                    }
                };
                findings.state_failures.push(StateFailure {
                    state,
                    fallout,
                    judged,
                });
            }
            self.root_scratch.keep(causes);
        } else if let Some(errors) = render_errors(raw, retcode) {
            for error in errors {
                let normalised = normalise(&error.message);
                let classification = error.classification.clone();
                findings.render_failures.push(RenderFailure {
                    fingerprint: fingerprint::of_render(
                        error.sls.as_deref(),
                        error.pillar,
                        &normalised,
                        &classification,
                    ),
                    message: Capped::new(&error.message, max),
                    normalised,
                    classification,
                    error,
                });
            }
        } else {
            return None;
        }
        self.stats
            .state_failures
            .add(findings.state_failures.len() as u64);
        self.stats
            .render_failures
            .add(findings.render_failures.len() as u64);
        Some(findings)
    }

    /// What failed state `state` says: its text read (through the memo),
    /// its comment capped, its fingerprint.
    fn judge(&mut self, state: &FailedState) -> Judged {
        // The command's own words count too: stderr, then stdout (Salt's
        // "Timed out after N seconds" is only there).
        let (hits, forgotten) = (self.memo.hits, self.memo.forgotten);
        let read = self.memo.read(&FailureText {
            function: &state.function,
            comment: &state.comment,
            stderr: state.stderr.as_deref(),
            stdout: state.stdout.as_deref(),
            exit_code: state.exit_code,
        });
        self.stats.texts_recalled.add(self.memo.hits - hits);
        self.stats
            .texts_forgotten
            .add(self.memo.forgotten - forgotten);
        let fingerprint = fingerprint::of_state(
            &StateKey {
                function: &state.function,
                sls: &state.sls,
                state_id: &state.state_id,
                normalised: &read.normalised,
                exit_code: state.exit_code,
                stderr_line: &read.stderr_line,
            },
            &read.classification,
        );
        Judged {
            comment: Capped::new(&state.comment, self.config.comment_max_bytes),
            normalised: read.normalised,
            classification: read.classification,
            fingerprint: fingerprint.into(),
        }
    }

    /// Counts a return's findings in its job's failure groups, once a return.
    pub fn add_to_groups(&mut self, findings: &Findings, at: Stamp) {
        if findings.is_empty() {
            return;
        }
        if !self.jobs.contains_key(&*findings.jid) {
            while self.jobs_order.len() >= self.config.max_jobs {
                if let Some(old) = self.jobs_order.pop_front() {
                    self.jobs.remove(&old);
                    self.stats.evicted_jobs.inc();
                }
            }
            self.jobs_order.push_back(Box::from(&*findings.jid));
        }
        for f in &findings.state_failures {
            self.count_member(findings, &f.fingerprint, at, |g| {
                g.sls = Some(f.state.sls.clone());
                g.state_id = Some(f.state.state_id.clone());
                g.function = Some(f.state.function.clone());
                g.state_key_hash = Some(f.state.key_hash);
                g.classification = f.classification.clone();
                g.comment = f.comment.clone();
                g.normalised = f.normalised.clone();
                g.output = f.output();
            });
        }
        for f in &findings.render_failures {
            self.count_member(findings, &f.fingerprint, at, |g| {
                g.sls = f.error.sls.clone();
                g.pillar = f.error.pillar;
                g.classification = f.classification.clone();
                g.comment = f.message.clone();
                g.normalised = f.normalised.clone();
            });
        }
    }

    /// Counts the minion of `findings` in its job's group of `fingerprint`,
    /// making the group (with `fill`) when it is the first of the job.
    fn count_member(
        &mut self,
        findings: &Findings,
        fingerprint: &str,
        at: Stamp,
        fill: impl FnOnce(&mut FailureGroup),
    ) {
        let jid = &*findings.jid;
        let example_minions = self.config.example_minions;
        // One lookup of the job and of its group for every minion but the
        // first (a jid is not allocated again to find its job).
        if let Some(job) = self.jobs.get_mut(jid) {
            job.dirty = true;
            job.last_at = Some(at);
            if let Some(group) = job.groups.get_mut(fingerprint) {
                count_once(group, &findings.minion, example_minions);
                return;
            }
        }
        let mut group = self.new_group(findings, fingerprint, at, fill);
        count_once(&mut group, &findings.minion, example_minions);
        let job = self.jobs.entry(jid.into()).or_default();
        job.dirty = true;
        job.last_at = Some(at);
        job.groups.insert(fingerprint.to_owned(), group);
    }

    fn new_group(
        &mut self,
        findings: &Findings,
        fingerprint: &str,
        at: Stamp,
        fill: impl FnOnce(&mut FailureGroup),
    ) -> FailureGroup {
        let (first_jid, first_at) = self.first_sighting(fingerprint, &findings.jid, at);
        let mut group = FailureGroup {
            jid: findings.jid.to_string(),
            fingerprint: fingerprint.to_owned(),
            sls: None,
            pillar: false,
            state_id: None,
            function: None,
            state_key_hash: None,
            classification: Classification::render(),
            comment: Capped::new("", 0),
            normalised: String::new(),
            output: CommandOutput::default(),
            count: 0,
            minions: Vec::new(),
            first_seen_jid: first_jid,
            first_seen_at: first_at,
        };
        fill(&mut group);
        group
    }

    fn first_sighting(&mut self, fingerprint: &str, jid: &str, at: Stamp) -> (String, Stamp) {
        if let Some(seen) = self.first_seen.get(fingerprint) {
            return seen.clone();
        }
        while self.first_seen_order.len() >= self.config.max_fingerprints {
            if let Some(old) = self.first_seen_order.pop_front() {
                self.first_seen.remove(&old);
            }
        }
        self.first_seen_order.push_back(fingerprint.to_owned());
        self.first_seen
            .insert(fingerprint.to_owned(), (jid.to_owned(), at));
        (jid.to_owned(), at)
    }

    /// Forgets the groups of the jobs `is_open` says are closed and that have
    /// counted no failure for `window` (the late window: a later return of
    /// theirs counts as unknown). Looks at most once a [`FORGET_EVERY`].
    pub fn forget_idle(
        &mut self,
        now: Stamp,
        window: std::time::Duration,
        is_open: impl Fn(&str) -> bool,
    ) {
        if now < self.next_forget_at {
            return;
        }
        self.next_forget_at = now.plus(FORGET_EVERY);
        let before = self.jobs.len();
        self.jobs
            .retain(|jid, job| is_open(jid) || job.last_at.is_some_and(|at| at.plus(window) > now));
        if self.jobs.len() < before {
            self.stats
                .forgotten_jobs
                .add((before - self.jobs.len()) as u64);
            let jobs = &self.jobs;
            self.jobs_order.retain(|jid| jobs.contains_key(jid));
        }
    }

    /// The job is complete (or amended by a late return): its groups, if they
    /// changed since last emitted, largest first.
    pub fn close_job(&mut self, jid: &str) -> Vec<FailureGroup> {
        let Some(job) = self.jobs.get_mut(jid) else {
            return Vec::new();
        };
        if !std::mem::take(&mut job.dirty) {
            return Vec::new();
        }
        let mut groups: Vec<FailureGroup> = job.groups.values().cloned().collect();
        groups.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| a.fingerprint.cmp(&b.fingerprint))
        });
        groups
    }
}

/// Counts `minion` in `group`, once (a minion among the examples is not
/// counted again: two failed states of one return alike), keeping the first
/// `example_minions` of them sorted, and so searched by halves.
fn count_once(group: &mut FailureGroup, minion: &str, example_minions: usize) {
    let Err(at) = group.minions.binary_search_by(|m| m.as_str().cmp(minion)) else {
        return; // one failure counted once per minion
    };
    group.count += 1;
    if group.minions.len() < example_minions {
        group.minions.insert(at, minion.to_owned());
    }
}

#[cfg(test)]
mod tests;
