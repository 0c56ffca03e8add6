//! Per (minion, state) memory of the last outcome and the state-tree HEAD it ran
//! under: the HEAD of the last run the state passed, and the HEAD of the first
//! run it failed since. When a state flips from passing to failing, the commits
//! between the two are the suspects.
//!
//! Bounded: at most `max_entries` (minion, state) pairs; past that new pairs are
//! not remembered (counted), known ones still update. Kept per minion
//! ([`MinionStates`]), commits interned to 4-byte indices, so an entry costs
//! 8 bytes in a block of 32 states, 16 at most (the blocks' room is bounded
//! to twice the pairs).

use foldhash::HashMap;

use crate::minion_states::{Held, MinionStates, Sorted};

/// No commit: the sentinel of [`Entry`]'s halves.
const NONE: u32 = u32::MAX;

/// The HEADs a state last passed and first failed under since (commit
/// indices; [`NONE`] for none): 8 bytes, not the 16 of two `Option<u32>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    last_ok: u32,
    failing_since: u32,
}

impl Entry {
    fn of(last_ok: Option<u32>, failing_since: Option<u32>) -> Self {
        Self {
            last_ok: last_ok.unwrap_or(NONE),
            failing_since: failing_since.unwrap_or(NONE),
        }
    }

    fn last_ok(self) -> Option<u32> {
        (self.last_ok != NONE).then_some(self.last_ok)
    }

    fn failing_since(self) -> Option<u32> {
        (self.failing_since != NONE).then_some(self.failing_since)
    }
}

/// What the memory says of a failing state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flip {
    /// The HEAD of the last run it passed under.
    pub last_ok: String,
    /// The HEAD of the first run it failed under since.
    pub first_failed: String,
    /// The current run is that first failing one.
    pub first_failing_now: bool,
}

#[derive(Debug)]
pub struct History {
    entries: MinionStates<Entry>,
    commits: Vec<Box<str>>,
    commit_ids: HashMap<Box<str>, u32>,
    /// New (minion, state) pairs not remembered because the memory was full.
    pub refused: u64,
}

impl History {
    pub fn new(max_entries: usize) -> Self {
        Self {
            entries: MinionStates::new(max_entries),
            commits: Vec::new(),
            commit_ids: HashMap::default(),
            refused: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// See [`MinionStates::expect_minions`].
    pub fn expect_minions(&mut self, minions: usize) {
        self.entries.expect_minions(minions);
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn intern_commit(&mut self, head: &str) -> u32 {
        if let Some(&i) = self.commit_ids.get(head) {
            return i;
        }
        // The last index is the sentinel: commits past it share the one before.
        let i = u32::try_from(self.commits.len())
            .unwrap_or(NONE - 1)
            .min(NONE - 1);
        self.commits.push(head.into());
        self.commit_ids.insert(head.into(), i);
        i
    }

    /// Records a run's outcomes (state hash, passed) under `head`.
    pub fn record(&mut self, minion: &str, head: &str, outcomes: &[(u64, bool)]) {
        let Ok(minion) = self.entries.minion(minion) else {
            self.refused += outcomes.len() as u64;
            return;
        };
        let head = self.intern_commit(head);
        for &(state, ok) in outcomes {
            if let Some(entry) = self.entries.get_mut(minion, state) {
                if ok {
                    *entry = Entry::of(Some(head), None);
                } else if entry.failing_since().is_none() {
                    entry.failing_since = head;
                }
                continue;
            }
            let new = if ok {
                Entry::of(Some(head), None)
            } else {
                Entry::of(None, Some(head))
            };
            if self.entries.insert(minion, state, new).is_err() {
                self.refused += 1;
            }
        }
    }

    /// For a failing state (after [`record`](Self::record) of its run under
    /// `head`): the flip, when it passed before under another HEAD.
    pub fn flip(&self, minion: &str, state: u64, head: &str) -> Option<Flip> {
        let minion = self.entries.known(minion)?;
        let entry = self.entries.get(minion, state)?;
        let (ok, failed) = (entry.last_ok()?, entry.failing_since()?);
        if ok == failed {
            return None; // it failed under the same HEAD it passed: not a commit
        }
        let name = |i: u32| self.commits.get(i as usize).map(|c| c.to_string());
        Some(Flip {
            last_ok: name(ok)?,
            first_failed: name(failed)?,
            first_failing_now: self.commit_ids.get(head) == Some(&failed),
        })
    }
}

/// The memory as a checkpoint writes it: minions and commits by index, then
/// (minion, state, last_ok, failing_since) entries.
#[derive(Debug, serde::Serialize)]
pub struct SavingHistory<'a> {
    minions: Vec<&'a str>,
    commits: Vec<&'a str>,
    entries: Sorted<'a, Entry, SavedEntry>,
}

/// (minion, state, last_ok, failing_since), as a checkpoint keeps an entry.
type SavedEntry = (u32, u64, Option<u32>, Option<u32>);

/// The memory as a checkpoint reads it back.
#[derive(Debug, serde::Deserialize)]
pub struct SavedHistory {
    minions: Vec<Box<str>>,
    commits: Vec<Box<str>>,
    entries: Vec<SavedEntry>,
}

/// The memory copied between two events: its pairs copy on write
/// ([`Held`]), its commits (a few) copied.
#[derive(Debug)]
pub struct HistorySnapshot {
    held: Held<Entry>,
    commits: Vec<Box<str>>,
}

impl HistorySnapshot {
    pub fn saving(&self) -> SavingHistory<'_> {
        SavingHistory {
            minions: self.held.names().map(|(name, _)| name).collect(),
            commits: self.commits.iter().map(|c| &**c).collect(),
            entries: self
                .held
                .sorted(|minion, state, e| (minion, state, e.last_ok(), e.failing_since())),
        }
    }
}

impl History {
    pub fn snapshot(&self) -> HistorySnapshot {
        HistorySnapshot {
            held: self.entries.held().clone(),
            commits: self.commits.clone(),
        }
    }

