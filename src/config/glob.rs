//! Shell-style globs as Salt matches event tags and function names (Python's
//! `fnmatch`): `*` any run (`/` included), `?` one character, `[seq]` and
//! `[!seq]` a set; the `glob` crate's `Pattern` with no special meaning for `/`
//! or a leading dot. A pattern that is not a valid glob (an unclosed `[`)
//! matches itself literally, as `fnmatch` does.

use std::fmt;

use glob::{MatchOptions, Pattern};

const FNMATCH: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

/// A compiled pattern, shown and compared as written.
#[derive(Clone)]
pub struct Glob {
    text: String,
    pattern: Pattern,
}

impl Glob {
    pub fn new(text: &str) -> Glob {
        let pattern = Pattern::new(text).unwrap_or_else(|_| {
            Pattern::new(&Pattern::escape(text)).expect("an escaped pattern is valid")
        });
        Glob {
            text: text.to_owned(),
            pattern,
        }
    }

    pub fn matches(&self, text: &str) -> bool {
        self.pattern.matches_with(text, FNMATCH)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.text)
    }
}

impl PartialEq for Glob {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Glob {}

/// Whether `text` matches `pattern` (compiled for this one call: keep a
/// [`Glob`] where a pattern is matched per event).
pub fn matches(pattern: &str, text: &str) -> bool {
    Glob::new(pattern).matches(text)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn fnmatch_cases() {
        assert!(matches("salt/job/*/ret/*", "salt/job/1/ret/web1"));
        assert!(matches("*", ""));
        assert!(matches("state.*", "state.apply"));
        assert!(!matches("state.*", "test.ping"));
        assert!(matches("web?", "web1"));
        assert!(!matches("web?", "web10"));
        assert!(matches("*.conf", "10-a.conf"));
        assert!(matches("a*b*c", "aXXbYYc"));
        assert!(!matches("a*b*c", "aXXbYY"));
        // What fnmatch has and the hand-written matcher lacked: sets.
        assert!(matches("web[0-9]", "web7"));
        assert!(!matches("web[!0-9]", "web7"));
        assert!(matches("salt/job/*/ret/db[12]", "salt/job/1/ret/db2"));
        // Not a valid set: itself, literally, as fnmatch takes it.
        assert!(matches("web[1", "web[1"));
        assert!(!matches("web[1", "web1"));
        assert!(
            !matches("State.*", "state.apply"),
            "case-sensitive, as on Linux"
        );
    }
}
