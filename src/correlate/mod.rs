//! Correlation: ties jobs and failures to the git history of the state tree and
//! pillar, and turns triage findings into records.
//!
//! - Each `job_published` gets the HEAD of every watched checkout at that moment
//!   (`commits`). HEADs are read from git's files, re-read only when their
//!   modification times change ([`git::HeadWatch`]); a move is a `config_change`
//!   record with the commits between.
//! - A root cause gets `suspect_commits` when the state passed on that minion
//!   under an earlier HEAD: the commits between the two ([`history`]); and
//!   `introduced_by`: the oldest of the suspects that touched its SLS file, or,
//!   never seen passing, the last commit touching the file at or before the
//!   job's HEAD. Once found it is kept for the failure's fingerprint, so an
//!   unrelated later commit to the same file does not take its place.
//! - git itself runs only for failures and moves, and its answers are cached per
//!   (HEAD, SLS) and per range: 800 minions failing the same state cost one call.

pub mod applied;
pub mod fleet;
pub mod git;
pub mod history;
pub mod rollout;
pub mod saved;
mod shared;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use tracing::warn;

use foldhash::{HashMap, HashMapExt};

pub use crate::config::{CorrelateConfig, RepoSpec};
use crate::record::{
    Commit, ConfigChange, Correlation, FailureGroup as GroupRecord, IntroducedBasis, IntroducedBy,
    JobContext, Record, RecordBody, RecordFactory, RenderFailure as RenderRecord, Shared,
    StateFailure as StateRecord, SuspectCommits,
};
use crate::time::Stamp;
use crate::triage::{FailureGroup, Findings};
use git::{GitCli, GitDir, HeadWatch};
use history::{Flip, History};

crate::counts! {
    /// The correlator's own counts, read at scrape.
    pub struct CorrelateStats {
        gauge fleet = "saltsight_fleet_minions",
            "Minions a rollout is measured against: the master's accepted keys (or, unreadable, the minions seen on the bus)";
        counter fleet_refused = "saltsight_fleet_minions_refused",
            "Minions not counted in the fleet, and runs of minions outside it a rollout did not remember: jobs.max_minions was reached";
        counter head_moves = "saltsight_head_moves",
            "Moves of a watched checkout's HEAD (config_change records)";
        counter git_calls = "saltsight_git_calls", "git commands run to correlate failures";
        counter git_errors = "saltsight_git_errors", "git commands that failed or timed out";
        /// Wall time spent in git calls, microseconds.
        internal git_micros;
        counter history_refused = "saltsight_history_refused",
            "(minion, state) pairs not remembered: correlate.max_history (or its blocks' room, twice that) is reached";
    }
}

struct Repo {
    spec: RepoSpec,
    watch: Option<HeadWatch>,
    warned: bool,
}

type Heads = BTreeMap<String, String>;

/// The HEAD a job ran under in the first watched state tree, read from the
/// job's HEADs, which its returns share (not copied a return).
pub struct StateTreeHead {
    heads: Arc<Heads>,
    /// The tree's place among the HEADs (a few, one per watched checkout).
    entry: usize,
}

impl StateTreeHead {
    /// The state tree's name and its HEAD.
    pub fn name_and_head(&self) -> Option<(&str, &str)> {
        let (name, head) = self.heads.iter().nth(self.entry)?;
        Some((name, head))
    }
}

/// A range's commits (newest first) and whether more lay in it.
type Range = (Vec<Commit>, bool);

