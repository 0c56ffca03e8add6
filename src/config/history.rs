//! `[history]`: the record history kept on the master (an embedded SQLite
//! store, read by `saltsight job`, `jobs`, `failures` and `minion`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::defaults::{
    DEFAULT_HISTORY_BATCH_MAX_AGE, DEFAULT_HISTORY_FILE, DEFAULT_HISTORY_MAX_AGE,
    DEFAULT_HISTORY_MAX_BYTES,
};
use super::duration::positive_or;

/// `[history]` as written.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HistorySection {
    pub enabled: Option<bool>,
    pub path: Option<PathBuf>,
    pub max_age: Option<String>,
    pub max_bytes: Option<u64>,
    pub batch_max_age: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryConfig {
    pub enabled: bool,
    /// The store; by default `history.db` in the state directory.
    pub path: PathBuf,
    /// Records older than this are removed.
    pub max_age: Duration,
    /// Past this size the oldest records are removed.
    pub max_bytes: u64,
    /// Records are written in batches at least this often.
    pub batch_max_age: Duration,
}

/// `[history]`, its file in `state_dir` unless one is given.
pub fn resolve(
    section: &HistorySection,
    state_dir: &Path,
    errors: &mut Vec<String>,
) -> HistoryConfig {
    let path = section
        .path
        .clone()
        .unwrap_or_else(|| state_dir.join(DEFAULT_HISTORY_FILE));
    if !path.is_absolute() {
        errors.push(format!("history.path {} must be absolute", path.display()));
    }
    let max_bytes = section.max_bytes.unwrap_or(DEFAULT_HISTORY_MAX_BYTES);
    if max_bytes < 1 << 20 {
        errors.push(format!(
            "history.max_bytes is {max_bytes}; it must be at least 1 MiB"
        ));
    }
    HistoryConfig {
        enabled: section.enabled.unwrap_or(true),
        path,
        max_age: positive_or(
            "history.max_age",
            section.max_age.as_deref(),
            DEFAULT_HISTORY_MAX_AGE,
            errors,
        ),
        max_bytes,
        batch_max_age: positive_or(
            "history.batch_max_age",
            section.batch_max_age.as_deref(),
            DEFAULT_HISTORY_BATCH_MAX_AGE,
            errors,
        ),
    }
}
