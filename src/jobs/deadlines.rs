//! Deadlines ordered by time: the next one is the first entry, firing is popping
//! from the front. No scan of all jobs per tick. Also the retention rule for what
//! the tracker remembers after a job closes.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use foldhash::HashMap;

use crate::time::Stamp;

#[derive(Debug, Default)]
pub struct Deadlines {
    queue: BTreeSet<(Stamp, Box<str>)>,
}

impl Deadlines {
    pub fn insert(&mut self, at: Stamp, jid: &str) {
        self.queue.insert((at, jid.into()));
    }

    pub fn remove(&mut self, at: Stamp, jid: &str) {
        self.queue.remove(&(at, Box::from(jid)));
    }

    pub fn next(&self) -> Option<Stamp> {
        self.queue.first().map(|(at, _)| *at)
    }

    /// Removes and returns the earliest entry due at or before `now`.
    pub fn pop_due(&mut self, now: Stamp) -> Option<(Stamp, Box<str>)> {
        if self.queue.first().is_some_and(|(at, _)| *at <= now) {
            self.queue.pop_first()
        } else {
            None
        }
    }

    /// Removes and returns the earliest entry, due or not (eviction).
    pub fn pop_first(&mut self) -> Option<(Stamp, Box<str>)> {
        self.queue.pop_first()
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// Forgets entries of `map` (in insertion order, `order`) older than `window` at
/// `now`, and the oldest beyond `cap`.
pub fn prune<V>(
    order: &mut VecDeque<(Stamp, Box<str>)>,
    map: &mut HashMap<Box<str>, V>,
    now: Stamp,
    window: Duration,
    cap: usize,
) {
    while let Some((at, _)) = order.front() {
        if at.plus(window) > now && order.len() <= cap {
            break;
        }
        if let Some((_, key)) = order.pop_front() {
            map.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_order_only_when_due() {
        let mut d = Deadlines::default();
        d.insert(Stamp(30), "b");
        d.insert(Stamp(10), "a");
        d.insert(Stamp(20), "c");
        assert_eq!(d.next(), Some(Stamp(10)));
        assert_eq!(d.pop_due(Stamp(5)), None);
        assert_eq!(d.pop_due(Stamp(25)).map(|(_, j)| j), Some("a".into()));
        assert_eq!(d.pop_due(Stamp(25)).map(|(_, j)| j), Some("c".into()));
        assert_eq!(d.pop_due(Stamp(25)), None);
        d.remove(Stamp(30), "b");
        assert!(d.is_empty());
    }
}