pub struct Correlator {
    repos: Vec<Repo>,
    cli: GitCli,
    records: RecordFactory,
    history: History,
    max_commits: usize,
    max_jobs: usize,
    /// `correlate.pull_request_url`: links a commit's pull request.
    pull_request_url: Option<String>,
    job_heads: HashMap<Box<str>, Arc<Heads>>,
    job_order: VecDeque<Box<str>>,
    introduced: HashMap<(usize, String, String), Option<IntroducedBy>>,
    /// `introduced_by` once found, by failure fingerprint (oldest forgotten first).
    settled: HashMap<Box<str>, IntroducedBy>,
    settled_order: VecDeque<Box<str>>,
    ranges: HashMap<(usize, String, String), Option<Range>>,
    /// (old, new, SLS file) → whether the file differs between the commits.
    sls_changes: HashMap<(String, String, String), Option<bool>>,
    /// (tree, its HEAD, SLS) → the SLS file in the checkout, when there is
    /// one: a stat per failing minion otherwise.
    sls_paths: HashMap<(usize, String, String), Option<String>>,
    /// Each state tree's commits on their way to the fleet (`None`: off).
    rollouts: Option<applied::Following>,
    /// The correlations of the job handled last, one per failure.
    job_correlations: shared::JobCorrelations,
    /// The record parts of the failures made lately, newest last.
    failure_parts: VecDeque<shared::FailureParts>,
    pub stats: std::sync::Arc<CorrelateStats>,
}

/// Cached git answers kept at most (each is small).
const MAX_CACHED: usize = 10_000;

impl Correlator {
    pub fn new(config: &CorrelateConfig, records: RecordFactory) -> Self {
        let repos = config
            .repos
            .iter()
            .map(|spec| {
                let watch = match GitDir::discover(&spec.dir) {
                    Ok(dir) => Some(HeadWatch::new(dir, spec.reference.clone())),
                    Err(e) => {
                        warn!(repo = %spec.name, error = %e, "Not watching this checkout.");
                        None
                    }
                };
                Repo {
                    spec: spec.clone(),
                    watch,
                    warned: false,
                }
            })
            .collect();
        Self {
            repos,
            cli: GitCli::new(config.git.clone(), config.git_timeout),
            records,
            history: History::new(config.max_history),
            max_commits: config.max_commits,
            max_jobs: config.max_jobs,
            pull_request_url: config.pull_request_url.clone(),
            job_heads: HashMap::new(),
            job_order: VecDeque::new(),
            introduced: HashMap::new(),
            settled: HashMap::new(),
            settled_order: VecDeque::new(),
            ranges: HashMap::new(),
            sls_changes: HashMap::new(),
            sls_paths: HashMap::new(),
            rollouts: None,
            job_correlations: shared::JobCorrelations::default(),
            failure_parts: VecDeque::new(),
            stats: std::sync::Arc::default(),
        }
    }

    /// Whether any checkout is watched (triage then reports every state's outcome).
    pub fn watches_states(&self) -> bool {
        self.repos
            .iter()
            .any(|r| r.spec.states && r.watch.is_some())
    }

