//! saltsight's own config file, as written: every key optional, unknown keys
//! rejected. Resolution and validation happen in `resolve`.

use std::path::PathBuf;

use serde::Deserialize;

/// The file's `[section]`s, listed once: [`FileConfig`]'s fields and the
/// keys [`unknown_keys`] checks each section against are made from this list
/// (the resolved `Config`, its resolution and the reload's comparison name
/// every section too, checked by the compiler: a struct literal and a
/// destructuring).
macro_rules! file_sections {
    ($( $name:ident: $section:ty, )*) => {
        /// `/etc/saltsight/saltsight.toml`.
        #[derive(Debug, Default, Clone, Deserialize, PartialEq)]
        #[serde(deny_unknown_fields)]
        pub struct FileConfig {
            /// This master's name in records (default: the host name).
            pub master_id: Option<String>,
            /// `[[output]]`: where records go (default: stdout); each output
            /// kind reads its own keys (`sink`).
            #[serde(default)]
            pub output: Vec<toml::Table>,
            $( #[serde(default)] pub $name: $section, )*
        }

        /// Every `[section]`'s name with the keys it takes.
        fn sections() -> Vec<(&'static str, &'static [&'static str])> {
            vec![$( (stringify!($name), super::fields::of::<$section>()), )*]
        }
    };
}

file_sections! {
    bus: BusSection,
    jobs: JobsSection,
    triage: TriageSection,
    correlate: CorrelateSection,
    log: LogSection,
    spool: super::spool::SpoolSection,
    state: super::state::StateSection,
    incidents: super::incidents::IncidentsSection,
    presence: super::presence::PresenceSection,
    pressure: super::pressure::PressureSection,
    rollouts: super::rollouts::RolloutsSection,
    drift: super::drift::DriftSection,
    history: super::history::HistorySection,
    metrics: super::metrics::MetricsSection,
    redact: super::redact::RedactSection,
    reactor: super::reactor::ReactorSection,
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TriageSection {
    /// State comments and render messages are cut to this many bytes.
    pub comment_max_bytes: Option<u64>,
    /// Minions named in a `failure_group` at most.
    pub example_minions: Option<u64>,
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CorrelateSection {
    /// Find git checkouts among the master's file_roots, pillar_roots and gitfs cache.
    pub discover: Option<bool>,
    /// State trees to watch, name → directory (SLS paths are relative to it).
    pub state_repos: Option<std::collections::BTreeMap<String, PathBuf>>,
    /// Pillar checkouts to watch, name → directory.
    pub pillar_repos: Option<std::collections::BTreeMap<String, PathBuf>>,
    /// The git program.
    pub git: Option<PathBuf>,
    /// Longest a git call may take.
    pub git_timeout: Option<String>,
    /// Commits listed in a range at most.
    pub max_commits: Option<u64>,
    /// (minion, state) pairs remembered for suspect ranges.
    pub max_history: Option<u64>,
    /// A link to the pull or merge request a commit names: `{number}`,
    /// `{project}` (GitLab's) and `{repo}` are replaced.
    pub pull_request_url: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BusSection {
    /// The Salt master's config file; `master.d/*.conf` beside it is read too.
    pub master_config: Option<PathBuf>,
    /// `unix:/path/to/master_event_pub.ipc` or `tcp:127.0.0.1:4512`; overrides
    /// what the master's config says.
    pub endpoint: Option<String>,
    /// Largest frame accepted, in bytes.
    pub max_frame_bytes: Option<u64>,
    /// Frames the queue between the reader and the pipeline holds.
    pub queue_frames: Option<u64>,
    /// Bytes the queue between the reader and the pipeline holds.
    pub queue_bytes: Option<u64>,
    /// Where frames wait on disk while the queue is full (default: `bus-spill`
    /// in `state.dir`).
    pub spill_dir: Option<PathBuf>,
    /// Bytes the spill may hold on disk; 0 turns it off (frames past the
    /// queue are dropped and counted).
    pub spill_max_bytes: Option<u64>,
    /// First reconnect delay, e.g. `"100ms"`.
    pub reconnect_min: Option<String>,
    /// Longest reconnect delay, e.g. `"1s"`.
    pub reconnect_max: Option<String>,
    /// How long a frame may stay half-read, nothing arriving, before the stream
    /// counts as out of sync, e.g. `"10s"`.
    pub stall_timeout: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JobsSection {
    /// Function glob → deadline, e.g. `"state.*" = "30m"`; the longest glob wins.
    pub deadlines: Option<std::collections::BTreeMap<String, String>>,
    /// Deadline of functions no glob matches.
    pub default_deadline: Option<String>,
    /// Open jobs tracked at most.
    pub max_jobs: Option<u64>,
    /// Expected returns outstanding at most, over all open jobs.
    pub max_expected: Option<u64>,
    /// Minions followed one by one (missing streaks), at most.
    pub max_minions: Option<u64>,
    /// How long a job with missing minions waits for late returns.
    pub late_window: Option<String>,
    /// Salt before 3008.2: how long a batch's next sub-batch may take.
    pub batch_gap: Option<String>,
    /// Users whose jobs come through salt-api (`run_kind: api`).
    pub api_users: Option<Vec<String>>,
}

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LogSection {
    /// `error`, `warn`, `info`, `debug`, `trace`, or a tracing filter directive.
    pub level: Option<String>,
    /// `text` or `json`.
    pub format: Option<String>,
}

/// Removes from `table` every key no section takes, and names them
/// (`bus.queue_frame`, `colour`), each with the keys its section takes.
pub fn unknown_keys(table: &mut toml::Table) -> Vec<(String, String)> {
    use super::fields::{of, unknown};
    let mut found = Vec::new();
    for key in unknown::<FileConfig>(table) {
        table.remove(&key);
        found.push((key, of::<FileConfig>().join(", ")));
    }
    for (name, takes) in sections() {
        let Some(toml::Value::Table(section)) = table.get_mut(name) else {
            continue;
        };
        let unknown: Vec<String> = section
            .keys()
            .filter(|key| !takes.contains(&key.as_str()))
            .cloned()
            .collect();
        for key in unknown {
            section.remove(&key);
            found.push((format!("{name}.{key}"), takes.join(", ")));
        }
    }
    found
}
