//! `[metrics.salt_exporter]`: salt-exporter's own switches, for a drop-in that
//! behaves as the user had it configured (its `config.yml` keys in the docs,
//! docs/metrics.md, *Moving from salt-exporter*). As written, then resolved.

use std::path::PathBuf;

use serde::Deserialize;

/// The metrics salt-exporter exposes, by name: the ones `disable` may name.
pub const METRICS: [&str; 10] = [
    "salt_new_job_total",
    "salt_expected_responses_total",
    "salt_function_responses_total",
    "salt_scheduled_job_return_total",
    "salt_responses_total",
    "salt_function_status",
    "salt_job_duration_seconds",
    "salt_responses_last_received_response",
    "salt_health_last_heartbeat",
    "salt_health_minions_total",
];

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SaltExporterSection {
    /// `add-minion-label`: a `minion` label on `salt_function_responses_total`,
    /// `salt_scheduled_job_return_total` and `salt_job_duration_seconds`.
    pub minion_label: Option<bool>,
    /// `global.filters.ignore-test`: jobs run with `test=True` are not counted.
    pub ignore_test: Option<bool>,
    /// `global.filters.ignore-mock`: jobs run with `mock=True` are not counted.
    pub ignore_mock: Option<bool>,
    /// `salt_function_status.filters.functions` (`*` wildcards at either end).
    pub status_functions: Option<Vec<String>>,
    /// `salt_function_status.filters.states`.
    pub status_states: Option<Vec<String>>,
    /// `health-minions`: `salt_health_minions_total` and a heartbeat for every
    /// accepted key.
    pub health_minions: Option<bool>,
    /// `pki-dir`'s `minions/`: the accepted keys (default: the master's).
    pub minion_keys: Option<PathBuf>,
    /// `<metric>.enabled = false`: metrics never given a series.
    pub disable: Option<Vec<String>>,
}

/// salt-exporter's behaviour, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaltExporterConfig {
    pub minion_label: bool,
    pub ignore_test: bool,
    pub ignore_mock: bool,
    pub status_functions: Vec<String>,
    pub status_states: Vec<String>,
    /// Where the accepted keys are listed, when `health_minions` is on.
    pub minion_keys: Option<PathBuf>,
    pub disabled: Vec<String>,
}

impl SaltExporterConfig {
    pub fn enabled(&self, metric: &str) -> bool {
        !self.disabled.iter().any(|d| d == metric)
    }
}

/// Resolves the section (given only with `salt_exporter_compat = true`);
/// `master_pki_dir` is the master's `pki_dir`, when its config was read.
pub fn resolve(
    section: &SaltExporterSection,
    master_pki_dir: Option<PathBuf>,
    errors: &mut Vec<String>,
) -> SaltExporterConfig {
    let mut patterns = |list: &Option<Vec<String>>, default: &str, key: &str| {
        let list = list.clone().unwrap_or_else(|| vec![default.to_owned()]);
        for pattern in &list {
            let inner = pattern.trim_start_matches('*').trim_end_matches('*');
            if inner.contains('*') {
                errors.push(format!(
                    "metrics.salt_exporter.{key}: {pattern:?} has a `*` inside; salt-exporter matches `*` only at either end"
                ));
            }
        }
        list
    };
    let status_functions = patterns(
        &section.status_functions,
        "state.highstate",
        "status_functions",
    );
    let status_states = patterns(&section.status_states, "highstate", "status_states");
    let disabled = section.disable.clone().unwrap_or_default();
    for name in &disabled {
        if !METRICS.contains(&name.as_str()) {
            errors.push(format!(
                "metrics.salt_exporter.disable: {name:?} is not one of salt-exporter's metrics ({})",
                METRICS.join(", ")
            ));
        }
    }
    let health = section.health_minions.unwrap_or(true);
    SaltExporterConfig {
        minion_label: section.minion_label.unwrap_or(false),
        ignore_test: section.ignore_test.unwrap_or(false),
        ignore_mock: section.ignore_mock.unwrap_or(false),
        status_functions,
        status_states,
        minion_keys: health
            .then(|| {
                section
                    .minion_keys
                    .clone()
                    .or_else(|| master_pki_dir.map(|p| p.join("minions")))
            })
            .flatten(),
        disabled,
    }
}

/// salt-exporter's filter: a value matches a pattern equal to it, `*`, or one
/// with `*` at its start (ends with), end (starts with) or both (contains).
pub fn matches(patterns: &[String], value: &str) -> bool {
    patterns.iter().any(|p| {
        if p == "*" {
            return true;
        }
        match (p.strip_prefix('*'), p.strip_suffix('*')) {
            (Some(rest), Some(_)) => value.contains(&rest[..rest.len() - 1]),
            (Some(suffix), None) => value.ends_with(suffix),
            (None, Some(prefix)) => value.starts_with(prefix),
            (None, None) => value == p,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|i| (*i).to_owned()).collect()
    }

    #[test]
    fn wildcards_match_at_either_end_as_salt_exporter_does() {
        let patterns = list(&["state.high*", "*.sls", "*orch*", "test.ping"]);
        for yes in [
            "state.highstate",
            "state.sls",
            "runner.orchestrate.x",
            "test.ping",
        ] {
            assert!(matches(&patterns, yes), "{yes}");
        }
        for no in ["state.apply", "test.pings", "cmd.run"] {
            assert!(!matches(&patterns, no), "{no}");
        }
        assert!(matches(&list(&["*"]), "anything"));
        assert!(
            !matches(&[], "state.highstate"),
            "an empty list matches nothing"
        );
    }

    #[test]
    fn defaults_are_salt_exporters_and_mistakes_are_listed() {
        let mut errors = Vec::new();
        let config = resolve(
            &SaltExporterSection::default(),
            Some("/etc/salt/pki/master".into()),
            &mut errors,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(config.status_functions, ["state.highstate"]);
        assert_eq!(config.status_states, ["highstate"]);
        assert_eq!(
            config.minion_keys.as_deref(),
            Some(std::path::Path::new("/etc/salt/pki/master/minions"))
        );
        assert!(!config.minion_label && config.enabled("salt_responses_total"));

        let section = SaltExporterSection {
            status_states: Some(list(&["high*state"])),
            disable: Some(list(&["salt_responses_total", "salt_nope"])),
            health_minions: Some(false),
            ..SaltExporterSection::default()
        };
        let config = resolve(&section, Some("/p".into()), &mut errors);
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(errors[0].contains("high*state") && errors[1].contains("salt_nope"));
        assert!(!config.enabled("salt_responses_total"));
        assert_eq!(config.minion_keys, None, "health_minions off lists no keys");
    }
}
