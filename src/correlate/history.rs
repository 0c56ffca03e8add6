//! Per (minion, state) memory of the last outcome and the state-tree HEAD it ran
//! under: the HEAD of the last run the state passed, and the HEAD of the first
//! run it failed since. When a state flips from passing to failing, the commits
//! between the two are the suspects.
//!
//! Bounded: at most `max_entries` (minion, state) pairs; past that new pairs are
//! not remembered (counted), known ones still update. Commits and minions are
//! interned to 4-byte indices, so an entry costs about 40 bytes.

use foldhash::HashMap;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Entry {
    last_ok: Option<u32>,
    failing_since: Option<u32>,
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

#[derive(Debug, Default)]
pub struct History {
    max_entries: usize,
    entries: HashMap<(u32, u64), Entry>,
    minions: HashMap<Box<str>, u32>,
    commits: Vec<Box<str>>,
    commit_ids: HashMap<Box<str>, u32>,
    /// New (minion, state) pairs not remembered because the memory was full.
    pub refused: u64,
}

impl History {
    pub fn new(max_entries: usize) -> Self {
        Self {
            max_entries,
            ..Self::default()
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn intern_commit(&mut self, head: &str) -> u32 {
        if let Some(&i) = self.commit_ids.get(head) {
            return i;
        }
        let i = u32::try_from(self.commits.len()).unwrap_or(u32::MAX);
        self.commits.push(head.into());
        self.commit_ids.insert(head.into(), i);
        i
    }

    fn intern_minion(&mut self, minion: &str) -> u32 {
        if let Some(&i) = self.minions.get(minion) {
            return i;
        }
        let i = u32::try_from(self.minions.len()).unwrap_or(u32::MAX);
        self.minions.insert(minion.into(), i);
        i
    }

    /// Records a run's outcomes (state hash, passed) under `head`.
    pub fn record(&mut self, minion: &str, head: &str, outcomes: &[(u64, bool)]) {
        let (minion, head) = (self.intern_minion(minion), self.intern_commit(head));
        for &(state, ok) in outcomes {
            let full = self.entries.len() >= self.max_entries;
            let entry = match self.entries.get_mut(&(minion, state)) {
                Some(entry) => entry,
                None if full => {
                    self.refused += 1;
                    continue;
                }
                None => self.entries.entry((minion, state)).or_default(),
            };
            if ok {
                *entry = Entry {
                    last_ok: Some(head),
                    failing_since: None,
                };
            } else if entry.failing_since.is_none() {
                entry.failing_since = Some(head);
            }
        }
    }

    /// For a failing state (after [`record`](Self::record) of its run under
    /// `head`): the flip, when it passed before under another HEAD.
    pub fn flip(&self, minion: &str, state: u64, head: &str) -> Option<Flip> {
        let minion = *self.minions.get(minion)?;
        let entry = self.entries.get(&(minion, state))?;
        let (ok, failed) = (entry.last_ok?, entry.failing_since?);
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
    entries: Vec<(u32, u64, Option<u32>, Option<u32>)>,
}

/// The memory as a checkpoint reads it back.
#[derive(Debug, serde::Deserialize)]
pub struct SavedHistory {
    minions: Vec<Box<str>>,
    commits: Vec<Box<str>>,
    entries: Vec<(u32, u64, Option<u32>, Option<u32>)>,
}

impl History {
    pub fn saving(&self) -> SavingHistory<'_> {
        let mut minions = vec![""; self.minions.len()];
        for (name, &i) in &self.minions {
            if let Some(slot) = minions.get_mut(i as usize) {
                *slot = name;
            }
        }
        SavingHistory {
            minions,
            commits: self.commits.iter().map(|c| &**c).collect(),
            entries: self
                .entries
                .iter()
                .map(|(&(minion, state), e)| (minion, state, e.last_ok, e.failing_since))
                .collect(),
        }
    }

    /// Takes back a saved memory (at most `max_entries` entries; an entry whose
    /// indices point nowhere is dropped).
    pub fn restore(&mut self, saved: SavedHistory) {
        let (minions, commits) = (saved.minions.len(), saved.commits.len());
        let valid = |i: Option<u32>| i.is_none_or(|i| (i as usize) < commits);
        self.entries = saved
            .entries
            .into_iter()
            .filter(|&(m, _, ok, failing)| (m as usize) < minions && valid(ok) && valid(failing))
            .take(self.max_entries)
            .map(|(minion, state, last_ok, failing_since)| {
                (
                    (minion, state),
                    Entry {
                        last_ok,
                        failing_since,
                    },
                )
            })
            .collect();
        self.minions = saved
            .minions
            .into_iter()
            .enumerate()
            .map(|(i, m)| (m, i as u32))
            .collect();
        self.commit_ids = saved
            .commits
            .iter()
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
        let bytes = rmp_serde::to_vec(&h.saving()).expect("save");
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
