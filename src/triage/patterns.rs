//! An ordered list of regexes read as one: a `RegexSet` says in one pass over
//! a text which of them match it, and a pattern's own `Regex` (for its
//! captures) is compiled the first time it matches.
//!
//! Compiled up front, the rule table's ~90 regexes and the evidence hints took
//! 4.8 MB at the load test's peak (one-pass DFAs, prefilters, NFAs: a heap
//! profile of the failing mix), though a fleet's failures match a handful of
//! them. The set is one automaton for all of them.
//!
//! Triage's patterns are written with Perl's classes (`\d`, `\s`, `\b`,
//! `\w`) and case folding, to be read, and compiled with ASCII ones
//! ([`ascii`]): Unicode's digit and word tables made the fingerprint's 26
//! patterns 1.7 MB of memory, ASCII ones 0.4 MB. A text all ASCII reads the
//! same either way, and a test runs the triage corpus through both.

use std::sync::OnceLock;

use regex::{Regex, RegexSet, RegexSetBuilder};

/// A set's compiled size and lazy DFA cache, at most (the regex crate's
/// default, 10 MiB, is too small for the rule table's ~90 patterns at once).
const SET_SIZE_LIMIT: usize = 64 << 20;

/// `pattern` with its Perl classes (`\d \s \w \b` and their negations) and
/// its case folding (`(?i)`) made ASCII. Digits, spaces and letters outside
/// ASCII are then characters like any other.
pub fn ascii(pattern: &str) -> String {
    const SPACE: &str = r"\t\n\x0B\x0C\r ";
    const WORD: &str = "0-9A-Za-z_";
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str("[0-9]"),
            Some('D') => out.push_str("[^0-9]"),
            Some('s') => out.push_str(&format!("[{SPACE}]")),
            Some('S') => out.push_str(&format!("[^{SPACE}]")),
            Some('w') => out.push_str(&format!("[{WORD}]")),
            Some('W') => out.push_str(&format!("[^{WORD}]")),
            Some('b') => out.push_str(r"(?-u:\b)"),
            Some('B') => out.push_str(r"(?-u:\B)"),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out.replace("(?i)", "(?i-u)").replace("(?i:", "(?i-u:")
}

pub struct Patterns {
    set: RegexSet,
    written: Vec<&'static str>,
    /// What makes a pattern as written the pattern compiled ([`ascii`]).
    prepare: fn(&str) -> String,
    compiled: Vec<OnceLock<Regex>>,
}

impl Patterns {
    /// The patterns, in their order; an error names the first that does not
    /// compile.
    pub fn new(patterns: Vec<&'static str>) -> Result<Self, regex::Error> {
        Self::compiled_as(patterns, ascii)
    }

    fn compiled_as(
        patterns: Vec<&'static str>,
        prepare: fn(&str) -> String,
    ) -> Result<Self, regex::Error> {
        let set = RegexSetBuilder::new(patterns.iter().map(|p| prepare(p)))
            .size_limit(SET_SIZE_LIMIT)
            .dfa_size_limit(SET_SIZE_LIMIT)
            .build()?;
        Ok(Self {
            set,
            compiled: patterns.iter().map(|_| OnceLock::new()).collect(),
            written: patterns,
            prepare,
        })
    }

    pub fn len(&self) -> usize {
        self.written.len()
    }

    pub fn is_empty(&self) -> bool {
        self.written.is_empty()
    }

    /// Which patterns match each of `texts`: `[text][pattern]`.
    pub fn matches(&self, texts: &[&str]) -> Vec<regex::SetMatches> {
        texts.iter().map(|t| self.set.matches(t)).collect()
    }

    /// Pattern `i`'s own regex, compiled the first time it is asked for.
    pub fn regex(&self, i: usize) -> &Regex {
        self.compiled[i].get_or_init(|| {
            // The set compiled it, with a larger size limit: alone it is
            // smaller still (every pattern is compiled alone in a test).
            Regex::new(&(self.prepare)(self.written[i]))
                .expect("a pattern the set compiled compiles alone")
        })
    }

    /// How many patterns have their own regex compiled.
    #[cfg(test)]
    pub fn compiled(&self) -> usize {
        self.compiled.iter().filter(|c| c.get().is_some()).count()
    }

