//! Containers whose clone is a snapshot taken in a few microseconds, however
//! much they hold: their entries live in parts behind an `Arc`, a clone
//! shares the parts, and a write to a part a snapshot still holds copies that
//! part first (copy on write). A checkpoint clones the stages' per-minion
//! memories between two events and encodes the clones on a thread of its
//! own; the pipeline then pays, after it, one copy of each part it writes
//! while the clone is being encoded (a part is a 64th of a map, or 1,024
//! entries of a list), never a copy of the whole.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};
use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// Entries of a [`CowVec`] part.
const CHUNK: usize = 1024;
/// Parts of a [`CowMap`].
const SHARDS: usize = 64;

/// A list that only grows, in parts of [`CHUNK`] entries.
#[derive(Debug)]
pub struct CowVec<T> {
    chunks: Vec<Arc<Vec<T>>>,
    len: usize,
}

impl<T> Clone for CowVec<T> {
    fn clone(&self) -> Self {
        Self {
            chunks: self.chunks.clone(),
            len: self.len,
        }
    }
}

impl<T> Default for CowVec<T> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Clone> CowVec<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, value: T) {
        if self.len % CHUNK == 0 {
            self.chunks.push(Arc::new(Vec::with_capacity(CHUNK)));
        }
        if let Some(last) = self.chunks.last_mut() {
            Arc::make_mut(last).push(value);
            self.len += 1;
        }
    }

    pub fn get(&self, at: usize) -> Option<&T> {
        self.chunks.get(at / CHUNK)?.get(at % CHUNK)
    }

    /// The entry, its part copied first if a snapshot shares it.
    pub fn get_mut(&mut self, at: usize) -> Option<&mut T> {
        Arc::make_mut(self.chunks.get_mut(at / CHUNK)?).get_mut(at % CHUNK)
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }
}

impl<T: Clone> FromIterator<T> for CowVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(values: I) -> Self {
        let mut list = Self::default();
        for value in values {
            list.push(value);
        }
        list
    }
}

/// Its entries owned: a part no snapshot shares is moved, not copied.
impl<T: Clone> IntoIterator for CowVec<T> {
    type Item = T;
    type IntoIter =
        std::iter::FlatMap<std::vec::IntoIter<Arc<Vec<T>>>, Vec<T>, fn(Arc<Vec<T>>) -> Vec<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks
            .into_iter()
            .flat_map(Arc::unwrap_or_clone as fn(Arc<Vec<T>>) -> Vec<T>)
    }
}

/// Written as one list, as a `Vec` is: a checkpoint reads either.
impl<T: Serialize> Serialize for CowVec<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len))?;
        for value in self.chunks.iter().flat_map(|chunk| chunk.iter()) {
            seq.serialize_element(value)?;
        }
        seq.end()
    }
}

impl<'de, T: Deserialize<'de> + Clone> Deserialize<'de> for CowVec<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Vec::<T>::deserialize(deserializer)?.into_iter().collect())
    }
}

impl<T: Clone> std::ops::Index<usize> for CowVec<T> {
    type Output = T;

    fn index(&self, at: usize) -> &T {
        &self.chunks[at / CHUNK][at % CHUNK]
    }
}

/// A map in [`SHARDS`] parts, a key's part chosen by its hash: a part grows
/// (rehashes) on its own, so no insert moves more than a 64th of the map.
#[derive(Debug)]
pub struct CowMap<K, V> {
    shards: Vec<Arc<HashMap<K, V>>>,
    len: usize,
}

impl<K, V> Clone for CowMap<K, V> {
    fn clone(&self) -> Self {
        Self {
            shards: self.shards.clone(),
            len: self.len,
        }
    }
}

impl<K, V> Default for CowMap<K, V> {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Arc::new(HashMap::new())).collect(),
            len: 0,
        }
    }
}

/// The part a key is in: the same for every map and every run.
fn shard_of<Q: Hash + ?Sized>(key: &Q) -> usize {
    let hash = foldhash::fast::FixedState::with_seed(0x5a17_5167).hash_one(key);
    (hash >> (64 - SHARDS.trailing_zeros())) as usize
}