    /// The HEADs now, after a `config_change` into `out` for each that moved.
    fn heads_now(&mut self, at: Stamp, out: &mut Vec<Record>) -> Heads {
        let mut heads = Heads::new();
        for i in 0..self.repos.len() {
            let repo = &mut self.repos[i];
            let Some(watch) = repo.watch.as_mut() else {
                continue;
            };
            match watch.refresh() {
                Ok(Some((old, new))) => {
                    repo.warned = false;
                    self.stats.head_moves.inc();
                    let moved = old.is_some();
                    if moved {
                        out.push(self.config_change(i, old, new.clone(), at));
                    }
                    if let Some(new) = new {
                        self.rollout_head(i, &new, moved, at, out);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    if !std::mem::replace(&mut repo.warned, true) {
                        warn!(repo = %repo.spec.name, error = %e, "Cannot read the checkout's HEAD.");
                    }
                }
            }
            if let Some(head) = &self.repos[i].watch.as_ref().and_then(|w| w.head.clone()) {
                heads.insert(self.repos[i].spec.name.clone(), head.clone());
            }
        }
        heads
    }

    fn config_change(
        &mut self,
        repo: usize,
        old: Option<String>,
        new: Option<String>,
        at: Stamp,
    ) -> Record {
        let (commits, truncated) = match (&old, &new) {
            (Some(o), Some(n)) => self.range(repo, o, n).unwrap_or_default(),
            _ => (Vec::new(), false),
        };
        let spec = &self.repos[repo].spec;
        let (old_key, new_key) = (
            old.clone().unwrap_or_default(),
            new.clone().unwrap_or_default(),
        );
        self.records.make(
            at,
            &[spec.name.as_str(), &old_key, &new_key],
            RecordBody::ConfigChange(ConfigChange {
                repo: spec.name.clone(),
                path: spec.dir.display().to_string(),
                old,
                new,
                commits,
                truncated,
            }),
        )
    }

    /// The commits (tree → HEAD) a job published at `at` runs under, and
    /// remembered for its later records; a HEAD that moved since the last
    /// look is a `config_change` in `out` first.
    pub fn commits_for_new_job(&mut self, jid: &str, at: Stamp, out: &mut Vec<Record>) -> Heads {
        if self.repos.is_empty() {
            return Heads::new();
        }
        Heads::clone(&self.heads_now_for(jid, at, out))
    }

    /// The HEADs now, remembered as job `jid`'s.
    fn heads_now_for(&mut self, jid: &str, at: Stamp, out: &mut Vec<Record>) -> Arc<Heads> {
        let heads = Arc::new(self.heads_now(at, out));
        self.remember_job(jid, Arc::clone(&heads));
        heads
    }

    fn remember_job(&mut self, jid: &str, heads: Arc<Heads>) {
        while self.job_order.len() >= self.max_jobs {
            if let Some(old) = self.job_order.pop_front() {
                self.job_heads.remove(&old);
            }
        }
        self.job_order.push_back(jid.into());
        self.job_heads.insert(jid.into(), heads);
    }

    /// The job's HEADs at publish, or (a job published unseen: scheduled, or
    /// before saltsight started) the HEADs when its first record was made,
    /// remembered for the rest: each look at a HEAD is a `stat` of each of
    /// its files, and a return asks three times (its state tree, what it
    /// applied, its failures), so an unseen job's 500 returns were 1,500 looks.
    fn heads_of(&mut self, jid: &str, at: Stamp, out: &mut Vec<Record>) -> Arc<Heads> {
        match self.job_heads.get(jid) {
            Some(heads) => heads.clone(),
            None if self.repos.is_empty() => Arc::default(),
            None => self.heads_now_for(jid, at, out),
        }
    }

    /// The first watched state tree's name and the HEAD job `jid` ran under
    /// (its HEADs at publish, or, published unseen, when first seen).
    pub fn state_tree_of(
        &mut self,
        jid: &str,
        at: Stamp,
        out: &mut Vec<Record>,
    ) -> Option<StateTreeHead> {
        let heads = self.heads_of(jid, at, out);
        let (repo, _) = self.states_head(&heads)?;
        let name = self.repos[repo].spec.name.as_str();
        let entry = heads.keys().position(|held| held == name)?;
        Some(StateTreeHead { heads, entry })
    }

    /// Whether the SLS `sls` differs between commits `old` and `new` of the
    /// first watched state tree: a commit between them (either way, so a
    /// rollback counts) touched its file. `None`: git cannot say, or the file
    /// is not in the checkout. Cached.
    pub fn sls_changed(&mut self, old: &str, new: &str, sls: &str) -> Option<bool> {
        let repo = self.repos.iter().position(|r| r.spec.states)?;
        let path = self.sls_path(repo, new, sls)?;
        let key = (old.to_owned(), new.to_owned(), path.clone());
        if let Some(cached) = self.sls_changes.get(&key) {
            return *cached;
        }
        let touched = |this: &mut Self, range: String| {
            this.git_log(repo, &range, &[&path], 1)
                .map(|commits| !commits.is_empty())
        };
        let changed = match touched(self, format!("{old}..{new}")) {
            Some(true) => Some(true),
            Some(false) => touched(self, format!("{new}..{old}")),
            None => None,
        };
        if self.sls_changes.len() >= MAX_CACHED {
            self.sls_changes.clear();
        }
        self.sls_changes.insert(key, changed);
        changed
    }

    /// The watched state tree's HEAD among `heads` (the first state tree).
    fn states_head<'h>(&self, heads: &'h Heads) -> Option<(usize, &'h str)> {
        self.repos.iter().enumerate().find_map(|(i, r)| {
            r.spec
                .states
                .then(|| heads.get(&r.spec.name).map(|h| (i, h.as_str())))
                .flatten()
        })
    }

