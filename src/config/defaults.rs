//! Every default of saltsight's own settings, defined once: the resolver, the
//! generated example config and the stages' own `Default`s read them here.

use std::time::Duration;

pub const DEFAULT_CONFIG_PATH: &str = "/etc/saltsight/saltsight.toml";
pub const DEFAULT_MAX_FRAME_BYTES: usize = 64 << 20;
pub const DEFAULT_QUEUE_FRAMES: usize = 16_384;
pub const DEFAULT_QUEUE_BYTES: usize = 64 << 20;
pub const DEFAULT_SPILL_MAX_BYTES: u64 = 1 << 30;
/// The spill's directory in `state.dir`.
pub const SPILL_DIR_NAME: &str = "bus-spill";
pub const DEFAULT_RECONNECT_MIN: Duration = Duration::from_millis(100);
/// backon adds up to 100% jitter above the delay, so the longest wait is under 1.5 s:
/// a master that comes back is seen within 2 s.
pub const DEFAULT_RECONNECT_MAX: Duration = Duration::from_millis(750);
/// Salt writes a frame in one go: one half-read this long was never sent whole.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(10);

pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);
pub const DEFAULT_LATE_WINDOW: Duration = Duration::from_secs(3600);
/// Salt before 3008.2: how long after a sub-batch's returns the next one of
/// the same batch may come (Salt's CLI sends it at once, or after its
/// `--batch-wait`).
pub const DEFAULT_BATCH_GAP: Duration = Duration::from_secs(10);
pub const DEFAULT_MAX_JOBS: usize = 10_000;
pub const DEFAULT_MAX_EXPECTED: usize = 1_000_000;
/// Minions followed one by one (missing streaks; the fleet a rollout is measured against).
pub const DEFAULT_MAX_MINIONS: usize = 100_000;
/// Added to a job's own `timeout` kwarg when that is longer than its deadline.
pub const DEFAULT_TIMEOUT_GRACE: Duration = Duration::from_secs(10);
/// `minion_start` events this soon after a reconnect are minions re-announcing
/// themselves to a restarted master, not restarts.
pub const DEFAULT_RESTART_GRACE: Duration = Duration::from_secs(60);

pub const DEFAULT_COMMENT_MAX_BYTES: usize = 1024;
pub const DEFAULT_EXAMPLE_MINIONS: usize = 10;
pub const DEFAULT_MAX_FINGERPRINTS: usize = 100_000;

pub const DEFAULT_GIT: &str = "git";
pub const DEFAULT_GIT_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_MAX_HISTORY: usize = 1_000_000;
pub const DEFAULT_MAX_COMMITS: usize = 20;

// External incidents.
pub const DEFAULT_INCIDENT_MIN_MINIONS: usize = 3;
pub const DEFAULT_INCIDENT_WINDOW: Duration = Duration::from_secs(600);
pub const DEFAULT_INCIDENT_QUIET: Duration = Duration::from_secs(900);
pub const DEFAULT_INCIDENT_UPDATE_EVERY: Duration = Duration::from_secs(30);
pub const DEFAULT_INCIDENT_MAX_TARGETS: usize = 10_000;
pub const DEFAULT_INCIDENT_MAX_SAMPLES: usize = 20;

// Master pressure.
pub const DEFAULT_PRESSURE_SAMPLE_INTERVAL: Duration = Duration::from_secs(5);
pub const DEFAULT_PRESSURE_SUSTAIN: Duration = Duration::from_secs(30);
pub const DEFAULT_PRESSURE_WORKER_CPU: f64 = 0.9;
pub const DEFAULT_PRESSURE_BUS_LAG: Duration = Duration::from_secs(5);
pub const DEFAULT_PRESSURE_REQUEST_TIME: Duration = Duration::from_secs(2);

// Rollouts.
pub const DEFAULT_ROLLOUT_RELIST_EVERY: Duration = Duration::from_secs(30);
pub const DEFAULT_ROLLOUT_UPDATE_EVERY: Duration = Duration::from_secs(30);
pub const DEFAULT_ROLLOUT_STALL_AFTER: Duration = Duration::from_secs(3600);
pub const DEFAULT_ROLLOUT_MAX_OPEN: usize = 16;

// The history kept on the master.
pub const DEFAULT_HISTORY_FILE: &str = "history.db";
pub const DEFAULT_HISTORY_MAX_AGE: Duration = Duration::from_secs(7 * 86_400);
pub const DEFAULT_HISTORY_MAX_BYTES: u64 = 1 << 30;
pub const DEFAULT_HISTORY_BATCH_MAX_AGE: Duration = Duration::from_secs(1);

// What survives a restart.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/saltsight/state";
pub const DEFAULT_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(60);

// Outputs and their spool.
pub const DEFAULT_SPOOL_DIR: &str = "/var/lib/saltsight/spool";
pub const DEFAULT_SPOOL_MAX_BYTES: u64 = 1 << 30;
pub const DEFAULT_BATCH_MAX_RECORDS: usize = 1_000;
pub const DEFAULT_BATCH_MAX_BYTES: usize = 1 << 20;
pub const DEFAULT_BATCH_MAX_AGE: Duration = Duration::from_secs(1);
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_RETRY_MIN: Duration = Duration::from_millis(500);
pub const DEFAULT_RETRY_MAX: Duration = Duration::from_secs(60);
pub const DEFAULT_RETRY_AFTER_MAX: Duration = Duration::from_secs(600);
pub const DEFAULT_FILE_MAX_BYTES: u64 = 100 << 20;
pub const DEFAULT_FILE_KEEP: usize = 5;
pub const DEFAULT_CLICKHOUSE_TABLE: &str = "saltsight.records";

// [reactor]
pub const DEFAULT_REACTOR_PER_SECOND: u32 = 10;
pub const DEFAULT_REACTOR_BURST: u32 = 50;
pub const DEFAULT_REACTOR_QUEUE: usize = 256;
pub const DEFAULT_REACTOR_MAX_MINIONS: usize = 1_000;
pub const DEFAULT_REACTOR_ALERT_MAX_BYTES: usize = 1 << 20;
