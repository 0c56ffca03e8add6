//! What is wrong now, from the history (`saltsight status`, `incidents`):
//! open external incidents, an open master pressure episode, rollouts pending
//! or stalled, failures of the last hour, minions missing jobs in a row, drift
//! a test=True run saw, bus gaps; and the history's own age.

use std::collections::BTreeMap;

use serde::Serialize;

use super::failures::{Failed, FailureLine, failed_since, failure_lines};
use super::rows::JobVerdict;
use super::rows::{Revised, latest_by};
use super::verdicts::Answer;
use super::{HistoryError, Store};
use crate::correlate::applied::coverage_of;
use crate::correlate::rollout::Coverage;
use crate::record::{
    ChangeKind, Drift, EpisodeStatus, ExternalIncident, MasterPressure, RecordKind, Rollout,
    RolloutStatus,
};
use crate::time::Stamp;

/// Minions listed as missing repeatedly, at most.
const MAX_MINIONS: usize = 200;
const HOUR: i64 = 3_600_000_000;
const DAY: i64 = 24 * HOUR;

impl Revised for Rollout {
    fn revision(&self) -> u32 {
        self.revision
    }
}

/// A minion that missed jobs in a row, and has not returned since.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Absent {
    pub minion: String,
    pub streak: u32,
    pub since: Option<String>,
    pub reason: String,
    pub evidence: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub now: String,
    pub incidents: Vec<ExternalIncident>,
    pub pressure: Option<MasterPressure>,
    /// The newest commit of each state tree still rolling out, stalled or not.
    pub rollouts: Vec<Rollout>,
    /// Failures of the last hour still wrong now, by fingerprint (as
    /// `saltsight failures`): a minion that has since run the failing SLS
    /// successfully (applied it, or a highstate) no longer counts.
    pub failing: Vec<FailureLine>,
    /// Since when failures are looked at.
    pub failing_since: String,
    pub absent: Vec<Absent>,
    /// `(minion, sls:id)` a test=True run saw drifted in the last day.
    pub drift_detected: Vec<(String, String)>,
    /// Bus gaps in the last hour.
    pub gaps: u64,
    /// The history: records, bytes, the oldest and the newest record's time.
    pub records: u64,
    pub bytes: u64,
    pub oldest: Option<String>,
    pub newest: Option<String>,
}

impl Status {
    /// What counts as wrong (a rollout in progress, the history's figures
    /// do not), each said in a few words.
    pub fn wrong(&self) -> Vec<String> {
        let mut wrong = Vec::new();
        let mut say = |n: usize, what: &str| {
            if n > 0 {
                wrong.push(format!("{n} {what}"));
            }
        };
        say(self.incidents.len(), "external incident(s) open");
        say(
            usize::from(self.pressure.is_some()),
            "master pressure episode open",
        );
        say(
            self.rollouts
                .iter()
                .filter(|r| r.status == RolloutStatus::Stalled)
                .count(),
            "rollout(s) stalled",
        );
        say(
            self.failing.len(),
            "failure(s) of the last hour not fixed since",
        );
        say(self.absent.len(), "minion(s) missing jobs in a row");
        say(
            self.drift_detected.len(),
            "drifted state(s) nothing put back",
        );
        say(
            usize::try_from(self.gaps).unwrap_or(usize::MAX),
            "bus gap(s) in the last hour",
        );
        wrong
    }
}

/// External incidents seen since `since`, each at its latest revision, newest first.
pub fn incidents(store: &Store, since: Stamp) -> Result<Vec<ExternalIncident>, HistoryError> {
    let rows = store.rows(
        "SELECT kind, record FROM records WHERE kind = 'external_incident' AND at >= ?1 ORDER BY at, rowid",
        &[&since.0],
    )?;
    let mut latest: Vec<ExternalIncident> = latest_by(
        rows.of::<ExternalIncident>(RecordKind::ExternalIncident),
        |i| i.body.incident.clone(),
    )
    .into_iter()
    .map(|i| i.body)
    .collect();
    latest.sort_by_key(|i| std::cmp::Reverse(i.last_seen));
    Ok(latest)
}

