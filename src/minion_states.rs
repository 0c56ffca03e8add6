//! What a stage remembers per (minion, state), kept per minion: drift's last
//! run of each state, the correlator's last passing and first failing HEAD.
//!
//! The states are numbered once for all minions, in the order they are first
//! remembered: a run's states get consecutive numbers, and a fleet running the
//! same highstate shares them. A minion keeps its values in blocks of
//! [`BLOCK`] consecutive numbers (a value each, and a bit saying which are
//! set), found by binary search among its few blocks. A map per minion took
//! 2.5 times the room: 301 states in a 512-slot table of 8-byte keys beside
//! the values (12.8 KB a minion for drift's 16-byte values), where blocks
//! take 5.3 KB, and the states' numbers, kept once, are small enough to stay
//! in cache.
//!
//! Bounded: at most `max_len` pairs and as many minions, and room for at
//! most twice that many values in blocks (states numbered apart on one
//! minion leave room unused in their blocks); past that a new pair or minion
//! is refused (the caller counts it), known ones still update.
//!
//! What a checkpoint writes ([`Held`]: the names, the blocks, the states'
//! hashes) is kept in copy-on-write parts ([`crate::cow`]): its clone is a
//! snapshot the checkpoint encodes on its own thread.

use std::hash::BuildHasher;

use foldhash::{HashMap, HashMapExt};
use hashbrown::HashTable;
use serde::ser::{Serialize, SerializeSeq, Serializer};

use crate::cow::CowVec;

/// States a block holds: consecutive numbers, one bit each in its `set`.
const BLOCK: usize = 32;

/// One minion's values for the states numbered `number * BLOCK ..
/// (number + 1) * BLOCK`, the block's number kept beside it. Its values are
/// an allocation of their own, as long as the highest place set needs (up
/// to [`BLOCK`], grown by doubling): a fleet whose runs have a few states
/// (a 50,000-minion `state.apply` of four) kept 32 values a minion where it
/// used four, 27 MB of drift's memory where 3.5 MB holds it.
#[derive(Debug, Clone)]
struct Block<V> {
    /// Bit `i`: `values[i]` is set.
    set: u32,
    values: Box<[V]>,
}

impl<V: Copy> Block<V> {
    /// Room for place `at`, the new places filled with `fill` (unset).
    fn reach(&mut self, at: usize, fill: V) {
        if at < self.values.len() {
            return;
        }
        let len = (at + 1).next_power_of_two().min(BLOCK);
        let mut values = Vec::with_capacity(len);
        values.extend_from_slice(&self.values);
        values.resize(len, fill);
        self.values = values.into_boxed_slice();
    }

    fn get(&self, at: usize) -> Option<&V> {
        (self.set & 1 << at != 0).then(|| &self.values[at])
    }
}

/// A minion's blocks, by number.
type Blocks<V> = Vec<(u32, Block<V>)>;

/// The pairs, without the indexes that find them: what a checkpoint writes.
/// A clone is a snapshot (copy on write).
#[derive(Debug, Clone)]
pub struct Held<V> {
    /// By minion number: its name.
    names: CowVec<Box<str>>,
    /// By minion number: its blocks, by block number.
    minions: CowVec<Blocks<V>>,
    /// By number: the state's hash.
    states: CowVec<u64>,
    len: usize,
}

#[derive(Debug)]
pub struct MinionStates<V> {
    held: Held<V>,
    /// Minion numbers, found by their name in `held`: a name is kept once
    /// (a table keyed by names would hold each a second time: 2.4 MB a
    /// memory at 50,000 minions).
    ids: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    /// State (its hash) → its number.
    numbers: HashMap<u64, u32>,
    blocks: usize,
    max_len: usize,
    max_blocks: usize,
}

/// A new pair or minion refused: the memory holds its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// A state's number split into its block's number and its place there.
fn split(number: u32) -> (u32, usize) {
    (number / BLOCK as u32, number as usize % BLOCK)
}

