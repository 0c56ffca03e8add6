//! Fingerprints: one failure, whatever minion or job it happened on, gets one
//! fingerprint. It hashes the failing unit (SLS, state id, function) and its
//! message with what varies between minions and runs replaced by placeholders:
//! URLs, IP addresses, hex ids and UUIDs, absolute paths, host names, numbers.

use std::sync::LazyLock;

use regex::Regex;

use crate::record::stable_hash;

/// Ordered: a URL holds a host, a path and numbers, so it goes first.
static VARYING: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (r#"\b[a-z][a-z0-9+.-]*://[^\s'"]+"#, "<url>"),
        (r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", "<ip>"),
        (
            r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
            "<id>",
        ),
        (r"(?i)\b[0-9a-f]{7,}\b", "<hex>"),
        (r"(?:~|\.{1,2})?/[^\s'\x22:;,)]+", "<path>"),
        (
            r"(?i)\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:com|net|org|io|local|internal|lan|corp|[a-z]{2})\b",
            "<host>",
        ),
        (r"\d+", "<n>"),
    ]
    .into_iter()
    .map(|(pattern, placeholder)| (Regex::new(pattern).expect("pattern compiles"), placeholder))
    .collect()
});

/// `text` with what varies between minions and runs replaced.
pub fn normalise(text: &str) -> String {
    let mut text = text.to_owned();
    for (pattern, placeholder) in VARYING.iter() {
        if let std::borrow::Cow::Owned(replaced) = pattern.replace_all(&text, *placeholder) {
            text = replaced;
        }
    }
    text
}

/// A short hex hash of the parts (64 of the stable hash's bits: collisions among
/// one master's failures are not a concern at that width).
pub fn fingerprint(parts: &[&str]) -> String {
    let hash = stable_hash(parts.iter().map(|p| p.as_bytes()));
    format!("{:016x}", hash as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minion_specific_parts_are_replaced() {
        let web1 = "Unable to manage file: /tmp/slA/m/web1/cache/labout/x.txt: mode 0644 on 10.0.0.12 failed after 3 tries";
        let db1 = "Unable to manage file: /tmp/slA/m/db1/cache/labout/x.txt: mode 0644 on 10.0.0.7 failed after 4 tries";
        assert_eq!(normalise(web1), normalise(db1));
        assert_eq!(
            normalise(web1),
            "Unable to manage file: <path>: mode <n> on <ip> failed after <n> tries"
        );
    }

    #[test]
    fn urls_hosts_and_ids_are_replaced() {
        assert_eq!(
            normalise("Failed to fetch http://deb.example.org/a.deb from mirror3.example.org"),
            "Failed to fetch <url> from <host>"
        );
        assert_eq!(
            normalise("container 3f2a9c1d failed, request 123e4567-e89b-12d3-a456-426614174000"),
            "container <hex> failed, request <id>"
        );
    }

    #[test]
    fn words_and_state_names_stay() {
        assert_eq!(
            normalise("One or more requisite failed: fail.lab_failing_cmd"),
            "One or more requisite failed: fail.lab_failing_cmd"
        );
        assert_eq!(
            normalise("Command \"exit 1\" run"),
            "Command \"exit <n>\" run"
        );
    }

    #[test]
    fn fingerprints_are_stable_and_separate_parts() {
        assert_eq!(fingerprint(&["a", "b"]), fingerprint(&["a", "b"]));
        assert_ne!(fingerprint(&["ab", "c"]), fingerprint(&["a", "bc"]));
        assert_eq!(fingerprint(&["a"]).len(), 16);
    }
}
