//! One commit's rollout, whole (`saltsight rollout COMMIT`): its latest
//! record, each failed minion with its root cause, and each pending minion
//! with its last state run and why it has not applied the commit.

use std::collections::BTreeSet;

use serde::Serialize;

use super::rows::JobVerdict;
use super::rows::latest_by;
use super::verdicts::{Answer, FailedState, Returned};
use super::{HistoryError, Store};
use crate::correlate::applied::coverage_of;
use crate::correlate::rollout::Coverage;
use crate::record::{JobPublished, RecordKind, Rollout};
use crate::time::Stamp;

/// Which rollout: the newest (`HEAD`), or a commit by a unique prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted<'a> {
    Head,
    Prefix(&'a str),
}

impl<'a> Wanted<'a> {
    pub fn parse(text: &'a str) -> Wanted<'a> {
        if text.eq_ignore_ascii_case("HEAD") {
            Wanted::Head
        } else {
            Wanted::Prefix(text)
        }
    }
}

/// A failed minion and the root cause of its failing run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedMinion {
    pub minion: String,
    pub jid: String,
    /// `sls:id` of the root cause, when triage found one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

/// Why a minion has not applied the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingWhy {
    /// No state run since the commit was seen.
    NeverRanSince,
    /// Only `test=True` runs since: they change nothing.
    RanWithTest,
    /// Runs of SLS the commit did not change.
    RanOtherSls,
    /// Runs of jobs published under another commit (before the HEAD moved).
    RanUnderAnotherCommit,
    /// Targeted, but it did not return.
    MissingFromJobs,
    /// Targeted by a job under the commit that has not closed yet.
    AwaitingReturn,
    /// Its run covering the change is in the history, and the rollout's
    /// next revision (at most a second after the job closed) counts it.
    RanNotCountedYet,
}

impl std::fmt::Display for PendingWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PendingWhy::NeverRanSince => "no state run since",
            PendingWhy::RanWithTest => "ran only with test=True",
            PendingWhy::RanOtherSls => "ran only other SLS",
            PendingWhy::RanUnderAnotherCommit => "ran only jobs published under another commit",
            PendingWhy::MissingFromJobs => "did not return",
            PendingWhy::AwaitingReturn => "its return to a running job awaited",
            PendingWhy::RanNotCountedYet => "ran it; the rollout's next count has it",
        })
    }
}

/// A minion that has not applied the commit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingMinion {
    pub minion: String,
    pub why: PendingWhy,
    /// What backs the reason: the SLS run, or the missing verdict's reason.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The job that says so (the newest one since the commit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jid: Option<String>,
    /// The minion's last state run, whenever it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_state_run: Option<Stamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RolloutView {
    #[serde(flatten)]
    pub rollout: Rollout,
    pub failed_minions: Vec<FailedMinion>,
    pub pending_minions: Vec<PendingMinion>,
}

/// What was asked for matched several commits, or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found<T> {
    One(T),
    None,
    Several(Vec<String>),
}

/// Functions that apply SLS (the rollout counts their runs).
const STATE_RUNS: [&str; 4] = [
    "state.apply",
    "state.highstate",
    "state.sls",
    "state.sls_id",
];

/// The SLS a state job ran, by the rule the rollout itself applies
/// (`correlate::applied::coverage_of`; `highstate` when it covers the whole
/// tree).
fn sls_of(published: &JobPublished) -> Vec<String> {
    let args = published
        .arg
        .as_ref()
        .and_then(|a| a.as_array())
        .map_or(&[][..], Vec::as_slice);
    match coverage_of(&published.fun, args, false) {
        Some(Coverage::All) => vec!["highstate".into()],
        Some(Coverage::Sls(names)) => names,
        None => Vec::new(),
    }
}

/// Whether a job's run covers the commit's change, by the rule the rollout
/// itself applies (`correlate::rollout::Open::covered_by`).
fn covers_change(published: &JobPublished, rollout: &Rollout) -> bool {
    let args = published
        .arg
        .as_ref()
        .and_then(|a| a.as_array())
        .map_or(&[][..], Vec::as_slice);
    coverage_of(&published.fun, args, false).is_some_and(|c| c.covers(&rollout.changed_sls))
}

