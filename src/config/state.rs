//! `[state]`: where saltsight keeps its memory across restarts (the
//! checkpoint of open jobs, triage's groups and the correlator's history; see
//! `pipeline::checkpoint`), and how often it is written.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::defaults::{DEFAULT_CHECKPOINT_INTERVAL, DEFAULT_STATE_DIR};
use super::duration::parse_duration;
use super::spool::not_a_directory_path;

/// `[state]` as written.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StateSection {
    pub dir: Option<PathBuf>,
    pub checkpoint_interval: Option<String>,
    pub checkpoint: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateConfig {
    pub dir: PathBuf,
    /// How often the checkpoint is written while running; zero: only at stop.
    pub checkpoint_interval: Duration,
    /// Whether to checkpoint (and restore) at all.
    pub checkpoint: bool,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from(DEFAULT_STATE_DIR),
            checkpoint_interval: DEFAULT_CHECKPOINT_INTERVAL,
            checkpoint: true,
        }
    }
}

/// `[state]` with the `--state-dir` override.
pub fn resolve_state(
    section: &StateSection,
    dir_override: Option<&PathBuf>,
    errors: &mut Vec<String>,
) -> StateConfig {
    let defaults = StateConfig::default();
    let dir = dir_override
        .or(section.dir.as_ref())
        .cloned()
        .unwrap_or(defaults.dir);
    if !dir.is_absolute() {
        errors.push(format!("state.dir {} must be absolute", dir.display()));
    } else if let Some(problem) = not_a_directory_path(&dir) {
        errors.push(format!("state.dir {}: {problem}", dir.display()));
    }
    let checkpoint_interval = match section.checkpoint_interval.as_deref().map(parse_duration) {
        None => defaults.checkpoint_interval,
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            errors.push(format!("state.checkpoint_interval: {e}"));
            defaults.checkpoint_interval
        }
    };
    StateConfig {
        dir,
        checkpoint_interval,
        checkpoint: section.checkpoint.unwrap_or(defaults.checkpoint),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_override_wins_and_problems_are_named() {
        let mut errors = Vec::new();
        let section = StateSection {
            dir: Some("relative".into()),
            checkpoint_interval: Some("soon".into()),
            checkpoint: None,
        };
        let config = resolve_state(&section, None, &mut errors);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(config.checkpoint);
        errors.clear();
        let over = PathBuf::from("/tmp/elsewhere");
        let config = resolve_state(&section, Some(&over), &mut errors);
        assert_eq!(config.dir, over);
        assert_eq!(errors.len(), 1, "only the interval: {errors:?}");
    }
}
