//! The one gate between what the bus carries and anything saltsight writes.
//!
//! Outputs take [`Redacted`] values only, and only a [`Redactor`] makes one (the
//! one exception, [`Redacted::waived`], is `tail --no-redact` asking for the bus as
//! it is). The rules (docs/security.md):
//!
//! - map keys matching `redact.key_pattern` have their values masked, at any depth
//!   (state-result keys, `mod_|-id_|-name_|-fun`, are walked, not masked);
//! - the `pillar` kwarg is masked whole;
//! - a return of a function that prints secrets by design (`pillar.*`,
//!   `config.*`, ...) is replaced by a summary;
//! - free text (values, keys, tags) is scanned for credentials in URLs, `-p<secret>`
//!   and `--password=` flags, `key=value` / `key: value` with a secret key,
//!   bearer and `Authorization` values, PEM private keys, AWS access key ids, and
//!   the configured extra patterns: the match is masked, the text around it kept;
//! - every text is cut to `redact.max_field_bytes`, ending with the length it had.
//!
//! Redaction is idempotent: each text is redacted until it no longer changes (at
//! most three rounds, else it is masked whole), so redacting again changes nothing.
//! Every rule counts how often it fired; no value is ever kept.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use serde_json::{Map, Value};

use super::Record;
use crate::config::glob::Glob;
use crate::config::redact::RedactConfig;
use crate::fifo::FifoMap;

/// What a masked value becomes.
pub const MASK: &str = "[redacted]";

/// The built-in rules, in counter order; extra patterns follow under their names.
pub const RULES: [&str; 10] = [
    "key",
    "pillar",
    "function_return",
    "url_credentials",
    "password_flag",
    "key_value",
    "auth_header",
    "private_key",
    "aws_access_key",
    "field_cap",
];
const KEY: usize = 0;
const PILLAR: usize = 1;
const FUNCTION_RETURN: usize = 2;
const URL: usize = 3;
const FLAG: usize = 4;
const KEY_VALUE: usize = 5;
const AUTH: usize = 6;
const PEM: usize = 7;
const AWS: usize = 8;
const FIELD_CAP: usize = 9;

/// A value that went through the [`Redactor`] (or that an operator asked to see
/// unredacted, locally). Outputs accept nothing else.
#[derive(Debug, Clone, PartialEq)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    pub fn get(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::Deref for Redacted<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// An event as `tail` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventJson {
    pub tag: String,
    pub data: Value,
}

impl Redacted<EventJson> {
    /// The event as the bus carried it: `tail --no-redact` only (an operator at
    /// the master's own terminal).
    pub fn waived(tag: &str, data: Value) -> Self {
        Redacted(EventJson {
            tag: tag.to_owned(),
            data,
        })
    }
}

#[derive(Debug, thiserror::Error)]
#[error("redact.{what} is not a valid regex: {source}")]
pub struct RedactError {
    what: String,
    source: regex::Error,
}

/// A text pattern; its groups named `s...` (`s`, `s2`...) are masked, or the
/// whole match without one.
struct Pattern {
    rule: usize,
    regex: Regex,
    groups: Vec<usize>,
}

impl Pattern {
    fn new(rule: usize, regex: Regex) -> Self {
        let groups = regex
            .capture_names()
            .enumerate()
            .filter(|(_, n)| n.is_some_and(|n| n.starts_with('s')))
            .map(|(i, _)| i)
            .collect();
        Pattern {
            rule,
            regex,
            groups,
        }
    }
}

pub(super) struct Inner {
    /// This redactor's number ([`clean::redactor_id`]).
    id: u64,
    key: Regex,
    secret_functions: Vec<Glob>,
    max_field_bytes: usize,
    /// One entry per pattern: a text none matches is left at one scan.
    set: RegexSet,
    /// Extra patterns are configured: [`may_match`] knows the built-ins only.
    extras: bool,
    patterns: Vec<Pattern>,
    names: Vec<String>,
    counts: Vec<AtomicU64>,
    /// What the rules made of the texts seen lately (the same comment, stderr
    /// or commit on 500 minions is scanned once).
    memo: Mutex<FifoMap<Settled>>,
    memo_stats: MemoStats,
    /// What redaction made of the shared parts seen lately, by address (a
    /// job's correlation is in 500 records, scrubbed once).
    shared: Mutex<shared::ScrubbedParts>,
}

/// Texts remembered at most, and the longest remembered: a full memo holds
/// well under 1 MiB (each text is kept as its key, in the order, and settled).
pub const MEMO_TEXTS: usize = 256;
pub const MEMO_TEXT_MAX: usize = 1024;

