//! The resolved configuration: what the rest of saltsight reads, every value
//! checked and defaulted (`resolve` makes it from the file, the environment, the
//! flags and the Salt master's config).

use std::path::PathBuf;
use std::time::Duration;

use super::defaults::*;
use super::spool::{RawOutput, SpoolConfig};
use crate::bus::Endpoint;

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Problems worth a warning that do not stop saltsight (logged at start).
    pub warnings: Vec<String>,
    /// This master's name in records.
    pub master_id: String,
    /// Where `master_id` came from, for `check-config`.
    pub master_id_origin: String,
    pub bus: BusConfig,
    pub jobs: JobsConfig,
    pub triage: TriageConfig,
    pub correlate: CorrelateConfig,
    pub log: LogConfig,
    pub spool: SpoolConfig,
    pub state: super::state::StateConfig,
    pub incidents: super::incidents::IncidentConfig,
    pub presence: super::presence::PresenceConfig,
    pub pressure: super::pressure::PressureConfig,
    pub rollouts: super::rollouts::RolloutConfig,
    pub drift: super::drift::DriftConfig,
    pub history: super::history::HistoryConfig,
    /// `[[output]]` as written (each output kind checks its own; see `load_with`).
    pub outputs: Vec<RawOutput>,
    pub metrics: super::metrics::MetricsConfig,
    pub redact: super::redact::RedactConfig,
    pub reactor: super::reactor::ReactorConfig,
    /// The saltsight config file read, if any.
    pub file: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BusConfig {
    pub endpoint: Endpoint,
    /// Where the endpoint came from, for `check-config` and logs.
    pub endpoint_origin: String,
    pub max_frame_bytes: usize,
    pub queue_frames: usize,
    pub queue_bytes: usize,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    pub stall_timeout: Duration,
    /// Where frames wait on disk while the queue is full (none: off).
    pub spill: Option<crate::bus::spill::SpillConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobsConfig {
    pub deadlines: Vec<(String, Duration)>,
    pub default_deadline: Duration,
    pub max_jobs: usize,
    pub max_expected: usize,
    pub max_minions: usize,
    pub late_window: Duration,
    pub batch_gap: Duration,
    pub api_users: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriageConfig {
    /// Comments and messages longer than this are cut (the record says how long
    /// they were).
    pub comment_max_bytes: usize,
    /// Minions named in a `failure_group` at most.
    pub example_minions: usize,
    /// Jobs whose groups are kept (open, and closed within the late window).
    pub max_jobs: usize,
    /// Fingerprints whose first sighting is remembered.
    pub max_fingerprints: usize,
    /// Report every state's outcome (for the correlator's per-minion memory).
    pub want_outcomes: bool,
}

impl Default for TriageConfig {
    fn default() -> Self {
        Self {
            comment_max_bytes: DEFAULT_COMMENT_MAX_BYTES,
            example_minions: DEFAULT_EXAMPLE_MINIONS,
            max_jobs: DEFAULT_MAX_JOBS,
            max_fingerprints: DEFAULT_MAX_FINGERPRINTS,
            want_outcomes: false,
        }
    }
}

/// A checkout to watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoSpec {
    /// Its name in records (`states`, `pillar`, or as configured).
    pub name: String,
    /// The directory SLS paths are relative to (a `file_roots` entry), inside
    /// the checkout.
    pub dir: PathBuf,
    /// `HEAD`, or a ref such as `refs/remotes/origin/master` (a gitfs cache).
    pub reference: String,
    /// SLS files live here (a state tree, not a pillar).
    pub states: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorrelateConfig {
    pub repos: Vec<RepoSpec>,
    pub git: PathBuf,
    pub git_timeout: Duration,
    /// (minion, state) pairs remembered for suspect ranges.
    pub max_history: usize,
    /// Commits listed in a range at most.
    pub max_commits: usize,
    /// Jobs whose HEADs are remembered.
    pub max_jobs: usize,
    /// `correlate.pull_request_url`.
    pub pull_request_url: Option<String>,
}

impl CorrelateConfig {
    /// The names of the watched state trees (not pillar).
    pub fn state_trees(&self) -> Vec<String> {
        self.repos
            .iter()
            .filter(|r| r.states)
            .map(|r| r.name.clone())
            .collect()
    }
}

impl Default for CorrelateConfig {
    fn default() -> Self {
        Self {
            repos: Vec::new(),
            git: PathBuf::from(DEFAULT_GIT),
            git_timeout: DEFAULT_GIT_TIMEOUT,
            max_history: DEFAULT_MAX_HISTORY,
            max_commits: DEFAULT_MAX_COMMITS,
            max_jobs: DEFAULT_MAX_JOBS,
            pull_request_url: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    pub level: String,
    pub format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}
