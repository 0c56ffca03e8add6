//! How saltsight says a duration, a time, a list of names and a cut text to a
//! person: once, for every command's tables, `top`, the readable `run` lines
//! and the demo. Machine-readable output (JSON, metrics) never goes through
//! here.

/// Milliseconds as a person reads them: `850ms`, `12.3s`, `4m05s`, `1h02m`.
pub fn duration_ms(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..60 => format!("{}.{}s", s, ms % 1000 / 100),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// An age in at most four characters, for a narrow column: `45s`, `12m`,
/// `10h`, `3d`, `11w`.
pub fn age(micros: i64) -> String {
    let s = micros.max(0) / 1_000_000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        86_400..864_000 => format!("{}d", s / 86_400),
        _ => format!("{}w", s / 604_800),
    }
}

/// `text` in at most `width` characters: whole when it fits, else its start
/// and end around a `…` (a jid keeps its day and its last digits).
pub fn elide_middle(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width || width < 3 {
        return chars.iter().take(width).collect();
    }
    let head = (width - 1) / 2 + (width - 1) % 2;
    let tail = width - 1 - head;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// Items joined by `, ` in at most `width` characters, whole items only:
/// what does not fit is counted (`2 no_response, +1`).
pub fn fitted(items: &[String], width: usize) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        let sep = if out.is_empty() { "" } else { ", " };
        let rest = items.len() - i - 1;
        let more = if rest > 0 {
            format!(", +{rest}")
        } else {
            String::new()
        };
        let fits =
            out.chars().count() + sep.len() + item.chars().count() + more.chars().count() <= width;
        if !fits {
            let left = items.len() - i;
            let tail = if out.is_empty() {
                format!("+{left}")
            } else {
                format!(", +{left}")
            };
            out.push_str(&tail);
            return out;
        }
        out.push_str(sep);
        out.push_str(item);
    }
    out
}

/// [`duration_ms`] of microseconds (a negative span reads `0ms`).
pub fn duration_micros(micros: i64) -> String {
    duration_ms(u64::try_from(micros.max(0) / 1000).unwrap_or(0))
}

/// A record's time (`2026-11-24T03:10:00.123456Z`) as `2026-11-24 03:10:00`.
pub fn when(at: &str) -> String {
    at.get(..19)
        .map_or_else(|| at.to_owned(), |t| t.replace('T', " "))
}

/// A list of names, the first `max` and how many more: `a, b and 3 more`.
pub fn names(list: &[String], max: usize) -> String {
    let shown: Vec<&str> = list.iter().take(max).map(String::as_str).collect();
    match list.len().saturating_sub(max) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// The first line of `text` that says something, trimmed, at most `max`
/// characters, with `…` when anything was left out (the rest of the line, or
/// lines after it).
/// The longest start of `text` of at most `max_bytes` bytes that ends on a
/// character boundary: every byte limit on a text is cut here.
pub fn within(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

pub fn cut(text: &str, max: usize) -> String {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let more_lines = text.trim().lines().count() > 1;
    if first.chars().count() <= max && !more_lines {
        return first.to_owned();
    }
    let kept: String = first.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_limit_cuts_on_a_character_boundary() {
        assert_eq!(within("héllo", 2), "h");
        assert_eq!(within("héllo", 3), "hé");
        assert_eq!(within("abc", 10), "abc");
        assert_eq!(within("abc", 0), "");
    }

    #[test]
    fn narrow_columns_keep_what_matters() {
        assert_eq!(age(45_000_000), "45s");
        assert_eq!(age(641 * 60 * 1_000_000), "10h");
        assert_eq!(age(3 * 86_400 * 1_000_000), "3d");
        assert_eq!(
            elide_middle("20261207043319530601", 20),
            "20261207043319530601"
        );
        assert_eq!(elide_middle("20261207043319530601", 13), "202612…530601");
        let reasons = vec!["2 no_response".to_string(), "1 not_sent".to_string()];
        assert_eq!(fitted(&reasons, 40), "2 no_response, 1 not_sent");
        assert_eq!(fitted(&reasons, 18), "2 no_response, +1");
        assert_eq!(fitted(&reasons, 5), "+2");
        for width in 2..30 {
            let fit = fitted(&reasons, width);
            assert!(fit.chars().count() <= width, "{width}: {fit:?}");
            for part in fit.split(", ") {
                assert!(
                    part.starts_with('+') || reasons.iter().any(|r| r == part),
                    "{part:?} cut"
                );
            }
        }
    }

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(duration_ms(45), "45ms");
        assert_eq!(duration_ms(12_345), "12.3s");
        assert_eq!(duration_ms(61_500), "1m01s");
        assert_eq!(duration_ms(185_000), "3m05s");
        assert_eq!(duration_ms(3_720_000), "1h02m");
        assert_eq!(duration_micros(-5), "0ms");
        assert_eq!(duration_micros(12_345_000), "12.3s");
    }

    #[test]
    fn lists_of_names_end_with_how_many_more() {
        let many: Vec<String> = (0..8).map(|i| format!("web{i}")).collect();
        assert_eq!(names(&many, 5), "web0, web1, web2, web3, web4 and 3 more");
        assert_eq!(names(&many[..2], 5), "web0, web1");
    }

    #[test]
    fn a_long_text_is_cut_to_its_first_line() {
        let long = format!("\n  {}\nsecond line", "x".repeat(300));
        let shown = cut(&long, 100);
        assert_eq!(shown.chars().count(), 100);
        assert!(shown.ends_with('…') && !shown.contains("second"));
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("one\ntwo", 10), "one…");
        assert_eq!(when("2026-11-24T03:10:00.123456Z"), "2026-11-24 03:10:00");
    }
}
