//! `[redact]`: what is masked before anything leaves saltsight (docs/security.md).
//! As written, then resolved; the patterns are compiled by `record::redact`, which
//! reports a bad one here through [`check_pattern`].

use std::collections::BTreeMap;

use serde::Deserialize;

/// Map keys and `key=value` names whose values are secrets (case-insensitive, a
/// regex alternation; a key matches when it contains one).
pub const DEFAULT_KEY_PATTERN: &str =
    "pass|passwd|password|secret|token|api_key|apikey|private|credential|auth";

/// Functions whose returns are secrets by design: only a summary is kept.
pub const DEFAULT_SECRET_FUNCTIONS: &[&str] = &[
    "pillar.*",
    "config.*",
    "runner.pillar.*",
    "sdb.*",
    "vault.*",
    "wheel.key.gen*",
];

pub const DEFAULT_MAX_FIELD_BYTES: usize = 4096;
/// A cut text ends in a marker of about 40 bytes; a smaller cap would be all marker.
pub const MIN_FIELD_BYTES: usize = 256;
/// Extra patterns are metric label values: a few, named.
pub const MAX_EXTRA_PATTERNS: usize = 32;

#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RedactSection {
    /// Key names whose values are masked, as a regex (case-insensitive).
    pub key_pattern: Option<String>,
    /// Function globs whose returns are replaced by a summary.
    pub secret_functions: Option<Vec<String>>,
    /// Every text field is cut to this many bytes.
    pub max_field_bytes: Option<u64>,
    /// More free-text patterns to mask, name → regex.
    pub extra_patterns: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedactConfig {
    pub key_pattern: String,
    pub secret_functions: Vec<String>,
    pub max_field_bytes: usize,
    /// (name, regex), in name order.
    pub extra_patterns: Vec<(String, String)>,
}

impl Default for RedactConfig {
    fn default() -> Self {
        Self {
            key_pattern: DEFAULT_KEY_PATTERN.into(),
            secret_functions: DEFAULT_SECRET_FUNCTIONS
                .iter()
                .map(|f| (*f).to_owned())
                .collect(),
            max_field_bytes: DEFAULT_MAX_FIELD_BYTES,
            extra_patterns: Vec::new(),
        }
    }
}

/// Whether `pattern` compiles, within the size a per-field scan can afford.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map(|_| ())
        .map_err(|e| e.to_string())
}

pub fn resolve(section: &RedactSection, errors: &mut Vec<String>) -> RedactConfig {
    let defaults = RedactConfig::default();
    let key_pattern = match &section.key_pattern {
        None => defaults.key_pattern,
        Some(p) if p.trim().is_empty() => {
            errors.push("redact.key_pattern is empty; it would match every key".into());
            defaults.key_pattern
        }
        Some(p) => {
            if let Err(e) = check_pattern(p) {
                errors.push(format!("redact.key_pattern is not a valid regex: {e}"));
            }
            p.clone()
        }
    };
    let max_field_bytes = section
        .max_field_bytes
        .unwrap_or(DEFAULT_MAX_FIELD_BYTES as u64);
    if max_field_bytes < MIN_FIELD_BYTES as u64 || max_field_bytes > 64 << 20 {
        errors.push(format!(
            "redact.max_field_bytes is {max_field_bytes}; it must be between {MIN_FIELD_BYTES} and 67108864"
        ));
    }
    let extra = section.extra_patterns.clone().unwrap_or_default();
    if extra.len() > MAX_EXTRA_PATTERNS {
        errors.push(format!(
            "redact.extra_patterns has {} patterns; at most {MAX_EXTRA_PATTERNS} (each name is a metric label value)",
            extra.len()
        ));
    }
    for (name, pattern) in &extra {
        let label_ok = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !label_ok {
            errors.push(format!(
                "redact.extra_patterns: the name {name:?} must be 1-64 of a-z, 0-9 and _ (it is a metric label value)"
            ));
        }
        if let Err(e) = check_pattern(pattern) {
            errors.push(format!(
                "redact.extra_patterns.{name} is not a valid regex: {e}"
            ));
        } else if regex::Regex::new(pattern).is_ok_and(|r| r.is_match("")) {
            errors.push(format!(
                "redact.extra_patterns.{name} matches the empty string; it would mask nothing useful"
            ));
        }
    }
    let secret_functions = section
        .secret_functions
        .clone()
        .unwrap_or(defaults.secret_functions);
    for f in &secret_functions {
        if f.trim().is_empty() {
            errors.push("redact.secret_functions has an empty glob".into());
        }
    }
    RedactConfig {
        key_pattern,
        secret_functions,
        max_field_bytes: max_field_bytes as usize,
        extra_patterns: extra.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_resolve_without_errors() {
        let mut errors = Vec::new();
        let config = resolve(&RedactSection::default(), &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(config, RedactConfig::default());
    }

    #[test]
    fn every_mistake_is_named() {
        let section = RedactSection {
            key_pattern: Some("(unclosed".into()),
            secret_functions: Some(vec![" ".into()]),
            max_field_bytes: Some(10),
            extra_patterns: Some(BTreeMap::from([
                ("Bad Name".into(), "x+".into()),
                ("empty".into(), "a*".into()),
                ("broken".into(), "[".into()),
            ])),
        };
        let mut errors = Vec::new();
        resolve(&section, &mut errors);
        let text = errors.join("\n");
        for needle in [
            "redact.key_pattern is not a valid regex",
            "empty glob",
            "max_field_bytes is 10",
            "\"Bad Name\"",
            "extra_patterns.empty matches the empty string",
            "extra_patterns.broken is not a valid regex",
        ] {
            assert!(text.contains(needle), "{needle:?} not in:\n{text}");
        }
    }
}