/// A text redacted once: what it became (`None`: unchanged) and the rules that
/// fired on it, replayed into the counts each time it is seen again.
struct Settled {
    text: Option<Box<str>>,
    tally: Tally,
}

/// The rules that fired while redacting one text, with how often.
type Tally = Vec<(usize, u64)>;

/// How the memo did.
#[derive(Default)]
struct MemoStats {
    recalled: AtomicU64,
    forgotten: AtomicU64,
}

/// Redacts records, events and log lines by the configured rules. Cheap to clone
/// (shared), counts shared too.
#[derive(Clone)]
pub struct Redactor(Arc<Inner>);

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("rules", &self.0.names)
            .finish_non_exhaustive()
    }
}

/// Which rules fired for one value, as bits (built-ins and at most 32 extras
/// fit in 64).
#[derive(Default)]
pub(super) struct Fired {
    bits: u64,
    /// Every rule fired with how often, kept while a shared part is scrubbed:
    /// replayed for each later record holding it, so the counts are the same.
    tally: Option<Tally>,
}

impl Fired {
    /// One that keeps its tally.
    fn tallied() -> Self {
        Self {
            bits: 0,
            tally: Some(Tally::new()),
        }
    }
}

fn build(what: &str, pattern: &str) -> Result<Regex, RedactError> {
    RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|source| RedactError {
            what: what.to_owned(),
            source,
        })
}

