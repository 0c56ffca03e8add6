//! Which state runs applied which commit: the correlator's side of rollouts.
//! It opens a rollout when a state tree's HEAD is read or moves (the commit's
//! subject, time and changed SLS from git), and for each minion's state run
//! finds the open rollouts whose commit is that run's HEAD or one of its
//! ancestors and whose change the run covers. git answers are cached.

use std::sync::Arc;
use std::time::Duration;

use foldhash::{HashMap, HashMapExt};

use super::fleet::Fleet;
use super::rollout::{CommitFacts, Coverage, Open, Rollouts, RunOutcome};
use super::{Correlator, MAX_CACHED};
use crate::config::rollouts::RolloutConfig;
use crate::record::Record;
use crate::time::Stamp;

/// Rollouts, the fleet they are measured against, and git's ancestry answers.
pub struct Following {
    rollouts: Rollouts,
    fleet: Fleet,
    /// (repo, ancestor, descendant) → is it.
    ancestry: HashMap<(usize, String, String), bool>,
    relist_every: Duration,
    /// When the fleet's directory is next checked (event time: no clock read).
    next_relist: Option<Stamp>,
}

/// One minion's state run, as rollouts need it.
#[derive(Debug, Clone)]
pub struct StateRun<'a> {
    pub jid: &'a str,
    /// `jid` as triage holds it, when it found failures.
    pub shared_jid: Option<&'a Arc<str>>,
    pub minion: &'a str,
    pub coverage: &'a Coverage,
    pub succeeded: bool,
    /// The first root cause's fingerprint, when it failed.
    pub fingerprint: Option<&'a Arc<str>>,
}

impl Correlator {
    /// Follows each state tree's commits to the fleet (`[rollouts]`); `max_minions`
    /// bounds the fleet.
    pub fn with_rollouts(mut self, config: &RolloutConfig, max_minions: usize) -> Self {
        if config.enabled {
            self.rollouts = Some(Following {
                rollouts: Rollouts::new(
                    self.records.clone(),
                    config.update_every,
                    config.stall_after,
                    config.max_open,
                ),
                fleet: Fleet::new(config.minions_dir.clone(), max_minions),
                ancestry: HashMap::new(),
                relist_every: config.relist_every,
                next_relist: None,
            });
        }
        self
    }

    /// A state tree's HEAD read for the first time, or moved (`moved`).
    pub(super) fn rollout_head(
        &mut self,
        repo: usize,
        commit: &str,
        moved: bool,
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        if self.rollouts.is_none() || !self.repos[repo].spec.states {
            return;
        }
        let facts = self.commit_facts(repo, commit);
        let Some(following) = self.rollouts.as_mut() else {
            return;
        };
        if following.fleet.refresh() {
            following.next_relist = Some(at.plus(following.relist_every));
        }
        following
            .rollouts
            .head(facts, moved, &following.fleet, at, out);
    }

    /// The commit's subject, time and changed SLS (empty when git cannot say).
    fn commit_facts(&mut self, repo: usize, commit: &str) -> CommitFacts {
        let spec = self.repos[repo].spec.clone();
        let logged = self
            .git_log(repo, commit, &[], 1)
            .and_then(|mut commits| commits.pop());
        let changed = match self.cli.changed_files(&spec.dir, commit) {
            Ok(files) => files,
            Err(error) => {
                self.stats.git_errors.inc();
                tracing::warn!(repo = %spec.name, %error, "git failed.");
                Vec::new()
            }
        };
        CommitFacts {
            repo: spec.name,
            commit: commit.to_owned(),
            subject: logged
                .as_ref()
                .map(|c| c.subject.clone())
                .unwrap_or_default(),
            pull_request: logged.as_ref().and_then(|c| c.pull_request.clone()),
            committed_at: logged.as_ref().and_then(|c| Stamp::parse(&c.time)),
            changed_sls: changed.iter().filter_map(|f| sls_of(f)).collect(),
        }
    }