/// The rollout asked for, with its failed and pending minions explained.
pub fn rollout(
    store: &Store,
    wanted: Wanted<'_>,
    repo: Option<&str>,
) -> Result<Found<RolloutView>, HistoryError> {
    let rows = store.rows(
        "SELECT kind, record FROM records WHERE kind = 'rollout' ORDER BY at, rowid",
        &[],
    )?;
    let latest: Vec<Rollout> = latest_by(rows.of::<Rollout>(RecordKind::Rollout), |r| {
        (r.body.repo.clone(), r.body.commit.clone())
    })
    .into_iter()
    .map(|r| r.body)
    .filter(|r| repo.is_none_or(|want| r.repo == want))
    .collect();
    let mut matching: Vec<Rollout> = match wanted {
        Wanted::Head => latest
            .into_iter()
            .max_by_key(|r| r.seen_at)
            .into_iter()
            .collect(),
        Wanted::Prefix(prefix) => {
            let prefix = prefix.to_ascii_lowercase();
            latest
                .into_iter()
                .filter(|r| r.commit.starts_with(&prefix))
                .collect()
        }
    };
    let rollout = match matching.len() {
        0 => return Ok(Found::None),
        1 => matching.remove(0),
        _ => {
            return Ok(Found::Several(
                matching
                    .iter()
                    .map(|r| format!("{} ({}: {})", r.commit, r.repo, r.subject))
                    .collect(),
            ));
        }
    };
    let failed_minions = rollout
        .sample_failed
        .iter()
        .map(|f| failed(store, &f.minion, &f.jid, f.fingerprint.as_deref()))
        .collect::<Result<_, _>>()?;
    let pending_minions = rollout
        .sample_pending
        .iter()
        .map(|minion| pending(store, minion, &rollout))
        .collect::<Result<_, _>>()?;
    Ok(Found::One(RolloutView {
        rollout,
        failed_minions,
        pending_minions,
    }))
}

fn failed(
    store: &Store,
    minion: &str,
    jid: &str,
    fingerprint: Option<&str>,
) -> Result<FailedMinion, HistoryError> {
    let failures = match store.job_row(jid)? {
        Some(job) => store.failures_of(job.id, minion)?,
        None => Vec::new(),
    };
    let cause = failures
        .iter()
        .find(|f| Some(f.failed.fingerprint.as_str()) == fingerprint)
        .or(failures.first())
        .map(|f| &f.failed);
    Ok(FailedMinion {
        minion: minion.to_owned(),
        jid: jid.to_owned(),
        state: cause.map(FailedState::state),
        category: cause.map(|f| f.category.to_string()),
        comment: cause.map(|f| f.comment.clone()),
        fingerprint: fingerprint
            .map(str::to_owned)
            .or(cause.map(|f| f.fingerprint.clone())),
    })
}

/// The published record of job `jid`, when the history has it.
fn published(store: &Store, jid: &str) -> Result<Option<JobPublished>, HistoryError> {
    let rows = store.rows(
        "SELECT kind, record FROM records WHERE job = (SELECT id FROM jobs WHERE jid = ?1) AND kind = 'job_published'",
        &[&jid],
    )?;
    Ok(rows
        .of::<JobPublished>(RecordKind::JobPublished)
        .pop()
        .map(|p| p.body))
}

/// Verdicts read back per pending minion, at most (newest first).
const MAX_VERDICTS: usize = 50;

