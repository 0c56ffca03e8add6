//! Durations as operators write them: `250ms`, `5s`, `10m`, `1h`, `1d`, or combined
//! (`1m30s`).

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

/// Parses a duration; the error says what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!(
                "{text:?} is not a duration (expected e.g. 250ms, 5s, 10m, 1h)"
            ));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("{text:?}: number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            "" => return Err(format!("{text:?} lacks a unit (ms, s, m, h, d)")),
            other => {
                return Err(format!(
                    "{text:?} has an unknown unit {other:?} (ms, s, m, h, d)"
                ));
            }
        };
        total = total.saturating_add(unit);
        rest = &rest[unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_combinations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration(" 2h "), Ok(Duration::from_secs(7200)));
        for bad in ["", "5", "s", "5 s", "5x", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