    /// A job was published expecting `minions`: room for them in the fleet
    /// (see [`super::fleet::Fleet::expect`]) and the (minion, state) history
    /// (a rollout's standings grow a 64th at a time, `crate::cow`).
    pub fn expect_minions(&mut self, minions: usize) {
        if let Some(following) = &mut self.rollouts {
            following.fleet.expect(minions);
        }
        if self.watches_states() {
            self.history.expect_minions(minions);
        }
    }

    /// A minion showed itself on the bus (it joins the fleet when the keys
    /// cannot be read).
    pub fn saw_minion(&mut self, minion: &str) {
        if let Some(following) = &mut self.rollouts {
            following.fleet.saw(minion);
            self.stats
                .fleet_refused
                .set(following.fleet.refused + following.rollouts.refused);
        }
    }

    /// A minion's state run (not `test=True`) of job `jid`: the open rollouts
    /// it applies (or fails), by the job's HEADs.
    pub fn on_state_run(&mut self, run: &StateRun<'_>, at: Stamp, out: &mut Vec<Record>) {
        if self.rollouts.is_none() {
            return;
        }
        let heads = self.heads_of(run.jid, at, out);
        for repo in 0..self.repos.len() {
            if !self.repos[repo].spec.states {
                continue;
            }
            // The name and HEAD are borrowed from the job's HEADs (shared), not
            // copied: the rollouts and the ancestry cache below need `self`.
            let Some((name, head)) = heads.get_key_value(self.repos[repo].spec.name.as_str())
            else {
                continue;
            };
            let mut index = 0;
            loop {
                let Some(following) = self.rollouts.as_ref() else {
                    return;
                };
                let Some(open) = following.rollouts.open_rollouts(name).get(index) else {
                    break;
                };
                // The HEAD itself or a descendant of the rollout's commit: the
                // commit is copied only to ask git (which needs `self`).
                let under_head = open.covered_by(run.coverage)
                    && (open.commit() == head.as_str() || {
                        let commit = open.commit().to_owned();
                        self.ancestor_by_git(repo, &commit, head)
                    });
                if under_head {
                    let Some(following) = self.rollouts.as_mut() else {
                        return;
                    };
                    let outcome = RunOutcome {
                        minion: run.minion,
                        jid: run.jid,
                        shared_jid: run.shared_jid,
                        succeeded: run.succeeded,
                        fingerprint: run.fingerprint,
                    };
                    let open_before = following.rollouts.open_rollouts(name).len();
                    following
                        .rollouts
                        .outcome(name, index, &outcome, &following.fleet, at, out);
                    self.stats
                        .fleet_refused
                        .set(following.fleet.refused + following.rollouts.refused);
                    // A rollout this run completed is closed: the next one is
                    // at its index now.
                    if following.rollouts.open_rollouts(name).len() < open_before {
                        continue;
                    }
                }
                index += 1;
            }
        }
    }

    /// Whether commit `ancestor` precedes `descendant` (another commit) in
    /// `repo`, as git says; cached.
    fn ancestor_by_git(&mut self, repo: usize, ancestor: &str, descendant: &str) -> bool {
        let key = (repo, ancestor.to_owned(), descendant.to_owned());
        if let Some(known) = self.rollouts.as_ref().and_then(|f| f.ancestry.get(&key)) {
            return *known;
        }
        let dir = self.repos[repo].spec.dir.clone();
        self.stats.git_calls.inc();
        let answer = match self.cli.is_ancestor(&dir, ancestor, descendant) {
            Ok(answer) => answer,
            Err(error) => {
                self.stats.git_errors.inc();
                tracing::warn!(repo = %self.repos[repo].spec.name, %error, "git failed.");
                false
            }
        };
        if let Some(following) = &mut self.rollouts {
            if following.ancestry.len() >= MAX_CACHED {
                following.ancestry.clear();
            }
            following.ancestry.insert(key, answer);
        }
        answer
    }

