//! What a stage remembers per (minion, state), kept per minion: drift's last
//! run of each state, the correlator's last passing and first failing HEAD.
//!
//! A minion's states are a map of their own, found by the minion's number (its
//! name interned once). One map keyed by (minion, state) held twice the room:
//! a key of 16 bytes (a `u32` beside a `u64`), and a table sized for every
//! pair at once, so 30,100 pairs (100 minions of 300 states) took 65,536
//! slots and 2.2 MB, and growing it held the old table beside the new. A
//! minion's own map has an 8-byte key and grows by its own states only: the
//! same pairs take about half.
//!
//! Bounded: at most `max_len` pairs and as many minions; past that a new pair
//! or minion is refused (the caller counts it), known ones still update.

use std::collections::hash_map::Entry;

use foldhash::{HashMap, HashMapExt};
use serde::ser::{Serialize, SerializeSeq, Serializer};

#[derive(Debug)]
pub struct MinionStates<V> {
    ids: HashMap<Box<str>, u32>,
    /// By minion number.
    states: Vec<HashMap<u64, V>>,
    len: usize,
    max_len: usize,
}

/// A new pair or minion refused: the memory holds its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

impl<V: Copy> MinionStates<V> {
    pub fn new(max_len: usize) -> Self {
        Self {
            ids: HashMap::new(),
            states: Vec::new(),
            len: 0,
            max_len,
        }
    }

    /// Pairs held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The minion's number, given it when new (`Full` past the bound).
    pub fn minion(&mut self, name: &str) -> Result<u32, Full> {
        if let Some(&id) = self.ids.get(name) {
            return Ok(id);
        }
        if self.states.len() >= self.max_len {
            return Err(Full);
        }
        let id = u32::try_from(self.states.len()).map_err(|_| Full)?;
        self.ids.insert(name.into(), id);
        self.states.push(HashMap::new());
        Ok(id)
    }

    /// The minion's number, if it has one.
    pub fn known(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    pub fn get(&self, minion: u32, state: u64) -> Option<V> {
        self.states.get(minion as usize)?.get(&state).copied()
    }

    pub fn get_mut(&mut self, minion: u32, state: u64) -> Option<&mut V> {
        self.states.get_mut(minion as usize)?.get_mut(&state)
    }

    /// Sets the pair's value; a new pair past the bound is refused.
    pub fn insert(&mut self, minion: u32, state: u64, value: V) -> Result<(), Full> {
        let full = self.len >= self.max_len;
        let states = self.states.get_mut(minion as usize).ok_or(Full)?;
        match states.entry(state) {
            Entry::Occupied(mut slot) => {
                slot.insert(value);
            }
            Entry::Vacant(_) if full => return Err(Full),
            Entry::Vacant(slot) => {
                slot.insert(value);
                self.len += 1;
            }
        }
        Ok(())
    }

    /// The state's value on each minion that has one.
    pub fn of_state(&self, state: u64) -> impl Iterator<Item = V> + '_ {
        self.states
            .iter()
            .filter_map(move |states| states.get(&state).copied())
    }

    /// The minions' names with their numbers, in no order.
    pub fn names(&self) -> impl Iterator<Item = (&str, u32)> {
        self.ids.iter().map(|(name, &id)| (&**name, id))
    }

    /// Every pair, in no order (the tests' view; a checkpoint walks
    /// [`sorted`](Self::sorted)).
    #[cfg(test)]
    pub fn entries(&self) -> impl Iterator<Item = (u32, u64, V)> + '_ {
        self.states.iter().enumerate().flat_map(|(id, states)| {
            states
                .iter()
                .map(move |(&state, &value)| (id as u32, state, value))
        })
    }

    /// Every pair as `to` makes it, by minion number then state: a
    /// checkpoint's sequence, written as it is walked (a copy of 30,100
    /// pairs to sort was 1 MB more at each checkpoint), the same memory
    /// always in the same order.
    pub fn sorted<T: Serialize>(&self, to: fn(u32, u64, V) -> T) -> Sorted<'_, V, T> {
        Sorted { memory: self, to }
    }

    /// Takes back a saved memory in place of its own: the minions (a name
    /// with its number, numbered from 0 as [`minion`](Self::minion) gives
    /// them), then the pairs. A minion numbered past the names, a pair whose
    /// minion is not among them, and what lies past the bound are left.
    /// Returns how many pairs were left.
    pub fn restore(
        &mut self,
        names: impl IntoIterator<Item = (Box<str>, u32)>,
        entries: impl IntoIterator<Item = (u32, u64, V)>,
    ) -> u64 {
        let names: Vec<(Box<str>, u32)> = names.into_iter().collect();
        let count = names.len().min(self.max_len);
        self.ids = HashMap::with_capacity(count);
        self.states = (0..count).map(|_| HashMap::new()).collect();
        self.len = 0;
        for (name, id) in names {
            if (id as usize) < count {
                self.ids.insert(name, id);
            }
        }
        let mut left = 0;
        for (minion, state, value) in entries {
            let known = (minion as usize) < count;
            if !known || self.insert(minion, state, value).is_err() {
                left += 1;
            }
        }
        left
    }
}

