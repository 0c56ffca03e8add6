//! A map bounded by count that forgets its oldest key first: what an output
//! keeps per open job (the reactor's notes, the OTLP traces' spans) until the
//! job closes. Removing a key is O(1); the order keeps removed keys until it
//! is twice the bound, then drops them in one pass, so it never holds more
//! than twice the bound. Keyed by text unless told otherwise: triage's memos
//! key theirs by a hash of what they remember.

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::hash::Hash;

use foldhash::{HashMap, HashMapExt};

#[derive(Debug)]
pub struct FifoMap<V, K = String> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    max: usize,
}

impl<V, K: Hash + Eq + Clone> FifoMap<V, K> {
    /// At most `max` entries (at least one).
    pub fn new(max: usize) -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
            max: max.max(1),
        }
    }

    /// The entry of `key`, made with `make` when new; the oldest entries are
    /// forgotten first to make room. Also how many were forgotten.
    pub fn entry<Q>(&mut self, key: &Q, make: impl FnOnce() -> V) -> (&mut V, u64)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let forgotten = if self.map.contains_key(key) {
            0
        } else {
            let forgotten = self.make_room();
            self.order.push_back(key.to_owned());
            self.map.insert(key.to_owned(), make());
            forgotten
        };
        let value = self
            .map
            .get_mut(key)
            .expect("the entry was there or was just made");
        (value, forgotten)
    }

    /// Replaces (or makes) the entry of `key`; how many were forgotten.
    pub fn insert<Q>(&mut self, key: &Q, value: V) -> u64
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(slot) = self.map.get_mut(key) {
            *slot = value;
            return 0;
        }
        let forgotten = self.make_room();
        self.order.push_back(key.to_owned());
        self.map.insert(key.to_owned(), value);
        forgotten
    }

    /// Room for one new key: removed keys leave the order in bulk, then the
    /// oldest live ones go. How many were forgotten.
    fn make_room(&mut self) -> u64 {
        if self.order.len() >= 2 * self.max {
            let map = &self.map;
            self.order.retain(|k| map.contains_key(k));
        }
        let mut forgotten = 0;
        while self.map.len() >= self.max {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if self.map.remove(&oldest).is_some() {
                forgotten += 1;
            }
        }
        forgotten
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.get(key)
    }

    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.contains_key(key)
    }

    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.get_mut(key)
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.remove(key)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_is_forgotten_first_and_counted() {
        let mut map = FifoMap::new(2);
        assert_eq!(map.insert("a", 1), 0);
        assert_eq!(map.insert("b", 2), 0);
        assert_eq!(map.insert("a", 3), 0, "a known key is replaced, not added");
        assert_eq!(map.insert("c", 4), 1);
        assert_eq!(
            (map.get("a"), map.get("b"), map.get("c")),
            (None, Some(&2), Some(&4))
        );
        let (value, forgotten) = map.entry("d", || 5);
        assert_eq!((*value, forgotten), (5, 1));
        assert_eq!(map.get("b"), None);
    }

    #[test]
    fn removed_keys_leave_the_order_and_make_room() {
        let mut map = FifoMap::new(3);
        for round in 0..100 {
            let key = format!("job{round}");
            assert_eq!(map.insert(&key, round), 0, "each closes before the next");
            assert_eq!(map.remove(&key), Some(round));
        }
        assert!(map.is_empty());
        assert!(
            map.order.len() <= 6,
            "the order holds at most twice the bound"
        );
    }
}