/// What is wrong at `now`.
pub fn status(store: &Store, now: Stamp) -> Result<Status, HistoryError> {
    let day_ago = now.0 - DAY;
    let hour_ago = now.0 - HOUR;
    let open_incidents: Vec<ExternalIncident> = incidents(store, Stamp(now.0 - 7 * DAY))?
        .into_iter()
        .filter(|i| i.status == EpisodeStatus::Open)
        .collect();
    let pressure = {
        let rows = store.rows(
            "SELECT kind, record FROM records WHERE kind = 'master_pressure' AND at >= ?1 ORDER BY at, rowid",
            &[&day_ago],
        )?;
        latest_by(rows.of::<MasterPressure>(RecordKind::MasterPressure), |p| {
            p.body.pressure.clone()
        })
        .into_iter()
        .map(|p| p.body)
        .find(|p| p.status == EpisodeStatus::Open)
    };
    let rollouts = {
        let rows = store.rows(
            "SELECT kind, record FROM records WHERE kind = 'rollout' AND at >= ?1 ORDER BY at, rowid",
            &[&(now.0 - 30 * DAY)],
        )?;
        let latest = latest_by(rows.of::<Rollout>(RecordKind::Rollout), |r| {
            (r.body.repo.clone(), r.body.commit.clone())
        });
        // The newest commit of each tree.
        let mut newest: BTreeMap<String, Rollout> = BTreeMap::new();
        for r in latest {
            let keep = newest
                .get(&r.body.repo)
                .is_none_or(|old| r.body.seen_at >= old.seen_at);
            if keep {
                newest.insert(r.body.repo.clone(), r.body);
            }
        }
        newest
            .into_values()
            .filter(|r| matches!(r.status, RolloutStatus::InProgress | RolloutStatus::Stalled))
            .collect()
    };
    let verdicts = store.verdicts_since(day_ago)?;
    let seen = failed_since(store, Some(Stamp(hour_ago)))?;
    let fixed = Fixes::since(store, hour_ago, &verdicts)?;
    let failing = failure_lines(&seen, |f| !fixed.fixed(f));
    let absent = absent(&verdicts);
    let drift_detected = detected_drift(store, day_ago, &verdicts)?;
    let gaps = store
        .rows(
            "SELECT kind, record FROM records WHERE kind = 'bus_gap' AND at >= ?1",
            &[&hour_ago],
        )?
        .len() as u64;
    let figures = store.figures()?;
    let newest = store
        .rows(
            "SELECT kind, record FROM records ORDER BY id DESC LIMIT 1",
            &[],
        )?
        .at_of_first()
        .max(store.newest_verdict()?);
    Ok(Status {
        now: now.to_string(),
        incidents: open_incidents,
        pressure,
        rollouts,
        failing,
        failing_since: Stamp(hour_ago).to_string(),
        absent,
        drift_detected,
        gaps,
        records: figures.rows,
        bytes: figures.bytes,
        oldest: figures.oldest.map(|t| t.to_string()),
        newest: newest.map(|t| t.to_string()),
    })
}

/// The successful state runs since a time, by minion: what fixed a failure.
struct Fixes {
    /// minion → (when, what the run covered).
    runs: foldhash::HashMap<String, Vec<(Stamp, Coverage)>>,
}

impl Fixes {
    fn since(store: &Store, since: i64, verdicts: &[JobVerdict]) -> Result<Fixes, HistoryError> {
        let rows = store.rows(
            "SELECT kind, record FROM records WHERE kind = 'job_published' AND at >= ?1",
            &[&since],
        )?;
        let covers: foldhash::HashMap<String, Coverage> = rows
            .of::<crate::record::JobPublished>(RecordKind::JobPublished)
            .into_iter()
            .filter_map(|p| {
                let p = p.body;
                let args = p
                    .arg
                    .as_ref()
                    .and_then(|a| a.as_array())
                    .map_or(&[][..], Vec::as_slice);
                Some((p.jid.clone(), coverage_of(&p.fun, args, false)?))
            })
            .collect();
        let mut runs: foldhash::HashMap<String, Vec<(Stamp, Coverage)>> = Default::default();
        for v in verdicts {
            let Answer::Returned(r) = &v.verdict.answer else {
                continue;
            };
            if !r.succeeded || r.test || !r.state_run || v.verdict.at.0 < since {
                continue;
            }
            if let Some(sls) = covers.get(&v.jid) {
                runs.entry(v.verdict.minion.to_string())
                    .or_default()
                    .push((v.verdict.at, sls.clone()));
            }
        }
        Ok(Fixes { runs })
    }

