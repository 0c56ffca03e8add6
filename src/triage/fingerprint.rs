//! Fingerprints: one failure, whatever minion or job it happened on, gets one
//! fingerprint, and two different failures get two.
//!
//! A state failure whose cause a rule named hashes the failing unit (function,
//! SLS, state id) with the category, the rule and the package: the wording is
//! left out, so tool versions (curl 7 and 8, OpenSSL 1.1 and 3) and per-minion
//! details do not split a group, and the rule keeps a refused connection and a
//! name that does not resolve apart under one `cmd.run`. A failure no rule
//! explains (`command_exit`, `other`) hashes its comment normalised, and for a
//! command its exit code and the last line of its stderr, normalised.
//!
//! Normalised: what varies between minions and runs replaced by placeholders
//! (systemd scope units, traceback frames, dates and relative times, sizes and
//! durations, addresses, UUIDs, URLs, IPs, hex ids, paths, host names, numbers).

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::patterns::ascii;
use crate::record::{Classification, stable_hash};

const MONTH: &str = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)";

/// A pattern and what replaces its matches.
type Replacement = (Regex, &'static str);

/// Ordered: a scope banner, a traceback frame and a date hold numbers; a URL
/// holds a host, a path and numbers; numbers go last. Compiled with ASCII
/// classes ([`ascii`]): 1.7 MB of memory with Unicode ones, 0.4 MB.
fn varying_patterns() -> Vec<(String, &'static str)> {
    let weekday_date = format!(
        r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]* (?:\d{{1,2}} )?{MONTH}[a-z]* (?:\d{{1,2}} )?(?:\d{{4}} )?\d{{1,2}}:\d\d:\d\d(?: [AP]M)?(?: [A-Z]{{2,5}})?(?: \d{{4}})?"
    );
    let salt_date = format!(r"\d{{4}}, {MONTH} \d\d \d\d:\d\d:\d\d\.\d+");
    [
        // systemd-run's banner in apt/yum/zypper output: a new unit every run.
        (r"Running scope as unit:? run-[A-Za-z0-9]+\.scope\.?", ""),
        // Traceback frames: install paths and line numbers differ by packaging.
        (r#"File "[^"]+", line \d+, in [^\n]*\n(?:[ \t]+[^\n]*\n)*"#, ""),
        (r"\d+ days?, \d+:\d\d:\d\d", "<dur>"),
        (&weekday_date, "<date>"),
        (&salt_date, "<date>"),
        (
            r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?",
            "<date>",
        ),
        (r"\b\d+:\d\d:\d\d\b", "<dur>"),
        (r" after \d+ ms", ""),
        (r"\b\d+(?:\.\d+)? ?(?:[kKMGT]i?)?B(?:/s)?\b", "<size>"),
        (r"\b\d+ (?:milliseconds|ms|seconds|secs?)\b", "<dur>"),
        (r"It is held by process \d+ \([^)]*\)", "It is held by process <pid>"),
        (
            r"(?i:Name or service not known|Temporary failure in name resolution|nodename nor servname provided, or not known|No address associated with hostname|Name does not resolve)",
            "<resolve-error>",
        ),
        (r"\[Errno -\d+\] <resolve-error>", "<resolve-error>"),
        (
            r"(?i:Couldn't connect to server|Could not connect to server|Connection refused)",
            "<connect-error>",
        ),
        (
            r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+: Permission denied \(",
            "Permission denied (",
        ),
        (r"self signed certificate", "self-signed certificate"),
        (r"[‘’]", "'"),
        (r"0x[0-9A-Fa-f]+", "<addr>"),
        (
            r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
            "<id>",
        ),
        (r#"\b[a-z][a-z0-9+.-]*://[^\s'"]+"#, "<url>"),
        (r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", "<ip>"),
    ]
    .into_iter()
    .map(|(pattern, placeholder)| (pattern.to_owned(), placeholder))
    .collect()
}

/// After hex ids: paths, host names, numbers, spaces.
fn last_patterns() -> Vec<(String, &'static str)> {
    [
        (r#"(?:~|\.{1,2})?/[^\s'"\x22:;,)\]]+"#, "<path>"),
        (
            r"(?i)\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:com|net|org|io|local|internal|lan|corp|consul|[a-z]{2})\b",
            "<host>",
        ),
        (r"\d+", "<n>"),
        (r"\s+", " "),
    ]
    .into_iter()
    .map(|(pattern, placeholder)| (pattern.to_owned(), placeholder))
    .collect()
}

fn compile(patterns: Vec<(String, &'static str)>, prepare: fn(&str) -> String) -> Vec<Replacement> {
    patterns
        .into_iter()
        .map(|(pattern, placeholder)| {
            let pattern = prepare(&pattern);
            let regex = Regex::new(&pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
            (regex, placeholder)
        })
        .collect()
}

static VARYING: LazyLock<Vec<Replacement>> = LazyLock::new(|| compile(varying_patterns(), ascii));

/// A run of hex digits (7 or more, at least one a digit): commit ids, systemd
/// unit ids after `run-r`, object addresses. No word boundary: `r41e6...` is one.
static HEX: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[0-9A-Fa-f]{7,}").expect("hex"));

static LAST: LazyLock<Vec<Replacement>> = LazyLock::new(|| compile(last_patterns(), ascii));

fn replace(text: &mut String, pattern: &Regex, placeholder: &str) {
    if let Cow::Owned(replaced) = pattern.replace_all(text, placeholder) {
        *text = replaced;
    }
}

/// `text` with what varies between minions and runs replaced.
pub fn normalise(text: &str) -> String {
    normalise_with(&VARYING, &LAST, text)
}

fn normalise_with(varying: &[Replacement], last: &[Replacement], text: &str) -> String {
    let mut text = text.to_owned();
    for (pattern, placeholder) in varying {
        replace(&mut text, pattern, placeholder);
    }
    let hex = HEX.replace_all(&text, |c: &Captures<'_>| {
        let run = &c[0];
        if run.bytes().any(|b| b.is_ascii_digit()) {
            "<hex>".to_owned()
        } else {
            run.to_owned()
        }
    });
    if let Cow::Owned(replaced) = hex {
        text = replaced;
    }
    for (pattern, placeholder) in last {
        replace(&mut text, pattern, placeholder);
    }
    text.trim().to_owned()
}

/// The last non-empty line of `stderr`, normalised ("" without one): what a
/// command's fingerprint keeps of its stderr.
pub fn last_line(stderr: Option<&str>) -> String {
    stderr
        .and_then(|e| e.lines().rev().find(|l| !l.trim().is_empty()))
        .map(normalise)
        .unwrap_or_default()
}

/// A short hex hash of the parts (64 of the stable hash's bits: collisions among
/// one master's failures are not a concern at that width).
pub fn fingerprint(parts: &[&str]) -> String {
    let hash = stable_hash(parts.iter().map(|p| p.as_bytes()));
    format!("{:016x}", hash as u64)
}

/// What identifies a failed state, beyond its classification.
#[derive(Debug, Clone, Copy)]
pub struct StateKey<'a> {
    pub function: &'a str,
    pub sls: &'a str,
    pub state_id: &'a str,
    /// The comment as normalised.
    pub normalised: &'a str,
    pub exit_code: Option<i64>,
    /// The last line of its stderr, normalised (`last_line`).
    pub stderr_line: &'a str,
}

/// Whether a rule named the cause (rather than "it exited non-zero" or nothing).
fn rule_named_the_cause(c: &Classification) -> bool {
    !matches!(c.rule.as_ref(), "command_exit" | "none")
}

/// The fingerprint of a failed state (see the module doc).
pub fn of_state(key: &StateKey<'_>, c: &Classification) -> String {
    let category = c.category.as_str();
    if rule_named_the_cause(c) {
        let package = c.package.as_deref().unwrap_or_default();
        return fingerprint(&[
            "state",
            key.function,
            key.sls,
            key.state_id,
            category,
            &c.rule,
            package,
        ]);
    }
    let exit = key.exit_code.map(|c| c.to_string()).unwrap_or_default();
    fingerprint(&[
        "state",
        key.function,
        key.sls,
        key.state_id,
        category,
        key.normalised,
        &exit,
        key.stderr_line,
    ])
}

/// The fingerprint of a render failure: its category, the SLS (and whether it
/// is a pillar's) and its message normalised (for a refused run: the function
/// that held the minion, its PID, start and jid replaced).
pub fn of_render(sls: Option<&str>, pillar: bool, normalised: &str, c: &Classification) -> String {
    let pillar = if pillar { "pillar" } else { "state" };
    fingerprint(&[
        "render",
        c.category.as_str(),
        pillar,
        sls.unwrap_or_default(),
        normalised,
    ])
}

#[cfg(test)]
mod tests;
