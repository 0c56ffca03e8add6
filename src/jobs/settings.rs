//! The tracker's settings (from `[jobs]` in the config) and its counters.

use std::time::Duration;

use crate::config::defaults;

#[derive(Debug, Clone)]
pub struct TrackerConfig {
    /// Per-function deadlines as (glob, duration); the longest matching glob wins.
    pub deadlines: Vec<(String, Duration)>,
    pub default_deadline: Duration,
    /// Added to a job's own `timeout` kwarg when that is longer than its deadline.
    pub timeout_grace: Duration,
    pub max_jobs: usize,
    pub max_expected: usize,
    /// Minions followed one by one (missing streaks), at most.
    pub max_minions: usize,
    /// How long a closed job with missing minions waits for late returns.
    pub late_window: Duration,
    pub restart_grace: Duration,
    /// Salt before 3008.2: how long after a sub-batch's returns the next
    /// sub-batch of a batch may come.
    pub batch_gap: Duration,
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
            max_minions: c.max_minions,
            late_window: c.late_window,
            batch_gap: c.batch_gap,
            api_users: c.api_users.clone(),
            ..Self::default()
        }
    }
}

impl Default for TrackerConfig {
    fn default() -> Self {
        Self {
            deadlines: Vec::new(),
            default_deadline: defaults::DEFAULT_DEADLINE,
            timeout_grace: defaults::DEFAULT_TIMEOUT_GRACE,
            max_jobs: defaults::DEFAULT_MAX_JOBS,
            max_expected: defaults::DEFAULT_MAX_EXPECTED,
            max_minions: defaults::DEFAULT_MAX_MINIONS,
            late_window: defaults::DEFAULT_LATE_WINDOW,
            restart_grace: defaults::DEFAULT_RESTART_GRACE,
            batch_gap: defaults::DEFAULT_BATCH_GAP,
            api_users: Vec::new(),
        }
    }
}

crate::counts! {
    /// The tracker's own counts (docs/metrics.md), read at scrape.
    pub struct TrackerStats {
        internal jobs_published;
        counter internal_jobs = "saltsight_internal_jobs",
            "Jobs the salt CLI runs on its own behalf (saltutil.find_job...): evidence, not user jobs";
        internal returns;
        counter unknown_job_returns = "saltsight_unknown_job_returns",
            "Returns to jobs whose publication was not seen (started before saltsight, in a gap, or evicted); scheduled and salt-call runs are not these";
        counter scheduled_returns = "saltsight_scheduled_returns",
            "Returns of runs a minion's scheduler started (no new event): each a job of its own";
        counter salt_call_returns = "saltsight_salt_call_returns",
            "Returns of salt-call runs on a minion (no new event): each a job of its own";
        counter duplicate_returns = "saltsight_duplicate_returns",
            "A minion's second return to the same job";
        counter unplaced_returns = "saltsight_unplaced_returns",
            "Returns saltsight could not count in their job (a minion the job did not target, or a job closed without waiting for it): each is a minion_return record all the same";
        counter batch_events = "saltsight_batch_events",
            "salt/batch/<jid>/... events read (Salt 3008.2+ batches)";
        counter batch_sub_batches = "saltsight_batch_sub_batches",
            "Sub-batches of salt -b runs seen published, each counted in its batch's one job";
        counter evicted_jobs = "saltsight_jobs_evicted",
            "Jobs dropped before their deadline to respect jobs.max_jobs / max_expected";
        internal restarts_ignored_after_gap;
        counter closed_jobs_forgotten = "saltsight_closed_jobs_forgotten",
            "Closed jobs forgotten before their late window ended, to keep their missing minions within jobs.max_expected";
        counter trimmed_returns = "saltsight_trimmed_returns",
            "Returns Salt trimmed on the bus (VALUE_TRIMMED, its max_event_size): flagged on their minion_return; a state run trimmed whole or by state is never judged a success";
        counter unreadable_returns = "saltsight_unreadable_returns",
            "Returns that came but could not be read (undecodable, or over bus.max_frame_bytes): their minion is unknown_gap";
        counter minions_not_followed = "saltsight_minions_not_followed",
            "Verdicts on minions whose missing streak is not followed: jobs.max_minions was reached (their streak reads 1)";
        counter presence_not_followed = "saltsight_presence_not_followed",
            "Minions named by presence but not followed: jobs.max_minions was reached (their verdicts ignore presence)";
        gauge minions_connected = "saltsight_minions_connected",
            "Minions the master has connected, as presence last said (its connections to the publish port, read at each publish; presence_events; transport tcp)";
        gauge minions_missing_repeatedly = "saltsight_minions_missing_repeatedly",
            "Minions that missed their last 3 or more jobs in a row (minion_missing records say which: streak)";
        gauge open_jobs = "saltsight_jobs_tracked",
            "Jobs open in the tracker (waiting for returns or their deadline)";
    }
}
