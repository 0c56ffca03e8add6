//! What a failure's text says, worked out once per distinct text: its
//! classification (the rule table over comment, stderr and stdout), its
//! normalised comment and the last line of its stderr normalised (the
//! fingerprint's inputs). A state that fails the same
//! way on 500 minions is read 500 times and classified once.
//!
//! Keyed by a hash of the whole text (function, comment, stderr, stdout, exit
//! code), with the comment kept to rule out a collision on what matters most.
//! Bounded: at most [`MEMO_ENTRIES`] texts; the oldest is forgotten first
//! (counted).

use std::hash::{BuildHasher, Hash, Hasher};

use super::category::{Classification, FailureText, classify};
use super::fingerprint::{last_line, normalise};
use crate::fifo::FifoMap;

/// Distinct failure texts remembered at most.
pub const MEMO_ENTRIES: usize = 4096;

#[derive(Debug)]
struct Known {
    comment: Box<str>,
    read: Read,
}

/// What a text says.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub classification: Classification,
    pub normalised: String,
    /// The last line of its stderr, normalised ("" without one).
    pub stderr_line: String,
}

#[derive(Debug)]
pub struct Memo {
    known: FifoMap<Known, u64>,
    pub hits: u64,
    pub forgotten: u64,
}

impl Default for Memo {
    fn default() -> Self {
        Self {
            known: FifoMap::new(MEMO_ENTRIES),
            hits: 0,
            forgotten: 0,
        }
    }
}

fn key(text: &FailureText<'_>) -> u64 {
    // In-process only: a fixed seed is enough (a collision is checked).
    let mut h = foldhash::fast::FixedState::default().build_hasher();
    text.function.hash(&mut h);
    text.comment.hash(&mut h);
    text.stderr.hash(&mut h);
    text.stdout.hash(&mut h);
    text.exit_code.hash(&mut h);
    h.finish()
}

impl Memo {
    /// What `text` says.
    pub fn read(&mut self, text: &FailureText<'_>) -> Read {
        let key = key(text);
        if let Some(known) = self.known.get(&key) {
            if *known.comment == *text.comment {
                self.hits += 1;
                return known.read.clone();
            }
        }
        let read = Read {
            classification: classify(text),
            normalised: normalise(text.comment),
            stderr_line: last_line(text.stderr),
        };
        self.forgotten += self.known.insert(
            &key,
            Known {
                comment: text.comment.into(),
                read: read.clone(),
            },
        );
        read
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.known.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_text_is_read_once_and_a_different_one_again() {
        let mut memo = Memo::default();
        let refused = FailureText {
            function: "pkg.installed",
            comment: "E: Unable to locate package nginx-extras",
            ..FailureText::default()
        };
        let first = memo.read(&refused);
        let expected = Read {
            classification: classify(&refused),
            normalised: normalise(refused.comment),
            stderr_line: String::new(),
        };
        assert_eq!(first, expected);
        assert_eq!(memo.read(&refused), first);
        assert_eq!(memo.hits, 1);
        // Same comment, another stderr: another text.
        let other = FailureText {
            stderr: Some("Could not resolve host: deb.example.net"),
            ..refused
        };
        let read = memo.read(&other);
        assert_eq!(read.classification, classify(&other));
        assert_eq!(read.stderr_line, "Could not resolve host: <host>");
        assert_eq!(memo.hits, 1);
        assert_eq!(memo.len(), 2);
    }

    #[test]
    fn the_oldest_text_is_forgotten_past_the_bound() {
        let mut memo = Memo::default();
        let comments: Vec<String> = (0..=MEMO_ENTRIES).map(|i| format!("failed {i}")).collect();
        for c in &comments {
            memo.read(&FailureText::comment(c));
        }
        assert_eq!(memo.len(), MEMO_ENTRIES);
        assert_eq!(memo.forgotten, 1);
        memo.read(&FailureText::comment(&comments[0]));
        assert_eq!(memo.hits, 0, "the first was forgotten");
    }
}