    /// Time moved to `now`: the fleet is listed again when its directory
    /// changed, rollouts revised or stalled.
    pub fn advance_rollouts(&mut self, now: Stamp, out: &mut Vec<Record>) {
        let Some(following) = &mut self.rollouts else {
            return;
        };
        if following.next_relist.is_none_or(|next| next <= now) {
            following.next_relist = Some(now.plus(following.relist_every));
            if following.fleet.refresh() {
                following.rollouts.fleet_changed(&following.fleet, now, out);
            }
            self.stats.fleet.set(following.fleet.len() as u64);
        }
        following.rollouts.advance(now, &following.fleet, out);
    }

    /// A job closed: the rollouts its runs changed go out now.
    pub fn flush_rollouts(&mut self, now: Stamp, out: &mut Vec<Record>) {
        if let Some(following) = &mut self.rollouts {
            following.rollouts.flush(now, &following.fleet, out);
        }
    }

    /// When [`Correlator::advance_rollouts`] next has something to do.
    pub fn next_rollout_due(&self) -> Option<Stamp> {
        self.rollouts.as_ref()?.rollouts.next_due()
    }

    /// The open rollouts, for a checkpoint.
    pub(super) fn snapshot_rollouts(&self) -> Vec<Open> {
        self.rollouts
            .as_ref()
            .map(|f| f.rollouts.all().cloned().collect())
            .unwrap_or_default()
    }

    pub(super) fn restore_rollouts(&mut self, saved: Vec<Open>) {
        if let Some(following) = &mut self.rollouts {
            following.rollouts.restore(saved);
        }
    }
}

/// `web/nginx.sls` → `web.nginx`, `web/init.sls` → `web`; anything else is not
/// an SLS.
pub fn sls_of(path: &str) -> Option<String> {
    let stem = path.strip_suffix(".sls")?;
    let stem = stem.strip_suffix("/init").unwrap_or(stem);
    (!stem.is_empty() && stem != "top").then(|| stem.replace('/', "."))
}

/// What a state run covers, from its function and arguments (`None`: not a
/// run that applies the state tree: `test=True`, `state.single`, ...).
pub fn coverage_of(fun: &str, args: &[serde_json::Value], test: bool) -> Option<Coverage> {
    if test {
        return None;
    }
    let first = args.iter().find_map(|a| a.as_str());
    match (fun, first) {
        ("state.highstate", _) => Some(Coverage::All),
        ("state.apply", None) => Some(Coverage::All),
        ("state.apply" | "state.sls", Some(mods)) => Some(Coverage::Sls(
            mods.split(',')
                .map(|m| m.trim().to_owned())
                .filter(|m| !m.is_empty())
                .collect(),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sls_names_from_paths() {
        assert_eq!(sls_of("web/nginx.sls").as_deref(), Some("web.nginx"));
        assert_eq!(sls_of("web/init.sls").as_deref(), Some("web"));
        assert_eq!(sls_of("web.sls").as_deref(), Some("web"));
        assert_eq!(sls_of("top.sls"), None);
        assert_eq!(sls_of("files/web.conf"), None);
    }

    #[test]
    fn what_a_run_covers() {
        assert_eq!(
            coverage_of("state.highstate", &[], false),
            Some(Coverage::All)
        );
        assert_eq!(coverage_of("state.apply", &[], false), Some(Coverage::All));
        assert_eq!(
            coverage_of(
                "state.apply",
                &[json!("web, db"), json!({"test": false})],
                false
            ),
            Some(Coverage::Sls(vec!["web".into(), "db".into()]))
        );
        assert_eq!(coverage_of("state.apply", &[], true), None);
        assert_eq!(
            coverage_of("state.single", &[json!("pkg.installed")], false),
            None
        );
        assert_eq!(coverage_of("test.ping", &[], false), None);
    }
}
