//! Episodes: records of something that lasts (an external incident, the
//! master under pressure), emitted when it opens, as it changes, and when it
//! closes, each revision under one id.

use serde::Serialize;

use super::Category;
use crate::time::Stamp;

/// An episode's life: its id, when it opened, and when it closed (none
/// while it is open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeWindow {
    pub id: String,
    pub opened: Stamp,
    pub closed: Option<Stamp>,
}

/// The episode among `windows` whose life overlaps `from..=to`, if any: the
/// open one first, then the latest closed one.
pub fn episode_during(windows: &[EpisodeWindow], from: Stamp, to: Stamp) -> Option<&str> {
    let open = windows
        .iter()
        .find(|w| w.closed.is_none() && w.opened <= to);
    open.or_else(|| {
        windows
            .iter()
            .rev()
            .find(|w| w.opened <= to && w.closed.is_some_and(|c| c >= from))
    })
    .map(|w| w.id.as_str())
}

crate::label_set! {
    /// Whether an incident or a pressure episode is still going on.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum EpisodeStatus {
        Open = "open",
        Closed = "closed",
    }
}

crate::label_set! {
    /// Why an external incident closed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum IncidentEnd {
        /// No new failure against its target for `incidents.quiet`.
        Quiet = "quiet",
        /// A state that had failed against its target succeeded.
        Recovered = "recovered",
        /// saltsight forgot it to respect `incidents.max_targets`.
        Evicted = "evicted",
    }
}

/// One external target (a host, a mirror, a URL's host) failing on several
/// minions across jobs: one cause outside the state tree, not N findings.
/// Emitted when it opens, again (a new `revision`) as it grows, and when it
/// closes. id key: incident, revision.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ExternalIncident {
    /// Stable for the incident's life; carried by its `state_failure` and
    /// `failure_group` records.
    pub incident: String,
    /// The host (`name` or `name:port`) the failures name.
    pub target: String,
    /// The category of its first failure (`network.dns`, `dependency.package`...).
    pub category: Category,
    pub status: EpisodeStatus,
    pub revision: u32,
    /// Distinct minions and jobs with a failure against the target since it
    /// opened (the window before included).
    pub minions: u32,
    pub jobs: u32,
    pub failures: u64,
    /// The first minions, jobs and states hit (`sls:id`), at most
    /// `incidents.max_samples` each.
    pub sample_minions: Vec<String>,
    pub sample_jobs: Vec<String>,
    pub states: Vec<String>,
    pub first_seen: Stamp,
    pub last_seen: Stamp,
    pub opened_at: Stamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_at: Option<Stamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<IncidentEnd>,
}

crate::label_set! {
    /// What says the master is saturated.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum PressureSignal {
        /// The master's request workers (MWorker) busy near a whole core each.
        WorkerCpu = "worker_cpu",
        /// Events reach the bus late: receipt minus `_stamp`, p99.
        BusLag = "bus_lag",
        /// Salt's own `salt/stats`: mean time of `_return` / `_pillar` requests.
        RequestTime = "request_time",
    }
}

/// One signal's figure when a pressure episode opened (or at its worst).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct SignalFigure {
    pub signal: PressureSignal,
    /// In the signal's unit: a share of a core (worker_cpu), seconds (bus_lag,
    /// request_time).
    pub value: f64,
    pub threshold: f64,
    /// What it was measured on: `MWorker` processes, a command name...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The master itself was saturated: its workers busy, the bus late, or its
/// requests slow. Missing-return verdicts and jobs given while it lasted carry
/// its id (`during_master_pressure`). id key: pressure, revision.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct MasterPressure {
    pub pressure: String,
    pub status: EpisodeStatus,
    pub revision: u32,
    /// The signals over their thresholds when it opened.
    pub signals: Vec<SignalFigure>,
    /// Each signal's worst figure while it lasted.
    pub peaks: Vec<SignalFigure>,
    pub opened_at: Stamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_at: Option<Stamp>,
    /// Missing-return verdicts given while it lasted.
    pub missing_verdicts: u32,
}

crate::label_set! {
    /// Where a rollout stands.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum RolloutStatus {
        /// Minions are still to apply it.
        InProgress = "in_progress",
        /// Every minion of the fleet applied it.
        Complete = "complete",
        /// A newer HEAD moved while minions were pending (how many: `pending`).
        Superseded = "superseded",
        /// Minions pending and no progress for `rollouts.stall_after`; it may
        /// still complete.
        Stalled = "stalled",
    }
}

/// How long a rollout took to reach half, 95% and all of the fleet, in
/// seconds, from one origin (the commit's time, or when saltsight saw the
/// HEAD move there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Delays {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p95_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p100_s: Option<f64>,
}

/// A minion on which a rollout's commit failed, with its root cause.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RolloutFailure {
    pub minion: String,
    pub jid: String,
    /// The first root cause's fingerprint (its `failure_group`), when triage
    /// found one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

/// One commit of a watched state tree, from the HEAD moving there to every
/// minion having applied it (a successful, non-test highstate or state.apply
/// of the SLS it changed, under it or a descendant). Re-emitted with a new
/// revision as minions apply it. id key: repo, commit, revision.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Rollout {
    pub repo: String,
    pub commit: String,
    pub subject: String,
    /// The pull or merge request the commit's message names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<super::PullRequest>,
    /// The commit's own time (committer date).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub committed_at: Option<Stamp>,
    /// When saltsight saw the HEAD there (a move, or its first read).
    pub seen_at: Stamp,
    /// `seen_at` is a move (false: the HEAD was already there when saltsight
    /// first read it, so delays from it say little).
    pub seen_move: bool,
    pub status: RolloutStatus,
    pub revision: u32,
    /// The fleet's size, and where each of its minions stands.
    pub known: u32,
    pub applied: u32,
    pub failed: u32,
    pub pending: u32,
    /// The SLS the commit changed (`web.nginx`), at most 50: a state.apply of
    /// one of them counts.
    pub changed_sls: Vec<String>,
    pub sample_failed: Vec<RolloutFailure>,
    pub sample_pending: Vec<String>,
    /// When half, 95% and all of the fleet had applied it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reached_50: Option<Stamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reached_95: Option<Stamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reached_100: Option<Stamp>,
    /// Release delay: from the commit's time, and from `seen_at`.
    pub delay_from_commit: Delays,
    pub delay_from_seen: Delays,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    pub last_progress: Stamp,
}