impl<V: Copy> MinionStates<V> {
    pub fn new(max_len: usize) -> Self {
        Self {
            held: Held {
                names: CowVec::default(),
                minions: CowVec::default(),
                states: CowVec::default(),
                len: 0,
            },
            ids: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            numbers: HashMap::new(),
            blocks: 0,
            max_len,
            max_blocks: max_len.saturating_mul(2).div_ceil(BLOCK).max(1),
        }
    }

    /// Pairs held.
    pub fn len(&self) -> usize {
        self.held.len
    }

    pub fn is_empty(&self) -> bool {
        self.held.len == 0
    }

    /// What a checkpoint writes; clone it for a snapshot.
    pub fn held(&self) -> &Held<V> {
        &self.held
    }

    /// Room for `minions` minions (within the bound) made now: a job
    /// published expecting them, rather than the table of names grown
    /// again under one of its returns.
    pub fn expect_minions(&mut self, minions: usize) {
        let room = minions
            .min(self.max_len)
            .saturating_sub(self.held.minions.len());
        let (names, hasher) = (&self.held.names, &self.hasher);
        self.ids
            .reserve(room, |&id| hasher.hash_one(&*names[id as usize]));
    }

    /// The minion's number, given it when new (`Full` past the bound).
    pub fn minion(&mut self, name: &str) -> Result<u32, Full> {
        if let Some(id) = self.known(name) {
            return Ok(id);
        }
        if self.held.minions.len() >= self.max_len {
            return Err(Full);
        }
        let id = u32::try_from(self.held.minions.len()).map_err(|_| Full)?;
        self.held.names.push(name.into());
        self.held.minions.push(Vec::new());
        self.index(id);
        Ok(id)
    }

    /// Minion `id` (its name in `held`) found by its name from now on.
    fn index(&mut self, id: u32) {
        let (names, hasher) = (&self.held.names, &self.hasher);
        let hash = hasher.hash_one(&*names[id as usize]);
        self.ids
            .insert_unique(hash, id, |&id| hasher.hash_one(&*names[id as usize]));
    }

    /// The minion's number, if it has one.
    pub fn known(&self, name: &str) -> Option<u32> {
        let names = &self.held.names;
        self.ids
            .find(self.hasher.hash_one(name), |&id| {
                &*names[id as usize] == name
            })
            .copied()
    }

    /// Where the block numbered `block` is among a minion's (`Err`: where it
    /// would go).
    fn place(blocks: &Blocks<V>, block: u32) -> Result<usize, usize> {
        blocks.binary_search_by_key(&block, |b| b.0)
    }

    /// Where the pair's value is: its minion's block (by position) and its
    /// place there, whether set or not; `None` if the block is not there.
    fn find(&self, minion: u32, state: u64) -> Option<(usize, usize)> {
        let blocks = self.held.minions.get(minion as usize)?;
        let (block, at) = split(*self.numbers.get(&state)?);
        let found = Self::place(blocks, block).ok()?;
        Some((found, at))
    }

    pub fn get(&self, minion: u32, state: u64) -> Option<V> {
        let (found, at) = self.find(minion, state)?;
        self.held.minions[minion as usize][found].1.get(at).copied()
    }

    pub fn get_mut(&mut self, minion: u32, state: u64) -> Option<&mut V> {
        let (found, at) = self.find(minion, state)?;
        let block = &mut self.held.minions.get_mut(minion as usize)?[found].1;
        if block.set & 1 << at == 0 {
            return None;
        }
        Some(&mut block.values[at])
    }

