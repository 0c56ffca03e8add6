//! `[drift]`: telling the changes a state run makes apart: a commit's
//! (intentional), drift put back (corrected) or seen under `test=True`
//! (detected), and states that change on every run (non-idempotent).

use serde::Deserialize;

/// `[drift]` as written.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DriftSection {
    pub enabled: Option<bool>,
    pub never_settles_after: Option<u64>,
    pub fleet_share: Option<f64>,
    pub max_states_listed: Option<u64>,
    pub max_changed_read: Option<u64>,
    pub summary_bytes: Option<u64>,
    pub max_remembered: Option<u64>,
    pub max_open_jobs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DriftConfig {
    /// Needs a watched state tree (`[correlate]`): the commit each run applied.
    pub enabled: bool,
    /// Runs in a row a state changes in, on one minion under one commit,
    /// before it is judged non-idempotent (the first, intentional, counts).
    pub never_settles_after: u32,
    /// The share of a job's minions that ran a state and changed it again
    /// (after a change the run before) at which the job's changes of it are
    /// unsettled rather than drift.
    pub fleet_share: f64,
    /// Drifted states a `drift` record lists (the rest counted).
    pub max_states_listed: usize,
    /// Changed states of one return read whole (the rest counted, not judged).
    pub max_changed_read: usize,
    /// Bytes of a change's summary.
    pub summary_bytes: usize,
    /// (minion, state) pairs remembered; new pairs past it are refused, counted.
    pub max_remembered: usize,
    /// Jobs whose drift is held until they close (the oldest decided early).
    pub max_open_jobs: usize,
}

impl Default for DriftConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            never_settles_after: 3,
            fleet_share: 0.5,
            max_states_listed: 20,
            max_changed_read: 200,
            summary_bytes: 400,
            max_remembered: 500_000,
            max_open_jobs: 1_000,
        }
    }
}

/// `[drift]` checked: every problem in `errors`.
pub fn resolve(section: &DriftSection, errors: &mut Vec<String>) -> DriftConfig {
    let d = DriftConfig::default();
    let mut count = |key: &str, value: Option<u64>, default: usize, min: u64| match value {
        None => default,
        Some(n) if n < min => {
            errors.push(format!("drift.{key} must be at least {min}"));
            default
        }
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let never_settles_after = count(
        "never_settles_after",
        section.never_settles_after,
        d.never_settles_after as usize,
        2,
    );
    let max_states_listed = count(
        "max_states_listed",
        section.max_states_listed,
        d.max_states_listed,
        1,
    );
    let max_changed_read = count(
        "max_changed_read",
        section.max_changed_read,
        d.max_changed_read,
        1,
    );
    let summary_bytes = count("summary_bytes", section.summary_bytes, d.summary_bytes, 16);
    let max_remembered = count(
        "max_remembered",
        section.max_remembered,
        d.max_remembered,
        1,
    );
    let max_open_jobs = count("max_open_jobs", section.max_open_jobs, d.max_open_jobs, 1);
    let fleet_share = match section.fleet_share {
        None => d.fleet_share,
        Some(share) if share > 0.0 && share <= 1.0 => share,
        Some(share) => {
            errors.push(format!("drift.fleet_share must be in (0, 1], not {share}"));
            d.fleet_share
        }
    };
    DriftConfig {
        enabled: section.enabled.unwrap_or(d.enabled),
        never_settles_after: u32::try_from(never_settles_after).unwrap_or(u32::MAX),
        fleet_share,
        max_states_listed,
        max_changed_read,
        summary_bytes,
        max_remembered,
        max_open_jobs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_every_bound_checked() {
        let mut errors = Vec::new();
        assert_eq!(
            resolve(&DriftSection::default(), &mut errors),
            DriftConfig::default()
        );
        assert!(errors.is_empty());
        let wrong = DriftSection {
            never_settles_after: Some(1),
            fleet_share: Some(0.0),
            summary_bytes: Some(3),
            max_open_jobs: Some(0),
            ..DriftSection::default()
        };
        let config = resolve(&wrong, &mut errors);
        assert_eq!(config, DriftConfig::default());
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(
            errors[0].contains("drift.never_settles_after"),
            "{errors:?}"
        );
    }
}
