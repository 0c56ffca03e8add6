//! A rollout's samples (the first [`SAMPLES`] names of its failed and of its
//! pending minions) kept as runs come, so a revision reads them rather than
//! walking the fleet: for each kind, a few hundred of its smallest names,
//! every one of the kind up to the largest held. A run takes one out or puts
//! one in; a revision walks the fleet again only when fewer than [`SAMPLES`]
//! are held and the kind has more (the held ones all ran): with runs in no
//! order, about once each time the kind shrinks 25 times over; with runs in
//! the order of their names (the worst), once each [`HELD`] runs, growing
//! fourfold each time to [`MAX_HELD`].

use std::collections::{BTreeSet, BinaryHeap};

use super::SAMPLES;

/// Names of one kind a rollout holds first.
pub const HELD: usize = 256;
/// Names of one kind a rollout holds at most.
pub const MAX_HELD: usize = 4_096;

/// The smallest names of one kind of the fleet's minions (failed, pending).
#[derive(Debug, Clone)]
pub struct Candidates {
    /// How many are held at most.
    keep: usize,
    names: BTreeSet<Box<str>>,
    /// Every minion of the kind named up to this one is held; `None`: every
    /// minion of the kind is.
    through: Option<Box<str>>,
}

impl Candidates {
    /// The [`HELD`] smallest of `names`, from one pass.
    #[cfg(test)]
    fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut gathering = Gathering::new(None);
        names.into_iter().for_each(|name| gathering.offer(name));
        gathering.done()
    }

    /// `name` is now of the kind.
    pub fn add(&mut self, name: &str) {
        if self.through.as_deref().is_some_and(|last| name > last) || self.names.contains(name) {
            return;
        }
        self.names.insert(name.into());
        if self.names.len() > self.keep {
            self.names.pop_last();
            self.through = self.names.last().cloned();
        }
    }

    /// `name` is no longer of the kind.
    pub fn remove(&mut self, name: &str) {
        self.names.remove(name);
    }

    /// The first [`SAMPLES`] names of the kind; `None` when fewer are held
    /// than the kind may have (a walk of the fleet must find them).
    pub fn first(&self) -> Option<impl Iterator<Item = &str>> {
        (self.names.len() >= SAMPLES || self.through.is_none())
            .then(|| self.names.iter().take(SAMPLES).map(|n| &**n))
    }
}

/// Names of one kind offered from a walk of the fleet, for [`Candidates`]:
/// the smallest kept in a max-heap of that many, so a pass over the fleet
/// keeps no list of it.
pub struct Gathering<'a> {
    keep: usize,
    smallest: BinaryHeap<&'a str>,
    offered: usize,
}

impl<'a> Gathering<'a> {
    /// To replace `before` (none: the first): as many held, four times as
    /// many (to [`MAX_HELD`]) when it ran short.
    pub fn new(before: Option<&Candidates>) -> Self {
        let keep = match before {
            None => HELD,
            Some(before) if before.first().is_none() => (before.keep * 4).min(MAX_HELD),
            Some(before) => before.keep,
        };
        Self {
            keep,
            smallest: BinaryHeap::with_capacity(keep + 1),
            offered: 0,
        }
    }

    pub fn offer(&mut self, name: &'a str) {
        self.offered += 1;
        if self.smallest.len() < self.keep {
            self.smallest.push(name);
        } else if self.smallest.peek().is_some_and(|largest| name < *largest) {
            self.smallest.pop();
            self.smallest.push(name);
        }
    }

    /// The smallest names offered, as many as are kept.
    pub fn done(self) -> Candidates {
        let names: BTreeSet<Box<str>> = self.smallest.into_iter().map(Box::from).collect();
        let through = (self.offered > names.len())
            .then(|| names.last().cloned())
            .flatten();
        Candidates {
            keep: self.keep,
            names,
            through,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(c: &Candidates) -> Option<Vec<&str>> {
        c.first().map(Iterator::collect)
    }

    /// Kept as names come and go, they are the smallest of the kind until
    /// too few are held to say (then a walk finds them again).
    #[test]
    fn the_smallest_names_are_kept_until_too_few_are_held_to_say() {
        let names: Vec<String> = (0..1_000).map(|i| format!("m{i:04}")).collect();
        let mut held = Candidates::of(names.iter().map(String::as_str).skip(500));
        assert_eq!(held.through.as_deref(), Some("m0755"));
        // Smaller ones joining are held; larger ones than the last held are
        // not (a walk finds them when needed).
        held.add("m0001");
        held.add("m0999");
        assert_eq!(
            first(&held).unwrap()[..3],
            ["m0001", "m0500", "m0501"],
            "{held:?}"
        );
        assert!(!held.names.contains("m0999"));
        assert_eq!(
            held.through.as_deref(),
            Some("m0754"),
            "one fell off the end"
        );
        for name in names.iter().skip(500).take(245) {
            held.remove(name);
        }
        // m0001 and m0745..=m0754 held: still every one up to m0754.
        assert_eq!(first(&held).unwrap().len(), SAMPLES);
        held.remove("m0001");
        held.remove("m0745");
        assert_eq!(first(&held), None, "m0755 and past it are not held");
        // Every one of a kind held: never too few.
        let mut all = Candidates::of(["b", "a"]);
        all.remove("a");
        assert_eq!(first(&all).unwrap(), ["b"]);
        all.add("c");
        assert_eq!(first(&all).unwrap(), ["b", "c"]);
    }
}