    /// Sets the pair's value; a new pair past the bound is refused.
    pub fn insert(&mut self, minion: u32, state: u64, value: V) -> Result<(), Full> {
        let full = self.held.len >= self.max_len;
        if minion as usize >= self.held.minions.len() {
            return Err(Full);
        }
        let known = self.numbers.get(&state).copied();
        if known.is_none() && full {
            return Err(Full);
        }
        // A new state takes the next number, once the pair is taken.
        let number = match known {
            Some(number) => number,
            None => u32::try_from(self.held.states.len()).map_err(|_| Full)?,
        };
        let (block, at) = split(number);
        let Some(blocks) = self.held.minions.get_mut(minion as usize) else {
            return Err(Full);
        };
        let found = match Self::place(blocks, block) {
            Ok(found) => found,
            Err(_) if full || self.blocks >= self.max_blocks => return Err(Full),
            Err(place) => {
                blocks.reserve_exact(1);
                let new = Block {
                    set: 0,
                    values: Box::default(),
                };
                blocks.insert(place, (block, new));
                self.blocks += 1;
                place
            }
        };
        let slot = &mut blocks[found].1;
        slot.reach(at, value);
        if slot.set & 1 << at == 0 {
            if full {
                return Err(Full);
            }
            slot.set |= 1 << at;
            self.held.len += 1;
        }
        slot.values[at] = value;
        if known.is_none() {
            self.numbers.insert(state, number);
            self.held.states.push(state);
        }
        Ok(())
    }

    /// The state's value on each minion that has one.
    pub fn of_state(&self, state: u64) -> impl Iterator<Item = V> + '_ {
        let place = self.numbers.get(&state).map(|&number| split(number));
        self.held.minions.iter().filter_map(move |blocks| {
            let (block, at) = place?;
            let found = Self::place(blocks, block).ok()?;
            blocks[found].1.get(at).copied()
        })
    }

    /// The minions' names with their numbers, by number.
    pub fn names(&self) -> impl Iterator<Item = (&str, u32)> {
        self.held.names()
    }

    /// Every pair, in no order (the tests' view; a checkpoint walks
    /// [`Held::sorted`]).
    #[cfg(test)]
    pub fn entries(&self) -> impl Iterator<Item = (u32, u64, V)> + '_ {
        self.held
            .minions
            .iter()
            .enumerate()
            .flat_map(|(id, blocks)| {
                self.held
                    .pairs_of(blocks)
                    .map(move |(state, value)| (id as u32, state, value))
            })
    }

    /// See [`Held::sorted`].
    pub fn sorted<T: Serialize>(&self, to: fn(u32, u64, V) -> T) -> Sorted<'_, V, T> {
        self.held.sorted(to)
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
        *self = Self::new(self.max_len);
        let mut by_number: Vec<Box<str>> = vec![Box::default(); count];
        for (name, id) in names {
            if let Some(slot) = by_number.get_mut(id as usize) {
                *slot = name;
            }
        }
        self.held.names = by_number.into_iter().collect();
        self.held.minions = (0..count).map(|_| Vec::new()).collect();
        let hasher = &self.hasher;
        let names = &self.held.names;
        self.ids = HashTable::with_capacity(count);
        for id in 0..count as u32 {
            let hash = hasher.hash_one(&*names[id as usize]);
            self.ids
                .insert_unique(hash, id, |&id| hasher.hash_one(&*names[id as usize]));
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

impl<V: Copy> Held<V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The minions' names with their numbers, by number.
    pub fn names(&self) -> impl Iterator<Item = (&str, u32)> {
        self.names
            .iter()
            .enumerate()
            .map(|(id, name)| (&**name, id as u32))
    }

    /// One minion's pairs (state hash, value), in no order.
    fn pairs_of<'a>(&'a self, blocks: &'a Blocks<V>) -> impl Iterator<Item = (u64, V)> + 'a {
        let states = &self.states;
        blocks.iter().flat_map(move |(number, block)| {
            (0..block.values.len())
                .filter(move |&at| block.set & 1 << at != 0)
                .map(move |at| {
                    let number = *number as usize * BLOCK + at;
                    (states[number], block.values[at])
                })
        })
    }

    /// Every pair as `to` makes it, by minion number then state: a
    /// checkpoint's sequence, written as it is walked (a copy of 30,100
    /// pairs to sort was 1 MB more at each checkpoint), the same memory
    /// always in the same order.
    pub fn sorted<T: Serialize>(&self, to: fn(u32, u64, V) -> T) -> Sorted<'_, V, T> {
        Sorted { memory: self, to }
    }
}