/// See [`MinionStates::sorted`].
#[derive(Debug)]
pub struct Sorted<'a, V, T> {
    memory: &'a MinionStates<V>,
    to: fn(u32, u64, V) -> T,
}

impl<V: Copy, T: Serialize> Serialize for Sorted<'_, V, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.memory.len))?;
        let mut states: Vec<(u64, V)> = Vec::new();
        for (id, minion) in self.memory.states.iter().enumerate() {
            states.clear();
            states.extend(minion.iter().map(|(&state, &value)| (state, value)));
            states.sort_unstable_by_key(|&(state, _)| state);
            for &(state, value) in &states {
                seq.serialize_element(&(self.to)(id as u32, state, value))?;
            }
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_kept_per_minion_and_bounded() {
        let mut memory = MinionStates::new(3);
        let web1 = memory.minion("web1").unwrap();
        let web2 = memory.minion("web2").unwrap();
        assert_eq!(memory.minion("web1"), Ok(web1), "a name is numbered once");
        assert_ne!(web1, web2);
        memory.insert(web1, 7, 'a').unwrap();
        memory.insert(web2, 7, 'b').unwrap();
        memory.insert(web1, 8, 'c').unwrap();
        assert_eq!(memory.get(web1, 7), Some('a'));
        assert_eq!(
            memory.get(web2, 7),
            Some('b'),
            "the same state on another minion"
        );
        assert_eq!(memory.get(web2, 8), None);
        assert_eq!(memory.len(), 3);
        let mut on_7: Vec<char> = memory.of_state(7).collect();
        on_7.sort_unstable();
        assert_eq!(on_7, ['a', 'b']);

        assert_eq!(
            memory.insert(web2, 9, 'd'),
            Err(Full),
            "a new pair past the bound"
        );
        memory.insert(web1, 7, 'e').unwrap();
        assert_eq!(memory.get(web1, 7), Some('e'), "a known pair still updates");
        *memory.get_mut(web2, 7).unwrap() = 'f';
        assert_eq!(memory.get(web2, 7), Some('f'));
        assert_eq!(memory.len(), 3);

        memory.minion("web3").unwrap();
        assert_eq!(memory.minion("web4"), Err(Full), "minions are bounded too");
        assert_eq!(memory.known("web4"), None);
        assert_eq!(memory.insert(99, 1, 'x'), Err(Full), "no such minion");
    }

    #[test]
    fn sorted_is_by_minion_then_state() {
        let mut memory = MinionStates::new(100);
        for (minion, state) in [("web1", 9), ("db1", 3), ("web1", 2), ("db1", 1)] {
            let id = memory.minion(minion).unwrap();
            memory.insert(id, state, state * 10).unwrap();
        }
        let json = serde_json::to_string(&memory.sorted(|m, s, v| (m, s, v))).unwrap();
        assert_eq!(json, "[[0,2,20],[0,9,90],[1,1,10],[1,3,30]]");
    }

    #[test]
    fn a_saved_memory_comes_back_within_its_bound() {
        let mut memory = MinionStates::new(100);
        for (minion, state) in [("web1", 1), ("web1", 2), ("db1", 1)] {
            let id = memory.minion(minion).unwrap();
            memory.insert(id, state, state * 10).unwrap();
        }
        let names: Vec<(Box<str>, u32)> = memory.names().map(|(n, i)| (n.into(), i)).collect();
        let mut entries: Vec<(u32, u64, u64)> = memory.entries().collect();
        entries.sort_unstable();

        let mut back = MinionStates::new(100);
        assert_eq!(back.restore(names.clone(), entries.clone()), 0);
        let mut again: Vec<(u32, u64, u64)> = back.entries().collect();
        again.sort_unstable();
        assert_eq!(again, entries);
        let db1 = back.known("db1").unwrap();
        assert_eq!(back.get(db1, 1), Some(10));

        // A minion numbered past the names, a pair naming no minion, and
        // pairs past the bound are left, and counted.
        let mut names = names;
        names.push(("stray".into(), 4_000_000_000));
        entries.push((4_000_000_000, 1, 1));
        let mut small = MinionStates::new(2);
        assert_eq!(small.restore(names, entries), 2);
        assert_eq!(small.len(), 2);
        assert_eq!(small.known("stray"), None);
    }
}