impl Redactor {
    pub fn new(config: &RedactConfig) -> Result<Self, RedactError> {
        let key = build("key_pattern", &format!("(?i:{})", config.key_pattern))?;
        let k = &config.key_pattern;
        // ASCII word boundaries: Unicode ones make the lazy DFA give up on
        // non-ASCII text.
        let builtin: [(usize, String); 9] = [
            (
                URL,
                r#"(?i)(?-u:\b)(?P<proto>[a-z][a-z0-9+.\-]*)://(?P<s>[^/?#\s@"']+)@"#.into(),
            ),
            // `-p<secret>` as mysql takes it; 4 characters at least, so that
            // bundled short flags (`cp -pr`, `tar -pxzf`) are not taken for one.
            (FLAG, r#"(?:^|[\s'"=])-p(?P<s>[^\s'"\-][^\s'"]{3,})"#.into()),
            (
                FLAG,
                r#"(?i)(?:^|[\s'"])--?(?:password|passwd|pass|secret|token|api-?key)(?:=|\s+)(?P<s>[^\s'"]+)"#
                    .into(),
            ),
            (
                KEY_VALUE,
                format!(
                    r#"(?i)(?-u:\b)[a-z0-9_.\-]*(?:{k})\\?["']?\s*[=:]\s*(?:\\?"(?P<s>[^"\\]+)\\?"|'(?P<s2>[^']+)'|(?P<s3>[^\s"',;&}}\]]+))"#
                ),
            ),
            (
                AUTH,
                r"(?i)(?-u:\b)bearer\s+(?P<s>[a-z0-9._~+/\-]+=*)".into(),
            ),
            (
                AUTH,
                r#"(?i)authorization["']?\s*[:=]\s*["']?(?:[a-z]+\s+)?(?P<s>[^\s"',;]+)"#.into(),
            ),
            (
                PEM,
                r#"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?P<s>[^"]*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|"|\z)"#
                    .into(),
            ),
            (
                AWS,
                r"(?-u:\b)(?P<s>(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16})(?-u:\b)"
                    .into(),
            ),
            (
                AWS,
                r#"(?i)aws_?secret_?access_?key["']?\s*[=:]\s*["']?(?P<s>[A-Za-z0-9/+=]{40})"#.into(),
            ),
        ];
        let mut names: Vec<String> = RULES.iter().map(|r| (*r).to_owned()).collect();
        let mut patterns = Vec::new();
        for (rule, text) in builtin {
            let regex = build(&format!("rule {}", RULES[rule]), &text)?;
            patterns.push(Pattern::new(rule, regex));
        }
        for (name, text) in &config.extra_patterns {
            let regex = build(&format!("extra_patterns.{name}"), text)?;
            if regex.is_match(MASK) {
                return Err(RedactError {
                    what: format!("extra_patterns.{name}"),
                    source: regex::Error::Syntax(format!(
                        "it matches the mask {MASK:?} itself, so redacting could never settle"
                    )),
                });
            }
            patterns.push(Pattern::new(names.len(), regex));
            names.push(name.clone());
        }
        let set = RegexSetBuilder::new(patterns.iter().map(|p| p.regex.as_str()))
            .size_limit(8 << 20)
            .build()
            .map_err(|source| RedactError {
                what: "patterns (together)".into(),
                source,
            })?;
        let counts = names.iter().map(|_| AtomicU64::new(0)).collect();
        Ok(Redactor(Arc::new(Inner {
            id: clean::redactor_id(),
            memo: Mutex::new(FifoMap::new(MEMO_TEXTS)),
            memo_stats: MemoStats::default(),
            shared: Mutex::new(shared::scrubbed_parts()),
            key,
            secret_functions: config
                .secret_functions
                .iter()
                .map(|g| Glob::new(g))
                .collect(),
            max_field_bytes: config.max_field_bytes,
            set,
            extras: !config.extra_patterns.is_empty(),
            patterns,
            names,
            counts,
        })))
    }

    /// Every rule's name and how often it fired, for `/metrics`.
    pub fn counts(&self) -> impl Iterator<Item = (&str, u64)> {
        let inner = &self.0;
        inner
            .names
            .iter()
            .zip(&inner.counts)
            .map(|(n, c)| (n.as_str(), c.load(Relaxed)))
    }

    /// Texts whose redaction was read from the memo, and texts forgotten to
    /// keep it within [`MEMO_TEXTS`].
    pub fn memo_counts(&self) -> (u64, u64) {
        let stats = &self.0.memo_stats;
        (stats.recalled.load(Relaxed), stats.forgotten.load(Relaxed))
    }

    /// The gate for records. Rules that fired are listed in `redacted`.
    pub fn record(&self, mut record: Record) -> Redacted<Record> {
        let mut fired = Fired::default();
        walk::Scrub::scrub(&mut record, &self.0, &mut fired);
        let inner = &self.0;
        for (i, name) in inner.names.iter().enumerate() {
            let bit = 1u64.checked_shl(i as u32).unwrap_or(0);
            if fired.bits & bit != 0 && !record.redacted.contains(name) {
                record.redacted.push(name.clone());
            }
        }
        record.redacted.sort();
        Redacted(record)
    }

    /// The gate for events (`tail`, the demo): returns of secret functions become
    /// a summary, then every key and text is redacted.
    pub fn event(&self, tag: &str, mut data: Value) -> Redacted<EventJson> {
        let inner = &self.0;
        let mut fired = Fired::default();
        let fun = data.get("fun").and_then(Value::as_str).map(str::to_owned);
        if let Some(fun) = fun.filter(|f| inner.secret_function(f)) {
            if let Some(map) = data.as_object_mut() {
                inner.summarise_return(map, &fun, &mut fired);
                if let Some(Value::Object(inner_data)) = map.get_mut("data") {
                    inner.summarise_return(inner_data, &fun, &mut fired);
                }
            }
        }
        inner.value(&mut data, &mut fired, 0);
        let mut tag = tag.to_owned();
        inner.text(&mut tag, &mut fired);
        Redacted(EventJson { tag, data })
    }

    /// Every text is cut to this many bytes.
    pub fn max_field_bytes(&self) -> usize {
        self.0.max_field_bytes
    }

    /// A log line: the text rules, no cap.
    pub fn line<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut tally = Tally::new();
        let scrubbed = self.0.scrub(text, &mut tally);
        self.0.replay(&tally, &mut Fired::default());
        match scrubbed {
            Some(clean) => Cow::Owned(clean),
            None => Cow::Borrowed(text),
        }
    }
}

impl Inner {
    fn fire(&self, rule: usize, n: u64, fired: &mut Fired) {
        // `[redact]` allows 32 extra patterns: 42 rules fit in the 64 bits.
        fired.bits |= 1u64.checked_shl(rule as u32).unwrap_or(0);
        if let Some(c) = self.counts.get(rule) {
            c.fetch_add(n, Relaxed);
        }
        if let Some(tally) = &mut fired.tally {
            tally.push((rule, n));
        }
    }

    /// The rules a text's redaction fired, fired for this value.
    fn replay(&self, tally: &Tally, fired: &mut Fired) {
        for &(rule, n) in tally {
            self.fire(rule, n, fired);
        }
    }

    fn secret_function(&self, fun: &str) -> bool {
        self.secret_functions.iter().any(|g| g.matches(fun))
    }

    fn summarise_return(&self, map: &mut Map<String, Value>, fun: &str, fired: &mut Fired) {
        let Some(ret) = map.get_mut("return") else {
            return;
        };
        let size = match &*ret {
            Value::Object(m) => format!("{} keys", m.len()),
            Value::Array(a) => format!("{} items", a.len()),
            Value::String(s) if s.starts_with("[redacted") => return,
            Value::String(s) => format!("{} bytes", s.len()),
            Value::Null => return,
            _ => "a scalar".into(),
        };
        *ret = Value::String(format!("[redacted: the return of {fun}, {size}]"));
        self.fire(FUNCTION_RETURN, 1, fired);
    }

