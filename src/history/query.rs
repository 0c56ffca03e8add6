//! The answers the query commands give, read from the history: a job's recap,
//! jobs in a time range, failures across jobs, one minion's story. Each is a
//! plain serialisable value (the `--json` form); `cli` draws the tables.
//!
//! Rows are read typed (`rows`); a kind's revisions (a job amended by late
//! returns, a group re-emitted) are collapsed to the latest.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use super::failures::FailureLine;
use super::failures::introduced;
use super::rows::{Revised, Stored, decode, latest_by};
use super::verdicts::Answer;
use super::{HistoryError, Store};
use crate::record::{
    ExternalIncident, FailureGroup, JobCompleted, JobPublished, MasterPressure, RecordKind,
    RenderFailure,
};
use crate::time::Stamp;

/// Jobs a `jobs` listing shows at most.
pub const MAX_JOBS: usize = 10_000;
/// Outstanding minions a recap names at most (it counts them all).
pub const MAX_OUTSTANDING: usize = 100;

/// One minion that did not return, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missing {
    pub minion: String,
    pub reason: String,
    pub evidence: String,
    /// When presence saw it go (or first saw it not connected).
    pub disconnected_at: Option<String>,
    /// Where its connection came from, when it was connected and silent.
    pub address: Option<String>,
    pub streak: u64,
    /// When its streak began (a streak of 2 or more).
    pub missing_since: Option<String>,
}

/// A root cause across the job's minions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub fingerprint: String,
    pub count: u64,
    pub minions: Vec<String>,
    pub sls: String,
    pub state_id: String,
    pub function: String,
    pub category: String,
    pub comment: String,
    /// `id subject` of the commit that introduced it, when known.
    pub introduced_by: Option<String>,
    pub incident: Option<String>,
    /// The last line of the first minion's stderr, when the state ran a command.
    pub stderr: Option<String>,
}

/// A render failure on one minion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Render {
    pub minion: String,
    pub sls: String,
    pub line: Option<u64>,
    pub message: String,
}

/// Everything the history holds of one job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRecap {
    pub jid: String,
    pub fun: String,
    /// Its positional arguments, as published.
    pub args: Vec<String>,
    pub target: String,
    pub user: String,
    pub run_kind: String,
    pub test: bool,
    pub metadata: Option<Value>,
    pub commits: BTreeMap<String, String>,
    pub published_at: Option<String>,
    pub duration_ms: Option<u64>,
    pub expected: u64,
    /// Still open (no `job_completed` yet).
    pub open: bool,
    /// While it is open: the expected minions with no return or verdict
    /// yet, the first [`MAX_OUTSTANDING`] of them (a batch's not yet sent
    /// among them), and how many there are.
    pub outstanding: Vec<String>,
    pub outstanding_count: u64,
    /// A `salt -b` run: its sub-batches and how it ended.
    pub batch: Option<crate::record::BatchInfo>,
    /// Records of the job the history could not take (its writer was
    /// behind past its bound): the answer lacks as many. 0: it is whole.
    pub incomplete: u64,
    pub succeeded: Vec<String>,
    pub failed: Vec<String>,
    pub missing: Vec<Missing>,
    pub groups: Vec<Group>,
    pub renders: Vec<Render>,
    /// The external incidents its failures are part of (their last revision).
    pub incidents: Vec<Stored<ExternalIncident>>,
    /// The master pressure episode it overlapped (its last revision).
    pub pressure: Option<Stored<MasterPressure>>,
    /// States its runs changed (or, `test=True`, would change), all minions.
    pub changed_states: u64,
    /// Of those, the drift its runs put back (or, `test=True`, saw).
    pub drift: Vec<super::drift::DriftLine>,
}

/// One line of `saltsight jobs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobLine {
    pub jid: String,
    pub at: String,
    pub fun: String,
    pub user: String,
    pub target: String,
    pub expected: u64,
    pub returned: u64,
    pub failed: u64,
    pub missing: u64,
    pub open: bool,
}