/// Why `minion` has not applied `rollout`'s commit, from its returns and
/// missing verdicts since the commit was seen (or of jobs published under it:
/// the HEAD move is seen at the publish of the job that follows it).
fn pending(store: &Store, minion: &str, rollout: &Rollout) -> Result<PendingMinion, HistoryError> {
    let verdicts = store.verdicts_of_minion(minion)?;
    let state_runs: Vec<(&JobVerdict, &Returned)> = verdicts
        .iter()
        .filter_map(|v| match &v.verdict.answer {
            Answer::Returned(r) if STATE_RUNS.contains(&v.fun.as_str()) => Some((v, r)),
            _ => None,
        })
        .collect();
    let last_state_run = state_runs.iter().map(|(v, _)| v.verdict.at).max();
    let under_commit = |p: &Option<JobPublished>| {
        p.as_ref()
            .is_some_and(|p| p.commits.get(&rollout.repo) == Some(&rollout.commit))
    };
    // Each run with its job's published record, read once.
    let mut since = Vec::new();
    for (run, returned) in state_runs.iter().take(MAX_VERDICTS) {
        let job = published(store, &run.jid)?;
        if run.verdict.at >= rollout.seen_at || under_commit(&job) {
            since.push(((run, returned), job));
        }
    }
    let mut view = PendingMinion {
        minion: minion.to_owned(),
        why: PendingWhy::NeverRanSince,
        detail: String::new(),
        jid: None,
        last_state_run,
    };
    if let Some(((newest, _), _)) = since.iter().max_by_key(|((r, _), _)| r.verdict.at) {
        view.jid = Some(newest.jid.clone());
        if since.iter().all(|((_, r), _)| r.test) {
            view.why = PendingWhy::RanWithTest;
            return Ok(view);
        }
        let (mut ran, mut other_commits) = (BTreeSet::new(), BTreeSet::new());
        for ((run, _), job) in since.iter().filter(|((_, r), _)| !r.test) {
            if let Some(p) = job {
                match p.commits.get(&rollout.repo) {
                    Some(head) if *head != rollout.commit => {
                        other_commits.insert(head.get(..10).unwrap_or(head).to_owned());
                    }
                    // What the run covered decides, not its name: a
                    // highstate covers every SLS of the minion's top file.
                    _ if covers_change(p, rollout) => {
                        view.why = PendingWhy::RanNotCountedYet;
                        view.jid = Some(run.jid.clone());
                        view.detail = p.fun.clone();
                        return Ok(view);
                    }
                    _ => ran.extend(sls_of(p)),
                }
            }
        }
        let (why, named) = if ran.is_empty() && !other_commits.is_empty() {
            (PendingWhy::RanUnderAnotherCommit, other_commits)
        } else {
            (PendingWhy::RanOtherSls, ran)
        };
        view.why = why;
        view.detail = named.into_iter().collect::<Vec<_>>().join(", ");
        return Ok(view);
    }
    let missed = verdicts.iter().filter_map(|v| match &v.verdict.answer {
        Answer::Missing(m) => Some((v, m)),
        Answer::Returned(_) => None,
    });
    for (v, m) in missed.take(MAX_VERDICTS) {
        if v.verdict.at >= rollout.seen_at || under_commit(&published(store, &v.jid)?) {
            view.why = PendingWhy::MissingFromJobs;
            view.jid = Some(v.jid.clone());
            view.detail = m.reason.to_string();
            return Ok(view);
        }
    }
    // A job under the commit that targets it and has not closed.
    let jobs = store.rows(
        "SELECT kind, record FROM records WHERE kind = 'job_published' AND at >= ?1 ORDER BY at DESC, rowid DESC LIMIT 50",
        &[&rollout.seen_at.0.saturating_sub(60_000_000)],
    )?;
    for job in jobs.of::<JobPublished>(RecordKind::JobPublished) {
        let job = job.body;
        let targets = job.expected.iter().any(|m| m == minion);
        if !targets || job.commits.get(&rollout.repo) != Some(&rollout.commit) {
            continue;
        }
        let closed = store.rows(
            "SELECT kind, record FROM records WHERE job = (SELECT id FROM jobs WHERE jid = ?1) AND kind = 'job_completed' LIMIT 1",
            &[&job.jid],
        )?;
        if closed.is_empty() {
            view.why = PendingWhy::AwaitingReturn;
            view.detail = format!("{} until {}", job.fun, job.deadline);
            view.jid = Some(job.jid);
            break;
        }
    }
    Ok(view)
}
