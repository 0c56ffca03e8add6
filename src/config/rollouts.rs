//! `[rollouts]`: following each commit of a watched state tree until every
//! minion the master knows has applied it (the correlator's rollouts).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::defaults::{
    DEFAULT_ROLLOUT_MAX_OPEN, DEFAULT_ROLLOUT_RELIST_EVERY, DEFAULT_ROLLOUT_STALL_AFTER,
    DEFAULT_ROLLOUT_UPDATE_EVERY,
};
use super::duration::positive_or;

/// `[rollouts]` as written.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RolloutsSection {
    pub enabled: Option<bool>,
    pub minions_dir: Option<PathBuf>,
    pub relist_every: Option<String>,
    pub update_every: Option<String>,
    pub stall_after: Option<String>,
    pub max_open: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutConfig {
    pub enabled: bool,
    /// The master's accepted minion keys (`<pki_dir>/minions`): the fleet a
    /// rollout is measured against, with the minions seen on the bus.
    pub minions_dir: PathBuf,
    /// How often that directory is checked for a change (one `stat`).
    pub relist_every: Duration,
    /// Longest between two revisions of a rollout that is progressing.
    pub update_every: Duration,
    /// A rollout with minions pending and no progress this long is `stalled`.
    pub stall_after: Duration,
    /// Rollouts open at once per state tree (the oldest is closed as
    /// superseded past it).
    pub max_open: usize,
}

impl Default for RolloutConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            minions_dir: PathBuf::from("/etc/salt/pki/master/minions"),
            relist_every: DEFAULT_ROLLOUT_RELIST_EVERY,
            update_every: DEFAULT_ROLLOUT_UPDATE_EVERY,
            stall_after: DEFAULT_ROLLOUT_STALL_AFTER,
            max_open: DEFAULT_ROLLOUT_MAX_OPEN,
        }
    }
}

/// `[rollouts]`, with the master's own `<pki_dir>/minions` unless one is given.
pub fn resolve(
    section: &RolloutsSection,
    master_pki_dir: Option<PathBuf>,
    errors: &mut Vec<String>,
) -> RolloutConfig {
    let d = RolloutConfig::default();
    let duration =
        |key: &str, value: &Option<String>, default: Duration, errors: &mut Vec<String>| {
            positive_or(
                &format!("rollouts.{key}"),
                value.as_deref(),
                default,
                errors,
            )
        };
    let max_open = match section.max_open {
        None => d.max_open,
        Some(0) => {
            errors.push("rollouts.max_open must be at least 1".into());
            d.max_open
        }
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    RolloutConfig {
        enabled: section.enabled.unwrap_or(d.enabled),
        minions_dir: section
            .minions_dir
            .clone()
            .or_else(|| master_pki_dir.map(|p| p.join("minions")))
            .unwrap_or(d.minions_dir),
        relist_every: duration(
            "relist_every",
            &section.relist_every,
            d.relist_every,
            errors,
        ),
        update_every: duration(
            "update_every",
            &section.update_every,
            d.update_every,
            errors,
        ),
        stall_after: duration("stall_after", &section.stall_after, d.stall_after, errors),
        max_open,
    }
}
