//! `[incidents]`: when failures against one external target become one
//! `external_incident` (the `incident` stage).

use std::time::Duration;

use serde::Deserialize;

use super::defaults::{
    DEFAULT_INCIDENT_MAX_SAMPLES, DEFAULT_INCIDENT_MAX_TARGETS, DEFAULT_INCIDENT_MIN_MINIONS,
    DEFAULT_INCIDENT_QUIET, DEFAULT_INCIDENT_UPDATE_EVERY, DEFAULT_INCIDENT_WINDOW,
};
use super::duration::positive_or;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncidentConfig {
    /// Distinct minions failing against one target within `window` to open.
    pub min_minions: usize,
    pub window: Duration,
    /// An incident with no new failure for this long closes.
    pub quiet: Duration,
    /// Longest between two revisions of a growing incident.
    pub update_every: Duration,
    pub max_targets: usize,
    pub max_samples: usize,
}

impl Default for IncidentConfig {
    fn default() -> Self {
        Self {
            min_minions: DEFAULT_INCIDENT_MIN_MINIONS,
            window: DEFAULT_INCIDENT_WINDOW,
            quiet: DEFAULT_INCIDENT_QUIET,
            update_every: DEFAULT_INCIDENT_UPDATE_EVERY,
            max_targets: DEFAULT_INCIDENT_MAX_TARGETS,
            max_samples: DEFAULT_INCIDENT_MAX_SAMPLES,
        }
    }
}

/// `[incidents]` as written.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IncidentsSection {
    pub min_minions: Option<u64>,
    pub window: Option<String>,
    pub quiet: Option<String>,
    pub update_every: Option<String>,
    pub max_targets: Option<u64>,
    pub max_samples: Option<u64>,
}

pub fn resolve(section: &IncidentsSection, errors: &mut Vec<String>) -> IncidentConfig {
    let d = IncidentConfig::default();
    let count =
        |key: &str, value: Option<u64>, default: usize, errors: &mut Vec<String>| match value {
            None => default,
            Some(0) => {
                errors.push(format!("incidents.{key} must be at least 1"));
                default
            }
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        };
    IncidentConfig {
        min_minions: count("min_minions", section.min_minions, d.min_minions, errors),
        window: positive_or(
            "incidents.window",
            section.window.as_deref(),
            d.window,
            errors,
        ),
        quiet: positive_or("incidents.quiet", section.quiet.as_deref(), d.quiet, errors),
        update_every: positive_or(
            "incidents.update_every",
            section.update_every.as_deref(),
            d.update_every,
            errors,
        ),
        max_targets: count("max_targets", section.max_targets, d.max_targets, errors),
        max_samples: count("max_samples", section.max_samples, d.max_samples, errors),
    }
}