/// One minion's recent story (`saltsight minion`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinionView {
    pub minion: String,
    /// Its recent jobs, newest first: jid, function, outcome, when.
    pub jobs: Vec<MinionJob>,
    /// Per function, its last successful return.
    pub last_success: BTreeMap<String, String>,
    /// Its latest missing streak (and since when) and the reasons of its
    /// recent misses.
    pub streak: u64,
    pub missing_since: Option<String>,
    pub missing_reasons: BTreeMap<String, u64>,
    /// Its recent root causes: fingerprint → (sls:id, category, count).
    pub failures: Vec<MinionFailure>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinionJob {
    pub jid: String,
    pub fun: String,
    /// `succeeded`, `failed`, or the missing reason.
    pub outcome: String,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinionFailure {
    pub fingerprint: String,
    pub state: String,
    pub category: String,
    pub times: u64,
    pub last: String,
}

/// The job's target: as completed (a batch's is its own, not its first
/// sub-batch's), else as published.
fn target_of(published: Option<&Stored<JobPublished>>, completed: Option<&JobCompleted>) -> String {
    completed
        .map(|c| &c.tgt)
        .filter(|t| !t.is_empty())
        .or(published.map(|p| &p.body.tgt))
        .map(|t| t.join(","))
        .unwrap_or_default()
}

/// The job's positional arguments as the recap shows them (kwargs left out).
fn positional(arg: Option<&Value>) -> Vec<String> {
    arg.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|v| !v.is_object())
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The job `jid` as the history has it (`None`: nothing of it).
pub fn job(store: &Store, jid: &str) -> Result<Option<JobRecap>, HistoryError> {
    let Some(job_row) = store.job_row(jid)? else {
        // A batch's sub-batch under a jid of its own (Salt before 3008.2).
        return match store.batch_of_sub_jid(jid)? {
            Some(batch) if batch != jid => job(store, &batch),
            _ => Ok(None),
        };
    };
    let rows = store.rows(
        "SELECT kind, record FROM records WHERE job = ?1 ORDER BY at, id",
        &[&job_row.id],
    )?;
    let published = rows
        .of::<JobPublished>(RecordKind::JobPublished)
        .into_iter()
        .next();
    let completed = latest_by(rows.of::<JobCompleted>(RecordKind::JobCompleted), |_| ()).pop();
    let mut succeeded = BTreeSet::new();
    let mut failed = BTreeSet::new();
    let mut changed_states = 0;
    let mut missed = Vec::new();
    for v in store.verdicts_of_job(job_row.id)? {
        let v = v.verdict;
        match v.answer {
            Answer::Returned(r) => {
                changed_states += u64::from(r.changed);
                if r.succeeded {
                    failed.remove(&v.minion);
                    succeeded.insert(v.minion);
                } else {
                    failed.insert(v.minion);
                }
            }
            Answer::Missing(m) => missed.push((v.minion, m)),
        }
    }
    let missing: Vec<Missing> = missed
        .into_iter()
        .filter(|(minion, _)| !succeeded.contains(minion) && !failed.contains(minion))
        .map(|(minion, m)| Missing {
            reason: m.reason.to_string(),
            evidence: m.evidence.to_string(),
            disconnected_at: m.disconnected_at.map(|t| t.to_string()),
            address: m.address,
            streak: u64::from(m.streak),
            missing_since: m.missing_since.map(|t| t.to_string()),
            minion: minion.to_string(),
        })
        .collect();
    let groups: Vec<Group> = latest_by(rows.of::<FailureGroup>(RecordKind::FailureGroup), |g| {
        g.body.fingerprint.clone()
    })
    .into_iter()
    .map(|g| g.body)
    .filter_map(|g| {
        Some(Group {
            state_id: g.state_id?,
            introduced_by: introduced(g.correlation.introduced_by.as_ref()),
            stderr: g
                .output
                .stderr
                .as_deref()
                .and_then(|e| e.lines().rev().find(|l| !l.trim().is_empty()))
                .map(str::to_owned),
            fingerprint: g.fingerprint,
            count: u64::from(g.count),
            minions: g.minions,
            sls: g.sls.unwrap_or_default(),
            function: g.function.unwrap_or_default(),
            category: g.cause.category.to_string(),
            comment: g.comment,
            incident: g.incident,
        })
    })
    .collect();
    let renders: Vec<Render> = rows
        .of::<RenderFailure>(RecordKind::RenderFailure)
        .into_iter()
        .map(|r| Render {
            minion: r.body.minion,
            sls: r.body.sls.unwrap_or_default(),
            line: r.body.line.map(u64::from),
            message: r.body.message,
        })
        .collect();
    let incident_ids: BTreeSet<String> = groups
        .iter()
        .filter_map(|g| g.incident.clone())
        .chain(
            store
                .failures_of_job(job_row.id)?
                .into_iter()
                .filter_map(|f| f.failed.incident),
        )
        .collect();
    let incidents =
        episodes::<ExternalIncident>(store, RecordKind::ExternalIncident, &incident_ids)?;
    let pressure_id = completed
        .as_ref()
        .and_then(|c| c.body.during_master_pressure.clone());
    let pressure = episodes::<MasterPressure>(
        store,
        RecordKind::MasterPressure,
        &pressure_id.into_iter().collect(),
    )?
    .pop();
    let p = published.as_ref().map(|p| &p.body);
    let c = completed.as_ref().map(|c| &c.body);
    // Who an open job still waits for: expected, neither returned nor judged.
    let (outstanding, outstanding_count) = match (c, p) {
        (None, Some(p)) => {
            let judged: BTreeSet<&str> = missing.iter().map(|m| m.minion.as_str()).collect();
            let waiting: Vec<&str> = p
                .expected
                .iter()
                .map(|m| m.as_str())
                .filter(|m| !succeeded.contains(*m) && !failed.contains(*m) && !judged.contains(m))
                .collect();
            let answered = (succeeded.len() + failed.len() + missing.len()) as u64;
            let count = u64::from(p.expected_count)
                .saturating_sub(answered)
                .max(waiting.len() as u64);
            let named = waiting
                .into_iter()
                .take(MAX_OUTSTANDING)
                .map(str::to_owned)
                .collect();
            (named, count)
        }
        _ => (Vec::new(), 0),
    };
    let context = p.map(|p| &p.context).or(c.map(|c| &c.context));
    let mut recap = JobRecap {
        jid: jid.to_owned(),
        fun: p
            .map(|p| p.fun.clone())
            .or(c.map(|c| c.fun.clone()))
            .or(job_row.fun)
            .unwrap_or_default(),
        args: positional(p.and_then(|p| p.arg.as_ref())),
        target: target_of(published.as_ref(), c),
        user: p.and_then(|p| p.user.clone()).unwrap_or_default(),
        run_kind: context.map(|x| x.run_kind.to_string()).unwrap_or_default(),
        test: context.is_some_and(|x| x.test),
        metadata: c
            .and_then(|c| c.context.metadata.clone())
            .or_else(|| p.and_then(|p| p.context.metadata.clone())),
        commits: p.map(|p| p.commits.clone()).unwrap_or_default(),
        published_at: published.as_ref().map(|p| p.at.to_string()),
        duration_ms: c.map(|c| c.duration_ms),
        expected: c
            .map(|c| c.expected)
            .or(p.map(|p| p.expected_count))
            .map_or(0, u64::from),
        open: c.is_none(),
        outstanding,
        outstanding_count,
        batch: c
            .and_then(|c| c.batch.as_deref().cloned())
            .or_else(|| p.and_then(|p| p.batch.clone())),
        incomplete: job_row.lost,
        succeeded: succeeded.iter().map(|m| m.to_string()).collect(),
        failed: failed.iter().map(|m| m.to_string()).collect(),
        missing,
        groups,
        renders,
        incidents,
        pressure,
        changed_states,
        drift: super::drift::lines_of(rows.of(RecordKind::Drift)),
    };
    recap.groups.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.fingerprint.cmp(&b.fingerprint))
    });
    Ok(Some(recap))
}