/// See [`Held::sorted`].
#[derive(Debug)]
pub struct Sorted<'a, V, T> {
    memory: &'a Held<V>,
    to: fn(u32, u64, V) -> T,
}

impl<V: Copy, T: Serialize> Serialize for Sorted<'_, V, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.memory.len))?;
        let mut states: Vec<(u64, V)> = Vec::new();
        for (id, blocks) in self.memory.minions.iter().enumerate() {
            states.clear();
            states.extend(self.memory.pairs_of(blocks));
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

    /// Value slots held, over every minion's blocks.
    fn slots<V: Copy>(memory: &MinionStates<V>) -> usize {
        memory
            .held
            .minions
            .iter()
            .flatten()
            .map(|(_, block)| block.values.len())
            .sum()
    }

    /// A fleet whose runs have four states keeps four values a minion, not
    /// a block of 32 (issue 75: 27 MB of drift's memory on 50,000 minions).
    #[test]
    fn a_run_of_a_few_states_keeps_room_for_a_few() {
        let mut memory = MinionStates::new(10_000);
        for m in 0..100 {
            let id = memory.minion(&format!("web{m}")).unwrap();
            for state in 0..4u64 {
                memory.insert(id, 1000 + state, [m as u8; 16]).unwrap();
            }
        }
        assert_eq!(memory.len(), 400);
        assert_eq!(slots(&memory), 400);
        // A fifth state grows the block to the next power of two.
        let web0 = memory.known("web0").unwrap();
        memory.insert(web0, 1004, [9; 16]).unwrap();
        assert_eq!(slots(&memory), 404);
        assert_eq!(memory.get(web0, 1004), Some([9; 16]));
        assert_eq!(memory.get(web0, 1003), Some([0; 16]), "kept as it was");
    }

    #[test]
    fn pairs_are_kept_per_minion_and_bounded() {
        let mut memory = MinionStates::new(3);
        memory.max_blocks = 2;
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

    /// A fleet running the same states shares their numbers: each minion's
    /// values fill whole blocks, the room this module is for.
    #[test]
    fn a_fleet_of_the_same_states_fills_its_blocks() {
        let mut memory = MinionStates::new(100_000);
        for minion in 0..100 {
            let id = memory.minion(&format!("minion-{minion}")).unwrap();
            for state in 0..301u64 {
                let hash = state.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                memory.insert(id, hash, minion * 1_000 + state).unwrap();
            }
        }
        assert_eq!(memory.len(), 30_100);
        assert_eq!(memory.blocks, 100 * 301usize.div_ceil(BLOCK));
        let id = memory.known("minion-42").unwrap();
        let hash = 300u64.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        assert_eq!(memory.get(id, hash), Some(42_300));
        assert_eq!(memory.of_state(hash).count(), 100);
    }

    /// States numbered apart leave room unused in their blocks: that room is
    /// bounded too (twice the pairs), and a pair needing a block past it is
    /// refused while the blocks there still take theirs.
    #[test]
    fn room_in_blocks_is_bounded() {
        let mut memory = MinionStates::new(64);
        assert_eq!(memory.max_blocks, 4);
        let [a, b, c, d] = ["a", "b", "c", "d"].map(|m| memory.minion(m).unwrap());
        for state in 0..32 {
            memory.insert(a, state, 1).unwrap();
        }
        memory.insert(b, 0, 2).unwrap();
        memory.insert(c, 1_000, 3).unwrap();
        memory.insert(d, 5, 4).unwrap();
        assert_eq!(memory.blocks, 4);
        assert_eq!(memory.insert(d, 1_000, 5), Err(Full), "no room for a block");
        assert_eq!(memory.get(d, 1_000), None);
        memory.insert(b, 1, 6).unwrap();
        assert_eq!(memory.get(b, 1), Some(6), "a block there takes a new pair");
        assert_eq!(memory.len(), 36);
    }
}
