//! What a failure's text says, worked out once per distinct text: its
//! classification (the rule table over comment, stderr and stdout) and its
//! normalised comment (the fingerprint's input). A state that fails the same
//! way on 500 minions is read 500 times and classified once.
//!
//! Keyed by a hash of the whole text (function, comment, stderr, stdout, exit
//! code), with the comment kept to rule out a collision on what matters most.
//! Bounded: at most [`MEMO_ENTRIES`] texts; the oldest is forgotten first
//! (counted).

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

use super::category::{Classification, FailureText, classify};
use super::fingerprint::normalise;

/// Distinct failure texts remembered at most.
pub const MEMO_ENTRIES: usize = 4096;

#[derive(Debug)]
struct Known {
    comment: Box<str>,
    classification: Classification,
    normalised: String,
}

#[derive(Debug, Default)]
pub struct Memo {
    known: HashMap<u64, Known>,
    order: VecDeque<u64>,
    pub hits: u64,
    pub forgotten: u64,
}

fn key(text: &FailureText<'_>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.function.hash(&mut h);
    text.comment.hash(&mut h);
    text.stderr.hash(&mut h);
    text.stdout.hash(&mut h);
    text.exit_code.hash(&mut h);
    h.finish()
}

impl Memo {
    /// The classification and normalised comment of `text`.
    pub fn read(&mut self, text: &FailureText<'_>) -> (Classification, String) {
        let key = key(text);
        if let Some(known) = self.known.get(&key) {
            if *known.comment == *text.comment {
                self.hits += 1;
                return (known.classification.clone(), known.normalised.clone());
            }
        }
        let classification = classify(text);
        let normalised = normalise(text.comment);
        if !self.known.contains_key(&key) {
            if self.order.len() >= MEMO_ENTRIES {
                if let Some(old) = self.order.pop_front() {
                    self.known.remove(&old);
                    self.forgotten += 1;
                }
            }
            self.order.push_back(key);
        }
        self.known.insert(
            key,
            Known {
                comment: text.comment.into(),
                classification: classification.clone(),
                normalised: normalised.clone(),
            },
        );
        (classification, normalised)
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
        assert_eq!(first, (classify(&refused), normalise(refused.comment)));
        assert_eq!(memo.read(&refused), first);
        assert_eq!(memo.hits, 1);
        // Same comment, another stderr: another text.
        let other = FailureText {
            stderr: Some("Could not resolve host: deb.example.net"),
            ..refused
        };
        assert_eq!(memo.read(&other).0, classify(&other));
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
