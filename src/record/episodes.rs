//! Episodes: records of something that lasts (an external incident, the
//! master under pressure), emitted when it opens, as it changes, and when it
//! closes, each revision under one id.

use serde::Serialize;

use super::Category;
use crate::time::Stamp;

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