    /// The minion has run the failing SLS successfully since.
    fn fixed(&self, f: &Failed) -> bool {
        self.runs.get(&f.minion).is_some_and(|runs| {
            runs.iter()
                .any(|(at, covered)| *at > f.at && covered.covers(std::slice::from_ref(&f.sls)))
        })
    }
}

/// Minions whose latest verdict of the last day is a miss in a streak of 2
/// or more, with no return since.
fn absent(verdicts: &[JobVerdict]) -> Vec<Absent> {
    // Each minion's latest verdict of the day, in the order the jobs came.
    let mut last: BTreeMap<&str, &JobVerdict> = BTreeMap::new();
    for v in verdicts {
        let newer = last
            .get(&*v.verdict.minion)
            .is_none_or(|old| v.verdict.at >= old.verdict.at);
        if newer {
            last.insert(&v.verdict.minion, v);
        }
    }
    let mut absent: Vec<Absent> = last
        .into_iter()
        .filter_map(|(minion, v)| match &v.verdict.answer {
            Answer::Missing(m) if m.streak >= 2 => Some(Absent {
                minion: minion.to_owned(),
                streak: m.streak,
                since: m.missing_since.map(|t| t.to_string()),
                reason: m.reason.to_string(),
                evidence: m.evidence.to_string(),
            }),
            _ => None,
        })
        .collect();
    absent.sort_by(|a, b| b.streak.cmp(&a.streak).then(a.minion.cmp(&b.minion)));
    absent.truncate(MAX_MINIONS);
    absent
}

/// Each (minion, state) whose last drift of the day a test=True run saw, and
/// that no state run of the minion has applied since (a highstate after it
/// puts it back, or changes it by a commit).
fn detected_drift(
    store: &Store,
    since: i64,
    verdicts: &[JobVerdict],
) -> Result<Vec<(String, String)>, HistoryError> {
    let rows = store.rows(
        "SELECT kind, record FROM records WHERE kind = 'drift' AND at >= ?1 ORDER BY at, id",
        &[&since],
    )?;
    let mut last: BTreeMap<(String, String), (ChangeKind, Stamp)> = BTreeMap::new();
    for d in rows.of::<Drift>(RecordKind::Drift) {
        for s in d.body.states {
            let state = format!("{}:{}", s.sls, s.state_id);
            last.insert((d.body.minion.clone(), state), (s.change, d.at));
        }
    }
    // Each minion's last state run that applied (not test=True).
    let mut applied: BTreeMap<&str, Stamp> = BTreeMap::new();
    for v in verdicts {
        if let Answer::Returned(r) = &v.verdict.answer
            && !r.test
            && r.state_run
            && v.fun.starts_with("state.")
        {
            let at = applied.entry(&v.verdict.minion).or_insert(v.verdict.at);
            *at = (*at).max(v.verdict.at);
        }
    }
    let mut detected = Vec::new();
    for ((minion, state), (change, at)) in last {
        if change != ChangeKind::Detected {
            continue;
        }
        if applied.get(minion.as_str()).is_some_and(|a| *a > at) {
            continue;
        }
        detected.push((minion, state));
        if detected.len() >= MAX_MINIONS {
            break;
        }
    }
    Ok(detected)
}

/// Each commit's rollout seen since `since` (of one repo), at its latest
/// revision, the newest commit first.
pub fn rollouts(
    store: &Store,
    since: Stamp,
    repo: Option<&str>,
) -> Result<Vec<Rollout>, HistoryError> {
    let rows = store.rows(
        "SELECT kind, record FROM records WHERE kind = 'rollout' AND at >= ?1 ORDER BY at, rowid",
        &[&since.0],
    )?;
    let mut latest: Vec<Rollout> = latest_by(rows.of::<Rollout>(RecordKind::Rollout), |r| {
        (r.body.repo.clone(), r.body.commit.clone())
    })
    .into_iter()
    .map(|r| r.body)
    .filter(|r| repo.is_none_or(|want| r.repo == want))
    .collect();
    latest.sort_by_key(|r| std::cmp::Reverse(r.seen_at));
    Ok(latest)
}