    /// Masks what the text patterns find; `None` when nothing matched.
    fn scrub(&self, text: &str, tally: &mut Tally) -> Option<String> {
        if !self.extras && !may_match(text) {
            return None;
        }
        let matched = self.set.matches(text);
        if !matched.matched_any() {
            return None;
        }
        let mut current: Option<String> = None;
        for (i, pattern) in self.patterns.iter().enumerate() {
            if !matched.matched(i) {
                continue;
            }
            let source = current.as_deref().unwrap_or(text);
            if let Some((masked, n)) = mask(pattern, source) {
                tally.push((pattern.rule, n));
                current = Some(masked);
            }
        }
        current
    }

    /// One round: scrub, then cut.
    fn round(&self, text: &str, original_len: usize, tally: &mut Tally) -> Option<String> {
        let scrubbed = self.scrub(text, tally);
        let now = scrubbed.as_deref().unwrap_or(text);
        if now.len() <= self.max_field_bytes {
            return scrubbed;
        }
        tally.push((FIELD_CAP, 1));
        Some(cut(now, self.max_field_bytes, original_len))
    }

    /// `text` redacted until it settles (`None`: unchanged), the rules that
    /// fired counted. A text no rule could match costs a byte scan; a short one
    /// that could is read from the memo when it was seen lately.
    pub(super) fn settle(&self, text: &str, fired: &mut Fired) -> Option<String> {
        if !self.extras && !may_match(text) && text.len() <= self.max_field_bytes {
            return None;
        }
        // A poisoned memo (a panic while it was held) is only a cache: go on.
        let memo = || self.memo.lock().unwrap_or_else(|e| e.into_inner());
        let remembered = text.len() <= MEMO_TEXT_MAX;
        if remembered {
            if let Some(known) = memo().get(text) {
                self.memo_stats.recalled.fetch_add(1, Relaxed);
                self.replay(&known.tally, fired);
                return known.text.as_deref().map(str::to_owned);
            }
        }
        // The rules run without the memo held: other threads' lines go on.
        let mut tally = Tally::new();
        let settled = self.settle_anew(text, &mut tally);
        self.replay(&tally, fired);
        if remembered {
            let known = Settled {
                text: settled.as_deref().map(Box::from),
                tally,
            };
            let forgotten = memo().insert(text, known);
            self.memo_stats.forgotten.fetch_add(forgotten, Relaxed);
        }
        settled
    }

    /// `text` redacted until it settles, every time. A text that still changes
    /// after three rounds is masked whole.
    fn settle_anew(&self, text: &str, tally: &mut Tally) -> Option<String> {
        let original_len = text.len();
        let mut current: Option<String> = None;
        for _ in 0..3 {
            let now = current.as_deref().unwrap_or(text);
            match self.round(now, original_len, tally) {
                Some(next) => current = Some(next),
                None => return current,
            }
        }
        let now = current.as_deref().unwrap_or(text);
        // A re-check: what it fires is not counted.
        match self.round(now, original_len, &mut Tally::new()) {
            None => current,
            Some(_) => Some(MASK.to_owned()),
        }
    }

    pub(super) fn text(&self, text: &mut String, fired: &mut Fired) {
        if let Some(settled) = self.settle(text, fired) {
            *text = settled;
        }
    }