impl<K: Hash + Eq + Clone, V: Clone> CowMap<K, V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shards[shard_of(key)].get(key)
    }

    /// The value, its part copied first if a snapshot shares it.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let shard = &mut self.shards[shard_of(key)];
        if !shard.contains_key(key) {
            return None; // not copied for a key it does not hold
        }
        Arc::make_mut(shard).get_mut(key)
    }

    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let shard = Arc::make_mut(&mut self.shards[shard_of(key.borrow())]);
        let before = shard.insert(key, value);
        if before.is_none() {
            self.len += 1;
        }
        before
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.shards.iter().flat_map(|shard| shard.iter())
    }

    /// Room made for `additional` more entries, spread over the parts.
    pub fn reserve(&mut self, additional: usize) {
        let each = additional.div_ceil(SHARDS);
        for shard in &mut self.shards {
            Arc::make_mut(shard).reserve(each);
        }
    }

    /// The entries the parts hold room for.
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(|shard| shard.capacity()).sum()
    }
}

impl<K: Hash + Eq + Clone, V: Clone> FromIterator<(K, V)> for CowMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        let mut map = Self::default();
        for (key, value) in entries {
            map.insert(key, value);
        }
        map
    }
}

/// Written as one map, as a `HashMap` is: a checkpoint reads either.
impl<K: Serialize, V: Serialize> Serialize for CowMap<K, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len))?;
        for (key, value) in self.shards.iter().flat_map(|shard| shard.iter()) {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de, K, V> Deserialize<'de> for CowMap<K, V>
where
    K: Deserialize<'de> + Hash + Eq + Clone,
    V: Deserialize<'de> + Clone,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let entries: HashMap<K, V> = HashMap::deserialize(deserializer)?;
        Ok(entries.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written and read back as a plain list, and taken apart owned, in
    /// order, across its parts.
    #[test]
    fn a_list_is_written_as_a_vec_and_taken_apart_in_order() {
        let list: CowVec<u32> = (0..CHUNK as u32 + 5).collect();
        let written = rmp_serde::to_vec(&list).unwrap();
        let as_vec: Vec<u32> = rmp_serde::from_slice(&written).unwrap();
        assert_eq!(as_vec, (0..CHUNK as u32 + 5).collect::<Vec<_>>());
        let read: CowVec<u32> = rmp_serde::from_slice(&written).unwrap();
        let snapshot = read.clone();
        assert_eq!(read.into_iter().collect::<Vec<_>>(), as_vec);
        assert_eq!(snapshot.len(), CHUNK + 5, "a snapshot keeps its own");
    }

    /// A clone is the memory as it was: writes after it go to copies of the
    /// parts they touch, and only those parts are copied.
    #[test]
    fn a_clone_keeps_the_memory_as_it_was_and_a_write_copies_one_part() {
        let mut list: CowVec<u32> = (0..3 * CHUNK as u32).collect();
        let snapshot = list.clone();
        *list.get_mut(5).unwrap() = 99;
        list.push(7);
        assert_eq!((snapshot[5], snapshot.len()), (5, 3 * CHUNK));
        assert_eq!(
            (list[5], list.len(), list[3 * CHUNK]),
            (99, 3 * CHUNK + 1, 7)
        );
        let shared = |a: &CowVec<u32>, b: &CowVec<u32>| {
            a.chunks
                .iter()
                .zip(&b.chunks)
                .filter(|(x, y)| Arc::ptr_eq(x, y))
                .count()
        };
        assert_eq!(shared(&list, &snapshot), 2, "the part written, copied");

        let mut map: CowMap<Box<str>, u32> = (0..5_000)
            .map(|i| (format!("web{i}").into_boxed_str(), i))
            .collect();
        let snapshot = map.clone();
        *map.get_mut("web7").unwrap() = 70;
        assert!(map.get_mut("db1").is_none());
        map.insert("db1".into(), 1);
        assert_eq!(
            (snapshot.get("web7"), snapshot.get("db1")),
            (Some(&7), None)
        );
        assert_eq!(
            (map.get("web7"), map.get("db1"), map.len()),
            (Some(&70), Some(&1), 5_001)
        );
        let copied = map
            .shards
            .iter()
            .zip(&snapshot.shards)
            .filter(|(x, y)| !Arc::ptr_eq(x, y))
            .count();
        assert!(copied <= 2, "{copied} parts copied for two writes");
        let written = rmp_serde::to_vec(&map).unwrap();
        let read: CowMap<Box<str>, u32> = rmp_serde::from_slice(&written).unwrap();
        let plain: std::collections::HashMap<Box<str>, u32> =
            rmp_serde::from_slice(&written).unwrap();
        assert_eq!(
            (read.len(), read.get("web7"), plain.len()),
            (5_001, Some(&70), 5_001)
        );
    }
}
