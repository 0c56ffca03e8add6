//! An ordered list of regexes read as one: a `RegexSet` says in one pass over
//! a text which of them match it, and a pattern's own `Regex` (for its
//! captures) is compiled the first time it matches.
//!
//! Compiled up front, the rule table's ~90 regexes and the evidence hints took
//! 4.8 MB at the load test's peak (one-pass DFAs, prefilters, NFAs: a heap
//! profile of the failing mix), though a fleet's failures match a handful of
//! them. The set is one automaton for all of them.

use std::sync::OnceLock;

use regex::{Regex, RegexSet, RegexSetBuilder};

/// A set's compiled size and lazy DFA cache, at most (the regex crate's
/// default, 10 MiB, is too small for the rule table's ~90 patterns at once).
const SET_SIZE_LIMIT: usize = 64 << 20;

pub struct Patterns {
    set: RegexSet,
    patterns: Vec<&'static str>,
    compiled: Vec<OnceLock<Regex>>,
}

impl Patterns {
    /// The patterns, in their order; an error names the first that does not
    /// compile.
    pub fn new(patterns: Vec<&'static str>) -> Result<Self, regex::Error> {
        let set = RegexSetBuilder::new(&patterns)
            .size_limit(SET_SIZE_LIMIT)
            .dfa_size_limit(SET_SIZE_LIMIT)
            .build()?;
        Ok(Self {
            set,
            compiled: patterns.iter().map(|_| OnceLock::new()).collect(),
            patterns,
        })
    }

    pub fn len(&self) -> usize {
        self.patterns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
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
            Regex::new(self.patterns[i]).expect("a pattern the set compiled compiles alone")
        })
    }

    /// How many patterns have their own regex compiled.
    #[cfg(test)]
    pub fn compiled(&self) -> usize {
        self.compiled.iter().filter(|c| c.get().is_some()).count()
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

#[cfg(test)]
mod tests {
    use super::*;

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
