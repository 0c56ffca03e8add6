//! File + environment + flags + the master's config → one validated [`Config`].
//! Every problem found is reported, not just the first.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::duration::{parse_duration, positive_or};
use super::file::FileConfig;
use super::master::{DEFAULT_MASTER_CONFIG, MasterBusSettings, MasterConfigError};
use super::spool::{RawOutput, SpoolConfig, raw_outputs, resolve_spool};
use crate::bus::Endpoint;

pub use super::defaults::*;
pub use super::model::{
    BusConfig, Config, CorrelateConfig, JobsConfig, LogConfig, LogFormat, RepoSpec, TriageConfig,
};

/// What the command line and `SALTSIGHT_*` variables said (clap merges the two).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub master_config: Option<PathBuf>,
    pub endpoint: Option<String>,
    pub max_frame_bytes: Option<u64>,
    pub log_level: Option<String>,
    pub log_format: Option<String>,
    pub web_listen_address: Option<String>,
    pub web_config_file: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
}

/// Everything wrong with the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<String>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid configuration ({} problem{}):",
            self.0.len(),
            if self.0.len() == 1 { "" } else { "s" }
        )?;
        for problem in &self.0 {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Reads and validates everything but the outputs' own keys (kept as written in
/// [`Config::outputs`]). `config` in `overrides` names the file; without it the
/// default path is read if it exists.
pub fn load(overrides: &Overrides) -> Result<Config, ConfigErrors> {
    load_with(overrides, |_, _, _| ()).map(|(config, ())| config)
}

/// [`load`], with the outputs resolved by `outputs` (the sink's registry of
/// output kinds), whose problems are listed with every other one.
pub fn load_with<T>(
    overrides: &Overrides,
    outputs: impl FnOnce(&[RawOutput], &SpoolConfig, &mut Vec<String>) -> T,
) -> Result<(Config, T), ConfigErrors> {
    let mut errors = Vec::new();
    let (file, file_path) = read_file(overrides.config.as_deref(), &mut errors);
    let mut warnings = Vec::new();
    let (master_path, missing_ok) = master_config_path(&file, overrides);
    let master = MasterBusSettings::load(&master_path, missing_ok);
    let bus = resolve_bus(&file, overrides, &master, &mut errors, &mut warnings);
    let log = resolve_log(&file, overrides, &mut errors);
    let jobs = resolve_jobs(&file, &mut errors);
    let (master_id, master_id_origin) = match (&file.master_id, &master) {
        (Some(id), _) if id.trim().is_empty() => {
            errors.push("master_id is empty".into());
            (String::new(), String::new())
        }
        (Some(id), _) => (id.clone(), "master_id in the config".to_string()),
        (None, Ok(MasterBusSettings { id: Some(id), .. })) => {
            (id.clone(), format!("`id` in {}", master_path.display()))
        }
        (None, _) => (
            nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_else(|| "unknown".into()),
            "the host name: the Salt master's config sets no `id`".to_string(),
        ),
    };
    let triage = resolve_triage(&file, &jobs, &mut errors);
    let correlate = super::correlate::resolve(&file, &master, &jobs, &mut errors, &mut warnings);
    let spool = resolve_spool(&file.spool, &mut errors);
    let state = super::state::resolve_state(&file.state, overrides.state_dir.as_ref(), &mut errors);
    let bus = bus.map(|bus| BusConfig {
        spill: spill(&file, &state.dir),
        ..bus
    });
    let history = super::history::resolve(&file.history, &state.dir, &mut errors);
    let incidents = super::incidents::resolve(&file.incidents, &mut errors);
    let master = master_settings(&file, overrides);
    let presence = super::presence::resolve(&file.presence, master.as_ref().map(Into::into));
    let pressure = super::pressure::resolve(
        &file.pressure,
        master.as_ref().map(|m| m.pidfile.clone()),
        &mut errors,
    );
    let pki_dir = master.map(|m| m.pki_dir);
    let rollouts = super::rollouts::resolve(&file.rollouts, pki_dir.clone(), &mut errors);
    let drift = super::drift::resolve(&file.drift, &mut errors);
    let raw = raw_outputs(&file.output, &mut errors);
    let resolved = outputs(&raw, &spool, &mut errors);
    let metrics = super::metrics::resolve(
        &file.metrics,
        overrides.web_listen_address.as_deref(),
        overrides.web_config_file.as_ref(),
        pki_dir,
        &mut errors,
    );
    let redact = super::redact::resolve(&file.redact, &mut errors);
    let explicit_bus = (overrides.endpoint.as_ref())
        .or(file.bus.endpoint.as_ref())
        .and_then(|text| text.parse::<Endpoint>().ok());
    let reactor = super::reactor::resolve(
        &file.reactor,
        explicit_bus.as_ref(),
        master_settings(&file, overrides).as_ref(),
        &metrics,
        &mut errors,
    );
    match (bus, log) {
        (Some(bus), Some(log)) if errors.is_empty() => Ok((
            Config {
                warnings,
                master_id,
                master_id_origin,
                bus,
                triage,
                correlate,
                jobs,
                log,
                spool,
                state,
                incidents,
                presence,
                pressure,
                rollouts,
                drift,
                history,
                outputs: raw,
                metrics,
                redact,
                reactor,
                file: file_path,
            },
            resolved,
        )),
        _ => Err(ConfigErrors(errors)),
    }
}

/// `[bus]`'s spill: `spill_dir` (default: in `state.dir`), off when
/// `spill_max_bytes` is 0.
fn spill(file: &FileConfig, state_dir: &Path) -> Option<crate::bus::spill::SpillConfig> {
    let max_bytes = file.bus.spill_max_bytes.unwrap_or(DEFAULT_SPILL_MAX_BYTES);
    (max_bytes > 0).then(|| crate::bus::spill::SpillConfig {
        dir: file
            .bus
            .spill_dir
            .clone()
            .unwrap_or_else(|| state_dir.join(SPILL_DIR_NAME)),
        max_bytes,
    })
}

fn read_file(explicit: Option<&Path>, errors: &mut Vec<String>) -> (FileConfig, Option<PathBuf>) {
    let path = explicit.unwrap_or(Path::new(DEFAULT_CONFIG_PATH));
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if explicit.is_none() && e.kind() == std::io::ErrorKind::NotFound => {
            return (FileConfig::default(), None);
        }
        Err(e) => {
            errors.push(format!("cannot read {}: {e}", path.display()));
            return (FileConfig::default(), None);
        }
    };
    // Every syntax error, not just the first: the parser recovers past each.
    let (_, syntax) = toml::de::DeTable::parse_recoverable(&text);
    if !syntax.is_empty() {
        for e in syntax {
            errors.push(format!("{}: {}", path.display(), e.to_string().trim_end()));
        }
        return (FileConfig::default(), Some(path.to_path_buf()));
    }
    let mut table: toml::Table = match toml::from_str(&text) {
        Ok(table) => table,
        Err(e) => {
            errors.push(format!("{}: {}", path.display(), e.to_string().trim_end()));
            return (FileConfig::default(), Some(path.to_path_buf()));
        }
    };
    // Every unknown key, in every section, is named (serde would stop at the
    // first); then the rest is read as usual, so its problems are named too.
    for (key, takes) in super::file::unknown_keys(&mut table) {
        errors.push(format!(
            "{}: unknown key `{key}` (known here: {takes})",
            path.display()
        ));
    }
    match toml::Value::Table(table).try_into::<FileConfig>() {
        Ok(file) => (file, Some(path.to_path_buf())),
        Err(e) => {
            errors.push(format!("{}: {}", path.display(), e.to_string().trim_end()));
            (FileConfig::default(), Some(path.to_path_buf()))
        }
    }
}