    pub(super) fn value(&self, value: &mut Value, fired: &mut Fired, depth: usize) {
        match value {
            Value::String(s) => self.text(s, fired),
            Value::Array(items) => {
                for item in items {
                    self.value(item, fired, depth + 1);
                }
            }
            Value::Object(map) => self.map(map, fired, depth),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    fn map(&self, map: &mut Map<String, Value>, fired: &mut Fired, depth: usize) {
        let mut renamed: Vec<(String, String)> = map
            .keys()
            .filter_map(|k| self.settle(k, fired).map(|new| (k.clone(), new)))
            .collect();
        if !renamed.is_empty() {
            renamed.sort();
            for (key, value) in std::mem::take(map) {
                let key = match renamed.binary_search_by(|(old, _)| old.as_str().cmp(&key)) {
                    Ok(i) => renamed[i].1.clone(),
                    Err(_) => key,
                };
                map.insert(key, value);
            }
        }
        for (key, value) in map.iter_mut() {
            let rule = if key == "pillar" {
                Some(PILLAR)
            } else if self.key.is_match(key) && !key.contains("_|-") {
                Some(KEY)
            } else {
                None
            };
            match rule {
                Some(_) if matches!(value, Value::Null | Value::Bool(_)) => {}
                Some(_) if value.as_str() == Some(MASK) => {}
                Some(rule) => {
                    *value = Value::String(MASK.to_owned());
                    self.fire(rule, 1, fired);
                }
                None => self.value(value, fired, depth + 1),
            }
        }
    }
}

/// Whether a built-in pattern could match `text`: each needs one of these
/// triggers (`:` or `=` for URLs, key=value and Authorization; `-` before p, s,
/// t, a or `-` for flags and PEM blocks; `@` for URL userinfo; an AWS key id
/// prefix; `bearer`). Most texts (jids, minion ids, function names) have none,
/// and skip the regex set. A property test holds it to the set.
fn may_match(text: &str) -> bool {
    /// The bytes a trigger starts with: most texts have none, and the scan
    /// reads a byte of this table per byte of text.
    static STARTS: [bool; 256] = {
        let mut starts = [false; 256];
        let mut i = 0;
        let bytes = b":=@-AbB";
        while i < bytes.len() {
            starts[bytes[i] as usize] = true;
            i += 1;
        }
        starts
    };
    let b = text.as_bytes();
    let at = |i: usize, n: usize| b.get(i..i + n).unwrap_or_default();
    (0..b.len()).any(|i| {
        STARTS[usize::from(b[i])]
            && match b[i] {
                b':' | b'=' | b'@' => true,
                b'-' => matches!(
                    b.get(i + 1).map(u8::to_ascii_lowercase),
                    Some(b'p' | b's' | b't' | b'a' | b'-')
                ),
                b'A' => matches!(
                    at(i, 4),
                    b"AKIA" | b"ASIA" | b"AGPA" | b"AIDA" | b"AROA" | b"AIPA" | b"ANPA" | b"ANVA"
                ),
                b'b' | b'B' => at(i + 1, 5).eq_ignore_ascii_case(b"earer"),
                _ => false,
            }
    })
}

/// Masks every match of `pattern` (its group `s`, or all of it) not already the
/// mask; the new text and how many were masked.
fn mask(pattern: &Pattern, text: &str) -> Option<(String, u64)> {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut n = 0;
    let mut span = |start: usize, end: usize, out: &mut String| {
        let value = &text[start..end];
        // `auth: false` in a log line, or the mask itself: nothing to hide.
        let harmless = ["true", "false", "null", "none"]
            .iter()
            .any(|w| value.eq_ignore_ascii_case(w));
        // A span starting at a mask is the mask seen through a narrower class.
        if start == end || text[start..].starts_with(MASK) || harmless {
            return;
        }
        out.push_str(&text[last..start]);
        out.push_str(MASK);
        last = end;
        n += 1;
    };
    if !pattern.groups.is_empty() {
        for caps in pattern.regex.captures_iter(text) {
            if pattern.rule == URL && names_an_ssh_user(&caps) {
                continue;
            }
            for m in pattern.groups.iter().filter_map(|&i| caps.get(i)) {
                span(m.start(), m.end(), &mut out);
            }
        }
    } else {
        for m in pattern.regex.find_iter(text) {
            span(m.start(), m.end(), &mut out);
        }
    }
    if n == 0 {
        return None;
    }
    out.push_str(&text[last..]);
    Some((out, n))
}

/// `ssh://git@host/...`: ssh takes no password in a URL, so a user name alone
/// is not a credential (and the host after it is triage's evidence). A
/// `user:password` pair is, in any scheme; so is a lone token in an HTTP URL
/// (`https://<token>@github.com`).
fn names_an_ssh_user(caps: &regex::Captures<'_>) -> bool {
    let ssh = caps.name("proto").is_some_and(|p| {
        ["ssh", "git+ssh", "ssh+git", "sftp"]
            .iter()
            .any(|s| p.as_str().eq_ignore_ascii_case(s))
    });
    ssh && caps.name("s").is_some_and(|u| !u.as_str().contains(':'))
}

/// `text` cut to at most `max` bytes (on a char boundary), ending with a marker
/// that says how long it was.
fn cut(text: &str, max: usize, original_len: usize) -> String {
    let marker = format!(" [saltsight cut {original_len} bytes]");
    let kept = crate::plain::within(text, max.saturating_sub(marker.len()));
    let mut out = String::with_capacity(kept.len() + marker.len());
    out.push_str(kept);
    out.push_str(&marker);
    out
}

mod clean;
mod shared;
mod walk;

#[cfg(test)]
mod tests;