/// The last revision of each episode (`kind`, by id) of `ids`.
fn episodes<T: Revised + DeserializeOwned>(
    store: &Store,
    kind: RecordKind,
    ids: &BTreeSet<String>,
) -> Result<Vec<Stored<T>>, HistoryError> {
    let mut out = Vec::new();
    for id in ids {
        let revisions = store.rows(
            "SELECT kind, record FROM records WHERE kind = ?1 AND fingerprint = ?2",
            &[&kind.as_str(), id],
        )?;
        out.extend(latest_by(revisions.of::<T>(kind), |_| ()).pop());
    }
    Ok(out)
}

/// What `saltsight jobs` filters on.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub since: Option<Stamp>,
    pub failed_only: bool,
    pub fun: Option<crate::config::glob::Glob>,
    pub user: Option<String>,
}

/// Jobs published or completed since `filter.since`, newest first.
pub fn jobs(store: &Store, filter: &JobFilter) -> Result<Vec<JobLine>, HistoryError> {
    let since = filter.since.map_or(i64::MIN, |s| s.0);
    let rows = store.rows(
        "SELECT kind, record FROM records WHERE kind IN ('job_published', 'job_completed') AND at >= ?1 ORDER BY at, id",
        &[&since],
    )?;
    // Each jid in the order it first appears, with its publication and its
    // latest completion.
    let mut order: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut published: HashMap<String, Stored<JobPublished>> = HashMap::new();
    let mut completed: HashMap<String, JobCompleted> = HashMap::new();
    for (kind, json) in &rows.0 {
        let jid = match kind {
            RecordKind::JobPublished => {
                let Some(p) = decode::<JobPublished>(*kind, json) else {
                    continue;
                };
                let jid = p.body.jid.clone();
                published.insert(jid.clone(), p);
                jid
            }
            _ => {
                let Some(c) = decode::<JobCompleted>(*kind, json) else {
                    continue;
                };
                let jid = c.body.jid.clone();
                if completed
                    .get(&jid)
                    .is_none_or(|old| c.body.revision >= old.revision)
                {
                    completed.insert(jid.clone(), c.body);
                }
                jid
            }
        };
        if seen.insert(jid.clone()) {
            order.push(jid);
        }
    }
    let mut lines = Vec::new();
    for jid in order.iter().rev() {
        let (stored, c) = (published.get(jid), completed.get(jid));
        let p = stored.map(|p| &p.body);
        let line = JobLine {
            jid: jid.clone(),
            at: match (stored, c) {
                (Some(p), _) => p.at.to_string(),
                (None, Some(c)) => c.published_at.to_string(),
                (None, None) => continue,
            },
            fun: p.map_or_else(
                || c.map(|c| c.fun.clone()).unwrap_or_default(),
                |p| p.fun.clone(),
            ),
            user: p.and_then(|p| p.user.clone()).unwrap_or_default(),
            target: target_of(stored, c),
            expected: c
                .map(|c| c.expected)
                .or(p.map(|p| p.expected_count))
                .map_or(0, u64::from),
            returned: c.map_or(0, |c| u64::from(c.returned)),
            failed: c.map_or(0, |c| u64::from(c.failed)),
            missing: c.map_or(0, |c| c.missing.values().copied().map(u64::from).sum()),
            open: c.is_none(),
        };
        let keep = (!filter.failed_only || line.failed > 0 || line.missing > 0)
            && filter.fun.as_ref().is_none_or(|g| g.matches(&line.fun))
            && filter.user.as_ref().is_none_or(|u| *u == line.user);
        if keep {
            lines.push(line);
            if lines.len() >= MAX_JOBS {
                break;
            }
        }
    }
    Ok(lines)
}