/// The master's own settings, when its config can be read (the bus settings
/// report why when not).
fn master_settings(file: &FileConfig, o: &Overrides) -> Option<MasterBusSettings> {
    let (path, missing_ok) = master_config_path(file, o);
    MasterBusSettings::load(&path, missing_ok).ok()
}

/// The Salt master's config to read, and whether its absence is fine (only the
/// default path may be missing: Salt's defaults then apply).
fn master_config_path(file: &FileConfig, o: &Overrides) -> (PathBuf, bool) {
    match o
        .master_config
        .clone()
        .or_else(|| file.bus.master_config.clone())
    {
        Some(explicit) => (explicit, false),
        None => (PathBuf::from(DEFAULT_MASTER_CONFIG), true),
    }
}

fn resolve_bus(
    file: &FileConfig,
    o: &Overrides,
    master: &Result<MasterBusSettings, MasterConfigError>,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Option<BusConfig> {
    let endpoint_text = o.endpoint.clone().or_else(|| file.bus.endpoint.clone());
    let (endpoint, endpoint_origin) = match endpoint_text {
        Some(text) => match text.parse::<Endpoint>() {
            Ok(endpoint) => (
                Some(endpoint),
                "set explicitly (--bus.endpoint, SALTSIGHT_ENDPOINT or bus.endpoint)".to_string(),
            ),
            Err(problem) => {
                errors.push(problem);
                (None, String::new())
            }
        },
        None => {
            let (path, _) = master_config_path(file, o);
            match master {
                Ok(settings) => {
                    let origin = if settings.files.is_empty() {
                        format!("Salt defaults ({} not found)", path.display())
                    } else {
                        let files: Vec<String> = settings
                            .files
                            .iter()
                            .map(|f| f.display().to_string())
                            .collect();
                        format!("Salt master config {}", files.join(", "))
                    };
                    warnings.extend(settings.warnings.iter().cloned());
                    (Some(settings.endpoint()), origin)
                }
                Err(e) => {
                    errors.push(e.to_string());
                    (None, String::new())
                }
            }
        }
    };
    let max_frame_bytes = o
        .max_frame_bytes
        .or(file.bus.max_frame_bytes)
        .map_or(DEFAULT_MAX_FRAME_BYTES as u64, |v| v);
    if !(1024..(2u64 << 30)).contains(&max_frame_bytes) {
        errors.push(format!(
            "bus.max_frame_bytes is {max_frame_bytes}; it must be at least 1024 and below 2 GiB"
        ));
    }
    let queue_bytes = file.bus.queue_bytes.unwrap_or(DEFAULT_QUEUE_BYTES as u64);
    if queue_bytes < 1 << 20 {
        errors.push(format!(
            "bus.queue_bytes is {queue_bytes}; it must be at least 1 MiB"
        ));
    }
    let queue_frames = file.bus.queue_frames.unwrap_or(DEFAULT_QUEUE_FRAMES as u64);
    if !(1..=1_000_000).contains(&queue_frames) {
        errors.push(format!(
            "bus.queue_frames is {queue_frames}; it must be between 1 and 1000000"
        ));
    }
    let mut duration = |key: &str, value: &Option<String>, default: Duration| match value {
        None => default,
        Some(text) => parse_duration(text).unwrap_or_else(|e| {
            errors.push(format!("bus.{key}: {e}"));
            default
        }),
    };
    let reconnect_min = duration(
        "reconnect_min",
        &file.bus.reconnect_min,
        DEFAULT_RECONNECT_MIN,
    );
    let reconnect_max = duration(
        "reconnect_max",
        &file.bus.reconnect_max,
        DEFAULT_RECONNECT_MAX,
    );
    let stall_timeout = duration(
        "stall_timeout",
        &file.bus.stall_timeout,
        DEFAULT_STALL_TIMEOUT,
    );
    if stall_timeout < Duration::from_millis(100) {
        errors.push(format!(
            "bus.stall_timeout ({stall_timeout:?}) must be at least 100ms"
        ));
    }
    if reconnect_min.is_zero() || reconnect_min > reconnect_max {
        errors.push(format!("bus.reconnect_min ({reconnect_min:?}) must be above zero and at most bus.reconnect_max ({reconnect_max:?})"));
    }
    Some(BusConfig {
        endpoint: endpoint?,
        endpoint_origin,
        max_frame_bytes: max_frame_bytes as usize,
        queue_frames: queue_frames as usize,
        queue_bytes: usize::try_from(queue_bytes).unwrap_or(usize::MAX),
        reconnect_min,
        reconnect_max,
        stall_timeout,
        // Set once `state.dir` is known (`with_spill`).
        spill: None,
    })
}

fn resolve_jobs(file: &FileConfig, errors: &mut Vec<String>) -> JobsConfig {
    let j = &file.jobs;
    let mut duration = |key: &str, value: Option<&String>, default: Duration| {
        positive_or(
            &format!("jobs.{key}"),
            value.map(String::as_str),
            default,
            errors,
        )
    };
    let default_deadline = duration(
        "default_deadline",
        j.default_deadline.as_ref(),
        DEFAULT_DEADLINE,
    );
    let late_window = duration("late_window", j.late_window.as_ref(), DEFAULT_LATE_WINDOW);
    let batch_gap = duration("batch_gap", j.batch_gap.as_ref(), DEFAULT_BATCH_GAP);
    let mut deadlines = Vec::new();
    for (pattern, text) in j.deadlines.iter().flatten() {
        let d = duration(
            &format!("deadlines.{pattern:?}"),
            Some(text),
            default_deadline,
        );
        deadlines.push((pattern.clone(), d));
    }
    let mut count = |key: &str, value: Option<u64>, default: usize| -> usize {
        match value {
            None => default,
            Some(0) => {
                errors.push(format!("jobs.{key} must be at least 1"));
                default
            }
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        }
    };
    let max_jobs = count("max_jobs", j.max_jobs, DEFAULT_MAX_JOBS);
    let max_expected = count("max_expected", j.max_expected, DEFAULT_MAX_EXPECTED);
    let max_minions = count("max_minions", j.max_minions, DEFAULT_MAX_MINIONS);
    JobsConfig {
        deadlines,
        default_deadline,
        max_jobs,
        max_expected,
        max_minions,
        late_window,
        batch_gap,
        api_users: j.api_users.clone().unwrap_or_default(),
    }
}

fn resolve_triage(file: &FileConfig, jobs: &JobsConfig, errors: &mut Vec<String>) -> TriageConfig {
    let t = &file.triage;
    let defaults = TriageConfig::default();
    let mut at_least = |key: &str, value: Option<u64>, min: u64, default: usize| match value {
        None => default,
        Some(n) if n < min => {
            errors.push(format!("triage.{key} must be at least {min}"));
            default
        }
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    TriageConfig {
        comment_max_bytes: at_least(
            "comment_max_bytes",
            t.comment_max_bytes,
            64,
            defaults.comment_max_bytes,
        ),
        example_minions: at_least(
            "example_minions",
            t.example_minions,
            1,
            defaults.example_minions,
        ),
        max_jobs: jobs.max_jobs,
        ..defaults
    }
}

fn resolve_log(file: &FileConfig, o: &Overrides, errors: &mut Vec<String>) -> Option<LogConfig> {
    let level = o
        .log_level
        .clone()
        .or_else(|| file.log.level.clone())
        .unwrap_or_else(|| "info".into());
    if tracing_subscriber::EnvFilter::try_new(&level).is_err() {
        errors.push(format!(
            "log.level {level:?} is not a level (error, warn, info, debug, trace) or filter"
        ));
    }
    let format = match o
        .log_format
        .as_deref()
        .or(file.log.format.as_deref())
        .unwrap_or("text")
    {
        "text" => LogFormat::Text,
        "json" => LogFormat::Json,
        other => {
            errors.push(format!("log.format {other:?} is not `text` or `json`"));
            LogFormat::Text
        }
    };
    Some(LogConfig { level, format })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn unknown_keys_are_rejected_naming_key_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "s.toml",
            "[bus]\nendpoint = \"unix:/x\"\nmax_frame_byts = 5\n",
        );
        let err = load(&Overrides {
            config: Some(path.clone()),
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("max_frame_byts") && err.contains(&path.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn every_syntax_error_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "s.toml",
            "[bus\nendpoint = \"unix:/x\"\n[jobs]\nmax_jobs = = 3\n[log]\nlevel = \"info\n",
        );
        let err = load(&Overrides {
            config: Some(path),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.0.len() >= 3, "{err}");
        for line in ["line 1", "line 4", "line 6"] {
            assert!(err.to_string().contains(line), "{line}: {err}");
        }
    }

    #[test]
    fn every_problem_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "s.toml",
            "[bus]\nendpoint = \"nowhere\"\nmax_frame_bytes = 10\nreconnect_min = \"5x\"\n[log]\nformat = \"xml\"\n",
        );
        let err = load(&Overrides {
            config: Some(path),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(err.0.len(), 4, "{err}");
    }

    #[test]
    fn flags_override_the_file_and_the_file_overrides_the_master() {
        let dir = tempfile::tempdir().unwrap();
        let master = write(dir.path(), "master", "sock_dir: /run/m\n");
        let path = write(
            dir.path(),
            "s.toml",
            &format!(
                "[bus]\nmaster_config = {:?}\n",
                master.display().to_string()
            ),
        );
        let config = load(&Overrides {
            config: Some(path.clone()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            config.bus.endpoint,
            Endpoint::Unix("/run/m/master_event_pub.ipc".into())
        );
        let config = load(&Overrides {
            config: Some(path),
            endpoint: Some("tcp:127.0.0.1:47120".into()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            config.bus.endpoint,
            Endpoint::Tcp("127.0.0.1:47120".parse().unwrap())
        );
    }

    #[test]
    fn master_id_is_the_masters_own_id_unless_set() {
        let dir = tempfile::tempdir().unwrap();
        let master = write(dir.path(), "master", "id: salt-eu-1\n");
        let empty = write(dir.path(), "empty.toml", "");
        let load_with_id = |config: &Path| {
            load(&Overrides {
                config: Some(config.to_owned()),
                master_config: Some(master.clone()),
                ..Default::default()
            })
            .unwrap()
        };
        let config = load_with_id(&empty);
        assert_eq!(config.master_id, "salt-eu-1");
        assert!(config.master_id_origin.contains("`id` in"), "{config:?}");
        let named = write(dir.path(), "named.toml", "master_id = \"edge\"\n");
        assert_eq!(load_with_id(&named).master_id, "edge");
        // No `id` in the master's config: the host name, as before.
        std::fs::write(&master, "sock_dir: /run/m\n").unwrap();
        let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
        assert_eq!(load_with_id(&empty).master_id, host);
    }

    #[test]
    fn an_explicit_missing_master_config_is_an_error() {
        let err = load(&Overrides {
            config: Some("/nonexistent/saltsight.toml".into()),
            master_config: Some("/nonexistent/master".into()),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(err.0.len(), 2, "{err}");
    }
}