    /// One minion's findings → `state_failure` and `render_failure` records, onto `out`;
    /// `incidents` holds the external incident of each state failure, in
    /// order (what the incident stage made of it, before the record exists).
    pub fn on_findings(
        &mut self,
        findings: &Findings,
        context: &Shared<JobContext>,
        incidents: &[Option<String>],
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        let heads = self.heads_of(&findings.jid, at, out);
        let states_head = self.states_head(&heads);
        if let Some((_, head)) = states_head {
            if !findings.outcomes.is_empty() {
                self.history
                    .record(&findings.minion, head, &findings.outcomes);
                self.stats.history_refused.set(self.history.refused);
            }
        }
        for (i, f) in findings.state_failures.iter().enumerate() {
            let state = &f.state;
            let flip = self.flip(&heads, &findings.minion, state.key_hash);
            let correlation = self.job_correlation(
                &findings.jid,
                &heads,
                Some(&state.sls),
                flip.as_ref(),
                &f.fingerprint,
            );
            let parts = self.failure_parts(f);
            let body = RecordBody::StateFailure(Box::new(StateRecord {
                jid: findings.jid.clone(),
                minion: findings.minion.clone(),
                fun: findings.fun.clone(),
                state: parts.facts,
                run_num: state.run_num,
                duration_ms: state.duration_ms,
                start_time: state.start_time.clone(),
                cause: parts.cause,
                fallout: f.fallout,
                output: parts.output,
                fingerprint: f.fingerprint.clone(),
                incident: incidents.get(i).cloned().flatten(),
                first_failing: flip.map(|f| f.first_failing_now),
                context: context.clone(),
                correlation,
            }));
            out.push(
                self.records
                    .make(at, &[&findings.jid, &findings.minion, &state.key], body),
            );
        }
        for f in &findings.render_failures {
            let sls = f.error.sls.clone();
            // A pillar SLS is not a file of the watched state tree.
            let tree_sls = sls.as_deref().filter(|_| !f.error.pillar);
            let correlation =
                self.job_correlation(&findings.jid, &heads, tree_sls, None, &f.fingerprint);
            let body = RecordBody::RenderFailure(Box::new(RenderRecord {
                jid: findings.jid.to_string(),
                minion: findings.minion.to_string(),
                fun: findings.fun.to_string(),
                saltenv: f.error.saltenv.clone(),
                sls,
                line: f.error.line,
                column: f.error.column,
                pillar: f.error.pillar,
                message: f.message.text.clone(),
                message_len: f.message.original_len,
                cause: f.classification.clone(),
                fingerprint: f.fingerprint.clone(),
                context: context.clone(),
                correlation,
            }));
            out.push(self.records.make(
                at,
                &[&findings.jid, &findings.minion, &f.fingerprint],
                body,
            ));
        }
    }

    /// A job's failure groups (at its `job_completed` of `revision`) →
    /// records; `incident_of` names the open external incident a group's
    /// cause belongs to.
    pub fn on_groups(
        &mut self,
        groups: Vec<FailureGroup>,
        context: &Shared<JobContext>,
        revision: u32,
        incident_of: &dyn Fn(&crate::record::Classification) -> Option<String>,
        at: Stamp,
    ) -> Vec<Record> {
        let mut out = Vec::new();
        // The groups are one job's: its HEADs are read once.
        let Some(jid) = groups.first().map(|g| g.jid.clone()) else {
            return out;
        };
        let heads = self.heads_of(&jid, at, &mut out);
        for g in groups {
            // The group's suspects are its first minion's (they ran the same HEAD).
            let flip = match (g.state_key_hash, g.minions.first()) {
                (Some(hash), Some(minion)) => self.flip(&heads, minion, hash),
                _ => None,
            };
            let tree_sls = g.sls.as_deref().filter(|_| !g.pillar);
            let correlation = self
                .correlation(&heads, tree_sls, flip.as_ref(), &g.fingerprint)
                .into();
            let incident = incident_of(&g.classification);
            let revision_key = revision.to_string();
            let key = [
                g.jid.as_str(),
                g.fingerprint.as_str(),
                revision_key.as_str(),
            ];
            let body = RecordBody::FailureGroup(Box::new(GroupRecord {
                jid: g.jid.clone(),
                fingerprint: g.fingerprint.clone(),
                sls: g.sls,
                pillar: g.pillar,
                state_id: g.state_id,
                function: g.function,
                cause: g.classification,
                comment: g.comment.text,
                comment_len: g.comment.original_len,
                normalised: g.normalised,
                output: g.output,
                count: g.count,
                minions: g.minions,
                first_seen_jid: g.first_seen_jid,
                first_seen_at: g.first_seen_at,
                revision,
                incident,
                context: context.clone(),
                correlation,
            }));
            out.push(self.records.make(at, &key, body));
        }
        out
    }

