//! Failures across jobs (`saltsight failures`, and what `status` calls
//! failing now): each fingerprint's latest group per job, and who failed it
//! where, minions counted once whatever the jobs.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashMapExt, HashSet};

use serde::Serialize;

use super::rows::{Stored, latest_by};
use super::{HistoryError, Store};
use crate::record::{FailureGroup, IntroducedBy, RecordKind};
use crate::time::Stamp;

/// One fingerprint across jobs (`saltsight failures`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailureLine {
    pub fingerprint: String,
    pub category: String,
    pub sls: String,
    pub state_id: String,
    pub function: String,
    pub comment: String,
    pub minions: u64,
    pub jobs: u64,
    pub first_seen: String,
    pub last_seen: String,
    pub introduced_by: Option<String>,
}

impl FailureLine {
    /// `sls:id function`, or `sls (render)` for a render failure.
    pub fn state(&self) -> String {
        if self.state_id.is_empty() {
            format!("{} (render)", self.sls)
        } else {
            format!("{}:{} {}", self.sls, self.state_id, self.function)
        }
    }
}

/// `id subject` of the commit, the id cut to 10.
pub(super) fn introduced(by: Option<&IntroducedBy>) -> Option<String> {
    by.map(|i| {
        let id = &i.commit.id;
        format!("{} {}", id.get(..10).unwrap_or(id), i.commit.subject)
    })
}

/// Fingerprints failed since `since` (every job's when none), the most
/// minions first: `minions` counts distinct minions, whatever the jobs.
pub fn failures(store: &Store, since: Option<Stamp>) -> Result<Vec<FailureLine>, HistoryError> {
    let seen = failed_since(store, since)?;
    Ok(failure_lines(&seen, |_| true))
}

/// One minion failing one fingerprint in one job.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    pub fingerprint: String,
    pub minion: String,
    pub jid: String,
    pub at: Stamp,
    pub sls: String,
}

/// What the failures since a time are: each fingerprint's latest group per
/// job, and who failed it where.
pub struct FailedSince {
    groups: Vec<Stored<FailureGroup>>,
    pub failed: Vec<Failed>,
}

/// The failures since `since`: the groups, and each (fingerprint, minion,
/// job) from the failures kept per job (state failures), else from the
/// group's named minions (render failures).
pub fn failed_since(store: &Store, since: Option<Stamp>) -> Result<FailedSince, HistoryError> {
    let since = since.map_or(i64::MIN, |s| s.0);
    let rows = store.rows(
        "SELECT kind, record FROM records WHERE kind = 'failure_group' AND at >= ?1 ORDER BY at, id",
        &[&since],
    )?;
    let groups = latest_by(rows.of::<FailureGroup>(RecordKind::FailureGroup), |g| {
        (g.body.jid.clone(), g.body.fingerprint.clone())
    });
    let mut failed: Vec<Failed> = store
        .failures_since(since)?
        .into_iter()
        .filter(|f| f.at.0 >= since)
        .map(|f| Failed {
            fingerprint: f.failed.fingerprint,
            minion: f.minion,
            jid: f.jid,
            at: f.at,
            sls: f.failed.sls,
        })
        .collect();
    let kept: HashSet<(String, String)> = failed
        .iter()
        .map(|f| (f.jid.clone(), f.fingerprint.clone()))
        .collect();
    for g in &groups {
        if kept.contains(&(g.body.jid.clone(), g.body.fingerprint.clone())) {
            continue;
        }
        for minion in &g.body.minions {
            failed.push(Failed {
                fingerprint: g.body.fingerprint.clone(),
                minion: minion.clone(),
                jid: g.body.jid.clone(),
                at: g.at,
                sls: g.body.sls.clone().unwrap_or_default(),
            });
        }
    }
    Ok(FailedSince { groups, failed })
}

/// The lines of the fingerprints whose failures `keep` keeps: distinct
/// minions and jobs counted from them (a group that names fewer minions
/// than it counts gives its count as a floor).
pub fn failure_lines(seen: &FailedSince, keep: impl Fn(&Failed) -> bool) -> Vec<FailureLine> {
    let mut minions: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    let mut jobs: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for f in seen.failed.iter().filter(|f| keep(f)) {
        minions.entry(&f.fingerprint).or_default().insert(&f.minion);
        jobs.entry(&f.fingerprint).or_default().insert(&f.jid);
    }
    let mut by_fingerprint: BTreeMap<String, FailureLine> = BTreeMap::new();
    for g in &seen.groups {
        let Some(still) = jobs.get(g.body.fingerprint.as_str()) else {
            continue;
        };
        if !still.contains(g.body.jid.as_str()) {
            continue;
        }
        let at = g.at.to_string();
        let g = &g.body;
        let line = by_fingerprint
            .entry(g.fingerprint.clone())
            .or_insert_with(|| FailureLine {
                fingerprint: g.fingerprint.clone(),
                category: g.cause.category.to_string(),
                sls: g.sls.clone().unwrap_or_default(),
                state_id: g.state_id.clone().unwrap_or_default(),
                function: g.function.clone().unwrap_or_default(),
                comment: g.comment.clone(),
                minions: 0,
                jobs: 0,
                first_seen: at.clone(),
                last_seen: at.clone(),
                introduced_by: None,
            });
        // Every failure counted at most once per minion: a group naming
        // fewer than it counts is a floor.
        if g.minions.len() < g.count as usize {
            line.minions = line.minions.max(u64::from(g.count));
        }
        line.first_seen = line.first_seen.clone().min(at.clone());
        line.last_seen = line.last_seen.clone().max(at);
        if let Some(i) = introduced(g.correlation.introduced_by.as_ref()) {
            line.introduced_by = Some(i);
        }
    }
    let mut lines: Vec<FailureLine> = by_fingerprint
        .into_values()
        .map(|mut l| {
            let distinct = minions
                .get(l.fingerprint.as_str())
                .map_or(0, |m| m.len() as u64);
            l.minions = l.minions.max(distinct);
            l.jobs = jobs
                .get(l.fingerprint.as_str())
                .map_or(0, |j| j.len() as u64);
            l
        })
        .collect();
    lines.sort_by(|a, b| {
        b.minions
            .cmp(&a.minions)
            .then(b.last_seen.cmp(&a.last_seen))
    });
    lines
}
