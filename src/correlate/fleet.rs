//! The minions a rollout is measured against: those the master knows (one
//! file per accepted key in `<pki_dir>/minions`, named by the minion's id;
//! listed read-only, again only when the directory changes) and those seen on
//! the bus (a start, a return). A key removed takes its minion out. Bounded:
//! at most `max` minions; past it new ones are not counted (counted).

use std::path::PathBuf;
use std::time::SystemTime;

use foldhash::HashSet;
use tracing::warn;

use super::rollout::Members;
use crate::names::NameList;

#[derive(Debug)]
pub struct Fleet {
    dir: PathBuf,
    max: usize,
    /// The directory's modification time when last listed (`None`: not yet).
    checked: Option<Option<SystemTime>>,
    /// Accepted keys, when the directory could be read.
    keys: Option<HashSet<Box<str>>>,
    /// Minions seen on the bus, in the order they were first seen (a
    /// rollout takes in who joined since it last counted).
    seen: NameList,
    warned: bool,
    /// Bumped when the membership changed otherwise than by minions seen
    /// joining it (the keys listed again, or no longer readable).
    generation: u64,
    /// Minions not counted: the bound was reached.
    pub refused: u64,
}

impl Fleet {
    pub fn new(dir: PathBuf, max: usize) -> Self {
        Self {
            dir,
            max,
            checked: None,
            keys: None,
            seen: NameList::default(),
            warned: false,
            generation: 0,
            refused: 0,
        }
    }

    /// A minion showed itself on the bus.
    pub fn saw(&mut self, minion: &str) {
        if self.seen.len() < self.max {
            self.seen.insert(minion);
        } else if !self.seen.contains(minion) {
            self.refused += 1;
        }
    }

    /// A job expects `minions`: the fleet is at least that many, so room for
    /// them is made now (within the bound), with the job's publication,
    /// rather than a table of every minion seen being grown again under one
    /// of its returns (9 ms at 57,344 minions on the `big_job` bench).
    pub fn expect(&mut self, minions: usize) {
        let room = minions.min(self.max);
        self.seen.reserve(room.saturating_sub(self.seen.len()));
    }

    /// Lists the keys again if the directory changed (one `stat` when it did
    /// not). Whether the fleet may have changed otherwise than by minions
    /// seen joining it: not when the keys could not be read again (the fleet
    /// is still the minions seen).
    pub fn refresh(&mut self) -> bool {
        let modified = std::fs::metadata(&self.dir).and_then(|m| m.modified()).ok();
        let unchanged = self
            .checked
            .is_some_and(|before| before.is_some() && before == modified);
        self.checked = Some(modified);
        if unchanged {
            return false;
        }
        match crate::master_keys::accepted(&self.dir, self.max) {
            Ok(keys) => {
                self.warned = false;
                self.keys = Some(keys);
            }
            Err(error) => {
                if !std::mem::replace(&mut self.warned, true) {
                    warn!(dir = %self.dir.display(), %error, "Cannot list the master's accepted minion keys; rollouts count the minions seen on the bus.");
                }
                if self.keys.take().is_none() {
                    return false;
                }
            }
        }
        self.generation += 1;
        true
    }

    /// Whether `minion` is one of the fleet: an accepted key, or (when the
    /// keys cannot be read) seen on the bus.
    pub fn contains(&self, minion: &str) -> bool {
        match &self.keys {
            Some(keys) => keys.contains(minion),
            None => self.seen.contains(minion),
        }
    }

    /// Every minion of the fleet.
    pub fn members(&self) -> Vec<&str> {
        match &self.keys {
            Some(keys) => keys.iter().map(|k| &**k).collect(),
            None => self.seen.iter().collect(),
        }
    }

    pub fn len(&self) -> usize {
        match &self.keys {
            Some(keys) => keys.len(),
            None => self.seen.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Members for Fleet {
    fn has(&self, minion: &str) -> bool {
        self.contains(minion)
    }

    fn count(&self) -> usize {
        self.len()
    }

    fn listed(&self) -> Vec<&str> {
        self.members()
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    /// Only the minions seen join a fleet without a new generation: the
    /// keys, when readable, change only by being listed again.
    fn joined(&self, since: usize) -> impl Iterator<Item = &str> {
        let since = match &self.keys {
            Some(_) => usize::MAX,
            None => since,
        };
        self.seen.since(since)
    }

    fn bound(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_keys_are_the_fleet_and_a_removed_key_leaves_it() {
        let dir = tempfile::tempdir().unwrap();
        for id in ["web1", "web2", "db1"] {
            std::fs::write(dir.path().join(id), "-----BEGIN PUBLIC KEY-----\n").unwrap();
        }
        let mut fleet = Fleet::new(dir.path().to_path_buf(), 10);
        assert!(fleet.refresh());
        assert_eq!(fleet.len(), 3);
        fleet.saw("laptop9");
        assert!(
            !fleet.contains("laptop9"),
            "keys, when readable, are the fleet"
        );
        std::fs::remove_file(dir.path().join("db1")).unwrap();
        // A directory's mtime has a coarse clock on some filesystems: force it.
        fleet.checked = None;
        fleet.refresh();
        assert_eq!(fleet.len(), 2);
        assert!(!fleet.contains("db1"));
    }

    #[test]
    fn without_keys_the_minions_seen_on_the_bus_are_the_fleet_within_the_bound() {
        let mut fleet = Fleet::new("/nonexistent/saltsight-test/minions".into(), 2);
        fleet.refresh();
        fleet.saw("a");
        // Still unreadable: the fleet is still the minions seen, and no
        // rollout need be counted again over it.
        assert!(!fleet.refresh());
        assert_eq!(fleet.generation(), 0);
        fleet.saw("b");
        fleet.saw("c");
        fleet.saw("a");
        assert_eq!(fleet.len(), 2);
        assert_eq!(fleet.refused, 1);
        assert!(fleet.contains("a"));
        assert_eq!(
            fleet.joined(1).collect::<Vec<_>>(),
            ["b"],
            "in the order seen"
        );
    }

    /// A job's publication makes room for its minions, within the bound:
    /// their returns then never grow the table.
    #[test]
    fn a_published_job_makes_room_for_its_minions_within_the_bound() {
        let mut fleet = Fleet::new("/nonexistent/saltsight-test/minions".into(), 5_000);
        fleet.expect(3_000);
        let room = fleet.seen.capacities();
        assert!(room.0 >= 3_000, "{room:?}");
        for m in 0..3_000 {
            fleet.saw(&format!("web{m:04}.example.net"));
        }
        assert_eq!(fleet.seen.capacities(), room, "grown under the returns");
        fleet.expect(1_000_000);
        assert!(
            fleet.seen.capacities().0 < 20_000,
            "past the bound: {:?}",
            fleet.seen.capacities()
        );
    }
}