    /// Takes back a saved memory (at most `max_entries` entries; an entry whose
    /// indices point nowhere is dropped).
    pub fn restore(&mut self, saved: SavedHistory) {
        let commits = saved.commits.len().min(NONE as usize);
        let valid = |i: Option<u32>| i.is_none_or(|i| (i as usize) < commits);
        let names = saved
            .minions
            .into_iter()
            .enumerate()
            .map(|(i, m)| (m, u32::try_from(i).unwrap_or(NONE)));
        let entries = saved
            .entries
            .into_iter()
            .filter(|&(_, _, ok, failing)| valid(ok) && valid(failing))
            .map(|(minion, state, ok, failing)| (minion, state, Entry::of(ok, failing)));
        self.entries.restore(names, entries);
        self.commit_ids = saved
            .commits
            .iter()
            .take(commits)
            .enumerate()
            .map(|(i, c)| (c.clone(), i as u32))
            .collect();
        self.commits = saved.commits;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flip_names_last_ok_and_first_failed() {
        let mut h = History::new(100);
        h.record("web1", "A", &[(1, true), (2, true)]);
        assert_eq!(h.flip("web1", 1, "A"), None, "never failed");
        h.record("web1", "B", &[(1, false), (2, true)]);
        let flip = h.flip("web1", 1, "B").unwrap();
        assert_eq!(
            flip,
            Flip {
                last_ok: "A".into(),
                first_failed: "B".into(),
                first_failing_now: true
            }
        );
        // Still failing under C: the range stays A..B, and C is not the first.
        h.record("web1", "C", &[(1, false)]);
        let flip = h.flip("web1", 1, "C").unwrap();
        assert_eq!(
            (flip.first_failed.as_str(), flip.first_failing_now),
            ("B", false)
        );
        // Passing again clears it.
        h.record("web1", "D", &[(1, true)]);
        assert_eq!(h.flip("web1", 1, "D"), None);
        // Another minion has its own memory.
        h.record("web2", "B", &[(1, false)]);
        assert_eq!(h.flip("web2", 1, "B"), None, "web2 never passed");
    }

    #[test]
    fn a_saved_memory_reads_back_whole() {
        let mut h = History::new(100);
        h.record("web1", "A", &[(1, true), (2, true)]);
        h.record("web2", "A", &[(1, true)]);
        h.record("web1", "B", &[(1, false)]);
        let bytes = rmp_serde::to_vec(&h.snapshot().saving()).expect("save");
        let mut back = History::new(100);
        back.restore(rmp_serde::from_slice(&bytes).expect("read"));
        assert_eq!(back.len(), 3);
        assert_eq!(back.flip("web1", 1, "B"), h.flip("web1", 1, "B"));
        back.record("web2", "B", &[(1, false)]);
        assert_eq!(
            back.flip("web2", 1, "B").map(|f| f.last_ok),
            Some("A".into())
        );
    }

    #[test]
    fn failing_under_the_head_it_passed_is_not_a_flip() {
        let mut h = History::new(100);
        h.record("web1", "A", &[(1, true)]);
        h.record("web1", "A", &[(1, false)]);
        assert_eq!(h.flip("web1", 1, "A"), None);
    }

    #[test]
    fn full_memory_refuses_new_pairs_and_keeps_known_ones() {
        let mut h = History::new(2);
        h.record("web1", "A", &[(1, true), (2, true), (3, true)]);
        assert_eq!((h.len(), h.refused), (2, 1));
        h.record("web1", "B", &[(1, false)]);
        assert!(h.flip("web1", 1, "B").is_some());
    }
}
