//! Durations as operators write them: `250ms`, `5s`, `10m`, `1h`, `1d`, or combined
//! (`1m30s`), parsed by humantime (systemd's forms, as `journalctl --since` and
//! `RuntimeMaxSec=` take them).

use std::time::Duration;

/// A configured duration that must be above zero: `default` when unset; on a
/// problem, the problem is pushed (named `key`) and `default` returned.
pub fn positive_or(
    key: &str,
    value: Option<&str>,
    default: Duration,
    problems: &mut Vec<String>,
) -> Duration {
    match value.map(parse_duration) {
        None => default,
        Some(Ok(d)) if !d.is_zero() => d,
        Some(Ok(_)) => {
            problems.push(format!("{key} must be above zero"));
            default
        }
        Some(Err(e)) => {
            problems.push(format!("{key}: {e}"));
            default
        }
    }
}

/// Parses a duration as humantime does (`250ms`, `5s`, `10m`, `1h`, `1d`, `1w`,
/// combined as `1m30s` or `1h 30m`; a number needs its unit); the error says
/// what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    if text.starts_with('-') {
        return Err(format!("{text:?} is negative; a duration is at least 0"));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration (expected e.g. 250ms, 5s, 10m, 1h): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_combinations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration(" 2h "), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        for bad in ["", "5", "s", "5x", "-1s", "1.5.h"] {
            let e = parse_duration(bad).expect_err(bad);
            assert!(
                e.contains(&format!("{:?}", bad.trim())) || bad.is_empty(),
                "{e}"
            );
        }
    }
}
