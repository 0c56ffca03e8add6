//! The tracker's settings (from `[jobs]` in the config) and its counters.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct TrackerConfig {
    /// Per-function deadlines as (glob, duration); the longest matching glob wins.
    pub deadlines: Vec<(String, Duration)>,
    pub default_deadline: Duration,
    /// Added to a job's own `timeout` kwarg when that is longer than its deadline.
    pub timeout_grace: Duration,
    pub max_jobs: usize,
    pub max_expected: usize,
    /// How long a closed job with missing minions waits for late returns.
    pub late_window: Duration,
    pub restart_grace: Duration,
    /// Users whose jobs came through salt-api (`run_kind: api`).
    pub api_users: Vec<String>,
}

impl From<&crate::config::JobsConfig> for TrackerConfig {
    fn from(c: &crate::config::JobsConfig) -> Self {
        Self {
            deadlines: c.deadlines.clone(),
            default_deadline: c.default_deadline,
            max_jobs: c.max_jobs,
            max_expected: c.max_expected,
            late_window: c.late_window,
            api_users: c.api_users.clone(),
            ..Self::default()
        }
    }
}

impl Default for TrackerConfig {
    fn default() -> Self {
        Self {
            deadlines: Vec::new(),
            default_deadline: Duration::from_secs(600),
            timeout_grace: Duration::from_secs(10),
            max_jobs: 10_000,
            max_expected: 1_000_000,
            late_window: Duration::from_secs(3600),
            restart_grace: Duration::from_secs(60),
            api_users: Vec::new(),
        }
    }
}

/// Counters for the exit summary and (later) metrics.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TrackerStats {
    pub jobs_published: u64,
    pub internal_jobs: u64,
    pub returns: u64,
    pub unknown_job_returns: u64,
    pub duplicate_returns: u64,
    pub evicted_jobs: u64,
    pub restarts_ignored_after_gap: u64,
}