    /// What `history` says of a failing state on a minion, under the job's state
    /// tree HEAD.
    fn flip(&self, heads: &Heads, minion: &str, state: u64) -> Option<Flip> {
        let (_, head) = self.states_head(heads)?;
        self.history.flip(minion, state, head)
    }

    /// A failure's correlation: the job's HEADs, the suspect commits of a
    /// flip, and the commit that introduced it.
    fn correlation(
        &mut self,
        heads: &Heads,
        sls: Option<&str>,
        flip: Option<&Flip>,
        fingerprint: &str,
    ) -> Correlation {
        let states_repo = self.states_head(heads).map(|(repo, _)| repo);
        let suspect_commits =
            flip.and_then(|f| self.suspects(states_repo, &f.last_ok, &f.first_failed));
        let introduced_by = sls
            .filter(|sls| !sls.is_empty())
            .and_then(|sls| self.introduced_by(heads, sls, flip, fingerprint));
        Correlation {
            commits: heads.clone(),
            introduced_by,
            suspect_commits,
        }
    }

    /// The commit that introduced a failure of `sls`: the oldest commit touching
    /// the file since the state last passed (a flip), else the one settled for
    /// the fingerprint, else the last commit touching the file at or before the
    /// job's HEAD (then settled).
    fn introduced_by(
        &mut self,
        heads: &Heads,
        sls: &str,
        flip: Option<&Flip>,
        fingerprint: &str,
    ) -> Option<IntroducedBy> {
        let (repo, path, head) = self.sls_file(heads, sls)?;
        if let Some(flip) = flip.filter(|_| Some(repo) == self.states_head(heads).map(|s| s.0)) {
            // Newest first: the last is the oldest change since the pass. None
            // touched the file: the cause is elsewhere (an include, pillar), and
            // the suspects say so better than a guess.
            let range = format!("{}..{}", flip.last_ok, flip.first_failed);
            return self
                .git_log(repo, &range, &[&path], self.max_commits)
                .and_then(|mut commits| commits.pop())
                .map(|commit| IntroducedBy {
                    repo: self.repos[repo].spec.name.clone(),
                    path,
                    commit,
                    basis: IntroducedBasis::SinceLastPass,
                });
        }
        if let Some(settled) = self.settled.get(fingerprint) {
            return Some(settled.clone());
        }
        let found = self.last_change(repo, &head, &path)?;
        self.settle(fingerprint, found.clone());
        Some(found)
    }

    /// The first watched state tree (among `heads`) holding the SLS file: its
    /// index, the file's path and the job's HEAD of it.
    fn sls_file(&mut self, heads: &Heads, sls: &str) -> Option<(usize, String, String)> {
        (0..self.repos.len()).find_map(|i| {
            let repo = &self.repos[i];
            let head = heads
                .get(&repo.spec.name)
                .filter(|_| repo.spec.states)?
                .clone();
            let path = self.sls_path(i, &head, sls)?;
            Some((i, path, head))
        })
    }