/// `minion`'s recent jobs (at most `limit`), its last successes and misses.
pub fn minion(
    store: &Store,
    minion: &str,
    limit: usize,
) -> Result<Option<MinionView>, HistoryError> {
    let verdicts = store.verdicts_of_minion(minion)?;
    let failed = store.failures_of_minion(minion)?;
    if verdicts.is_empty() && failed.is_empty() {
        return Ok(None);
    }
    let mut view = MinionView {
        minion: minion.to_owned(),
        jobs: Vec::new(),
        last_success: BTreeMap::new(),
        streak: 0,
        missing_since: None,
        missing_reasons: BTreeMap::new(),
        failures: Vec::new(),
    };
    let mut seen_jobs = BTreeSet::new();
    let mut streak_known = false;
    // Newest first: the streak is the newest verdict's.
    for v in verdicts {
        let at = v.verdict.at.to_string();
        let outcome = match v.verdict.answer {
            Answer::Returned(r) => {
                if r.succeeded {
                    view.last_success.entry(v.fun.clone()).or_insert(at.clone());
                }
                streak_known = true;
                if r.succeeded { "succeeded" } else { "failed" }.to_owned()
            }
            Answer::Missing(m) => {
                let reason = m.reason.to_string();
                *view.missing_reasons.entry(reason.clone()).or_default() += 1;
                if !streak_known {
                    view.streak = u64::from(m.streak);
                    view.missing_since = m.missing_since.map(|t| t.to_string());
                    streak_known = true;
                }
                reason
            }
        };
        if view.jobs.len() < limit && seen_jobs.insert(v.jid.clone()) {
            view.jobs.push(MinionJob {
                jid: v.jid,
                fun: v.fun,
                outcome,
                at,
            });
        }
    }
    let mut failures: BTreeMap<String, MinionFailure> = BTreeMap::new();
    // Newest first: `last` is the first seen.
    for f in failed {
        let at = f.at.to_string();
        let f = f.failed;
        let seen = failures
            .entry(f.fingerprint.clone())
            .or_insert_with(|| MinionFailure {
                state: f.state(),
                category: f.category.to_string(),
                fingerprint: f.fingerprint,
                times: 0,
                last: at,
            });
        seen.times += 1;
    }
    view.failures = failures.into_values().collect();
    view.failures.sort_by(|a, b| b.last.cmp(&a.last));
    Ok(Some(view))
}