    /// Asserts that each of `texts` matches the same patterns, with the same
    /// captures, as the patterns compiled as written (Unicode classes) do.
    #[cfg(test)]
    pub fn assert_reads_as_written(&self, texts: &[String]) {
        let written =
            Self::compiled_as(self.written.clone(), |p| p.to_owned()).expect("compiles as written");
        for text in texts {
            let matched: Vec<usize> = self.set.matches(text).iter().collect();
            let as_written: Vec<usize> = written.set.matches(text).iter().collect();
            assert_eq!(matched, as_written, "{text}");
            for i in matched {
                let captures = |re: &Regex| {
                    re.captures(text)
                        .map(|c| c.iter().map(|m| m.map(|m| m.range())).collect::<Vec<_>>())
                };
                assert_eq!(
                    captures(self.regex(i)),
                    captures(written.regex(i)),
                    "{}: {text}",
                    self.written[i]
                );
            }
        }
    }

    /// The first (pattern, text) in pattern order, then text order, whose
    /// captures `pick` accepts.
    pub fn first<'t, T>(
        &self,
        texts: &[&'t str],
        mut pick: impl FnMut(usize, &Regex, &'t str) -> Option<T>,
    ) -> Option<T> {
        let matched = self.matches(texts);
        (0..self.len()).find_map(|i| {
            texts
                .iter()
                .zip(&matched)
                .filter(|(_, m)| m.matched(i))
                .find_map(|(text, _)| pick(i, self.regex(i), text))
        })
    }
}

/// Every string of the triage corpus (`tests/fixtures/triage/*.jsonl`:
/// comments, stderr, stdout, render messages), for tests that must read it as
/// they did before.
#[cfg(test)]
pub fn corpus_texts() -> Vec<String> {
    fn strings(value: serde_json::Value, into: &mut Vec<String>) {
        match value {
            serde_json::Value::String(s) => into.push(s),
            serde_json::Value::Array(items) => items.into_iter().for_each(|v| strings(v, into)),
            serde_json::Value::Object(fields) => {
                fields.into_iter().for_each(|(_, v)| strings(v, into))
            }
            _ => {}
        }
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/triage");
    let mut texts = Vec::new();
    for file in std::fs::read_dir(&dir).expect("corpus") {
        let path = file.expect("entry").path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let corpus = std::fs::read_to_string(&path).expect("read");
        for line in corpus.lines().filter(|l| !l.trim().is_empty()) {
            strings(serde_json::from_str(line).expect("json"), &mut texts);
        }
    }
    texts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_perl_classes_and_case_folding_are_made_ascii() {
        assert_eq!(ascii(r"\d+\s\b"), r"[0-9]+[\t\n\x0B\x0C\r ](?-u:\b)");
        assert_eq!(
            ascii(r"[^\S]\W\D\B"),
            r"[^[^\t\n\x0B\x0C\r ]][^0-9A-Za-z_][^0-9](?-u:\B)"
        );
        assert_eq!(ascii(r"\\d\.\(\x22"), r"\\d\.\(\x22");
        assert_eq!(ascii(r"(?i)a(?i:b)"), r"(?i-u)a(?i-u:b)");
    }

    #[test]
    fn only_the_patterns_that_match_are_compiled_alone() {
        let p = Patterns::new(vec![r"refused (\w+)", r"timed out (\w+)", r"\d+ bytes"]).unwrap();
        assert_eq!(p.compiled(), 0);
        let found = p.first(&["nothing here", "timed out db1"], |_, re, t| {
            re.captures(t).map(|c| c[1].to_owned())
        });
        assert_eq!(found.as_deref(), Some("db1"));
        assert_eq!(p.compiled(), 1, "only the pattern that matched");
        assert!(p.regex(2).is_match("12 bytes"));
        assert_eq!(p.compiled(), 2);
    }

    #[test]
    fn the_first_pattern_wins_over_the_first_text() {
        let p = Patterns::new(vec![r"b=(\w+)", r"a=(\w+)"]).unwrap();
        let found = p.first(&["a=1", "b=2"], |i, re, t| {
            re.captures(t).map(|c| (i, c[1].to_owned()))
        });
        assert_eq!(found, Some((0, "2".to_owned())));
        // A match `pick` refuses goes on to the next text, then pattern.
        let found = p.first(&["a=1", "b=2"], |i, re, t| {
            re.captures(t).filter(|_| i == 1).map(|c| c[1].to_owned())
        });
        assert_eq!(found.as_deref(), Some("1"));
    }

    #[test]
    fn a_pattern_that_does_not_compile_is_an_error() {
        assert!(Patterns::new(vec![r"fine", r"(unclosed"]).is_err());
    }
}