    /// The file of SLS `sls` in tree `repo`'s checkout (`sls.sls`, or
    /// `sls/init.sls`), looked for once per HEAD of the tree.
    fn sls_path(&mut self, repo: usize, head: &str, sls: &str) -> Option<String> {
        let key = (repo, head.to_owned(), sls.to_owned());
        if let Some(known) = self.sls_paths.get(&key) {
            return known.clone();
        }
        let base = sls.replace('.', "/");
        let dir = &self.repos[repo].spec.dir;
        let path = [format!("{base}.sls"), format!("{base}/init.sls")]
            .into_iter()
            .find(|c| dir.join(c).is_file());
        if self.sls_paths.len() >= MAX_CACHED {
            self.sls_paths.clear();
        }
        self.sls_paths.insert(key, path.clone());
        path
    }

    /// The last commit touching `path` at or before `head`, cached.
    fn last_change(&mut self, repo: usize, head: &str, path: &str) -> Option<IntroducedBy> {
        let key = (repo, head.to_owned(), path.to_owned());
        if let Some(cached) = self.introduced.get(&key) {
            return cached.clone();
        }
        let found = self
            .git_log(repo, head, &[path], 1)
            .and_then(|mut commits| commits.pop())
            .map(|commit| IntroducedBy {
                repo: self.repos[repo].spec.name.clone(),
                path: path.to_owned(),
                commit,
                basis: IntroducedBasis::FirstSeenHead,
            });
        if self.introduced.len() >= MAX_CACHED {
            self.introduced.clear();
        }
        self.introduced.insert(key, found.clone());
        found
    }

    /// Keeps `introduced` for `fingerprint`, forgetting the oldest past
    /// [`MAX_CACHED`].
    fn settle(&mut self, fingerprint: &str, introduced: IntroducedBy) {
        while self.settled_order.len() >= MAX_CACHED {
            if let Some(old) = self.settled_order.pop_front() {
                self.settled.remove(&old);
            }
        }
        self.settled_order.push_back(fingerprint.into());
        self.settled.insert(fingerprint.into(), introduced);
    }

    fn suspects(
        &mut self,
        states_repo: Option<usize>,
        last_ok: &str,
        first_failed: &str,
    ) -> Option<SuspectCommits> {
        let repo = states_repo?;
        let (commits, truncated) = self.range(repo, last_ok, first_failed)?;
        Some(SuspectCommits {
            repo: self.repos[repo].spec.name.clone(),
            last_ok: last_ok.to_owned(),
            first_failed: first_failed.to_owned(),
            commits,
            truncated,
        })
    }

    /// `old..new` of a repo, newest first, at most `max_commits`, cached.
    fn range(&mut self, repo: usize, old: &str, new: &str) -> Option<Range> {
        let key = (repo, old.to_owned(), new.to_owned());
        if let Some(cached) = self.ranges.get(&key) {
            return cached.clone();
        }
        let found = self
            .git_log(repo, &format!("{old}..{new}"), &[], self.max_commits + 1)
            .map(|mut commits| {
                let truncated = commits.len() > self.max_commits;
                commits.truncate(self.max_commits);
                (commits, truncated)
            });
        if self.ranges.len() >= MAX_CACHED {
            self.ranges.clear();
        }
        self.ranges.insert(key, found.clone());
        found
    }

    fn git_log(
        &mut self,
        repo: usize,
        range: &str,
        paths: &[&str],
        limit: usize,
    ) -> Option<Vec<Commit>> {
        let dir = self.repos[repo].spec.dir.clone();
        let started = std::time::Instant::now();
        self.stats.git_calls.inc();
        let result = self.cli.log(&dir, range, paths, limit);
        self.stats
            .git_micros
            .add(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        match result {
            Ok(mut commits) => {
                let (template, name) = (
                    self.pull_request_url.as_deref(),
                    &self.repos[repo].spec.name,
                );
                for commit in &mut commits {
                    commit.pull_request = commit
                        .pull_request
                        .take()
                        .map(|pr| pr.with_url(template, name));
                }
                Some(commits)
            }
            Err(e) => {
                self.stats.git_errors.inc();
                warn!(repo = %self.repos[repo].spec.name, error = %e, "git failed.");
                None
            }
        }
    }
}
