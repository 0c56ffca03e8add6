//! A job's expected minions and where each of them is, kept small. A map of
//! boxed names cost a 500-minion job about 58 KB (a table sized to the next
//! power of two, an allocation per name); here it is the names in the order
//! Salt listed them, in one string with an offset each and a table of
//! places ([`NameList`]: taken in one pass, no sort), and a byte of state
//! per minion. The names are kept once for the open jobs that expect the
//! same minions ([`SharedLists`]): a fleet's highstate every half hour,
//! or a schedule's job, expects the same list each time, and 500 such jobs
//! open (2% of their minions missing, kept to the deadline) held 1.4 MB of
//! copies of 100 names. When a find_job last asked a pending minion is kept
//! apart, for the few it asked about.
//!
//! In a checkpoint it is written as it is held (`compact`): the names'
//! text, their lengths, the state bytes and the find_job times, so a
//! 200,000-minion job is a few megabytes copied, not 200,000 map entries
//! encoded one by one (10 MB in 40 ms before, on the `big_job` bench). The
//! map of names to states that checkpoints of format 1 hold reads back too.

use std::sync::{Arc, Weak};

use foldhash::HashMap;

use crate::jobs::verdict::{Evidence, MinionState};
use crate::names::NameList;
use crate::time::Stamp;

/// The low two bits of a state byte: which state.
const KIND: u8 = 0b11;
const PENDING: u8 = 0;
const RETURNED: u8 = 1;
const UNREADABLE: u8 = 2;
const NOT_CONNECTED: u8 = 3;
/// A pending minion restarted since the job was published.
const RESTARTED: u8 = 0b100;
/// A pending minion's evidence, two bits from here.
const EVIDENCE_SHIFT: u8 = 3;
/// With `PENDING`: queued by a batch, not sent yet; with `NOT_CONNECTED`:
/// never sent by its batch.
const BATCH: u8 = 0b10_0000;
/// Lists of expected minions a new job's is compared with: the last made.
const SHARED_LISTS: usize = 16;

/// The lists of expected minions open jobs hold, each kept once: a new job
/// expecting the same minions (in any order) as one of the last
/// [`SHARED_LISTS`] lists made shares it. A list is freed with the last job
/// holding it; an older one is not looked for (a new job expecting it holds
/// a copy of its own).
#[derive(Debug, Default)]
pub struct SharedLists {
    lists: Vec<Weak<NameList>>,
}

impl SharedLists {
    fn share(&mut self, given: &[&str]) -> Arc<NameList> {
        let mut live = self.lists.iter().filter_map(Weak::upgrade);
        if let Some(names) = live.find(|names| names.are(given)) {
            return names;
        }
        let names = Arc::new(NameList::of(given.iter().copied()));
        self.keep(&names);
        names
    }

    /// A list to share that may be a big job's: a live one of `len` names.
    pub fn like(&self, len: usize) -> Option<Arc<NameList>> {
        self.lists
            .iter()
            .filter_map(Weak::upgrade)
            .find(|names| names.len() == len)
    }

    /// `names` offered to the jobs that follow, the oldest offered
    /// forgotten past [`SHARED_LISTS`].
    pub fn keep(&mut self, names: &Arc<NameList>) {
        self.lists.retain(|list| list.strong_count() > 0);
        if self.lists.len() >= SHARED_LISTS {
            self.lists.remove(0);
        }
        self.lists.push(Arc::downgrade(names));
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct JobMinions {
    /// The names, shared with the open jobs that expect the same minions.
    names: Arc<NameList>,
    /// Each minion's state as a byte ([`pack`]), by position.
    states: Vec<u8>,
    /// When a find_job last asked each pending minion it asked about, by
    /// position.
    asked: HashMap<usize, Stamp>,
}

impl JobMinions {
    /// These minions, all pending; a name given twice is one minion.
    pub fn pending<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        Self::of(Arc::new(NameList::of(names)))
    }

    /// These minions, all pending, their names shared with an open job that
    /// expects the same.
    pub fn pending_shared(lists: &mut SharedLists, names: &[&str]) -> Self {
        Self::of(lists.share(names))
    }

    /// No minions yet, with room for `expected`: a big job's list, taken a
    /// slice at a time ([`JobMinions::take`]), its own until every name is
    /// taken ([`JobMinions::share`]).
    pub fn growing(expected: usize) -> Self {
        let mut names = NameList::default();
        names.reserve(expected);
        JobMinions {
            names: Arc::new(names),
            states: Vec::with_capacity(expected),
            asked: HashMap::default(),
        }
    }

    /// Lists `name` last, pending, unless listed already: where it is, and
    /// whether it is new.
    pub fn take(&mut self, name: &str) -> (usize, bool) {
        let at = Arc::make_mut(&mut self.names).insert(name);
        let new = at == self.states.len();
        if new {
            self.states.push(PENDING);
        }
        (at, new)
    }

    /// Its list of names, to offer to the jobs that follow.
    pub fn names(&self) -> &Arc<NameList> {
        &self.names
    }

    /// Its names swapped for `list`, the same names in another order
    /// (`places`: where each of its own is in `list`), each state moved to
    /// its minion's place.
    pub fn share(&mut self, list: Arc<NameList>, places: &[u32]) {
        let mut states = vec![PENDING; list.len()];
        for (&state, &place) in self.states.iter().zip(places) {
            states[place as usize] = state;
        }
        self.asked = std::mem::take(&mut self.asked)
            .into_iter()
            .filter_map(|(at, asked)| Some((*places.get(at)? as usize, asked)))
            .collect();
        self.states = states;
        self.names = list;
    }

    /// Whether it holds the same list of names as `other`, not a copy.
    #[cfg(test)]
    pub fn shares_names_with(&self, other: &JobMinions) -> bool {
        Arc::ptr_eq(&self.names, &other.names)
    }

    fn of(names: Arc<NameList>) -> Self {
        JobMinions {
            states: vec![PENDING; names.len()],
            names,
            asked: HashMap::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// Where `name` is, if the job expects it.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.names.position(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// The state of the minion at `at` (a [`JobMinions::position`]).
    pub fn state(&self, at: usize) -> MinionState {
        unpack(self.states[at], self.asked.get(&at).copied())
    }

    /// Sets the state of the minion at `at` (a [`JobMinions::position`]).
    pub fn set(&mut self, at: usize, state: MinionState) {
        let (byte, asked_at) = pack(state);
        self.states[at] = byte;
        match asked_at {
            Some(asked_at) => {
                self.asked.insert(at, asked_at);
            }
            None if !self.asked.is_empty() => {
                self.asked.remove(&at);
            }
            None => {}
        }
    }

    /// Changes the state of `name` with `change`, if the job expects it.
    pub fn update(&mut self, name: &str, change: impl FnOnce(&mut MinionState)) {
        if let Some(at) = self.position(name) {
            let mut state = self.state(at);
            change(&mut state);
            self.set(at, state);
        }
    }

    /// Adds the minions it does not expect yet, each in `state` (a batch's
    /// sub-batch naming minions the batch did not announce); says how many.
    /// The list is made again, so this is for the rare case, not per return.
    pub fn add<'a>(
        &mut self,
        lists: &mut SharedLists,
        names: impl IntoIterator<Item = &'a str>,
        state: MinionState,
    ) -> usize {
        let given = NameList::of(names);
        let new: Vec<&str> = given.iter().filter(|name| !self.contains(name)).collect();
        if new.is_empty() {
            return 0;
        }
        let old: Vec<(String, MinionState)> = self
            .iter()
            .map(|(name, state)| (name.to_owned(), state))
            .collect();
        let all: Vec<&str> = old
            .iter()
            .map(|(name, _)| name.as_str())
            .chain(new.iter().copied())
            .collect();
        let mut grown = JobMinions::of(lists.share(&all));
        for (name, state) in &old {
            grown.update(name, |s| *s = *state);
        }
        for name in &new {
            grown.update(name, |s| *s = state);
        }
        *self = grown;
        new.len()
    }

    /// Every minion with its state, in the order Salt listed them.
    pub fn iter(&self) -> impl Iterator<Item = (&str, MinionState)> {
        (0..self.len()).map(|at| (self.name(at), self.state(at)))
    }

    fn name(&self, at: usize) -> &str {
        self.names.name(at)
    }
}

fn pack(state: MinionState) -> (u8, Option<Stamp>) {
    match state {
        MinionState::Pending {
            restarted,
            evidence,
            asked_at,
        } => {
            let evidence = match evidence {
                Evidence::Nothing => 0,
                Evidence::StillRunning => 1,
                Evidence::NotRunning => 2,
            };
            let restarted = if restarted { RESTARTED } else { 0 };
            (PENDING | restarted | evidence << EVIDENCE_SHIFT, asked_at)
        }
        MinionState::Returned => (RETURNED, None),
        MinionState::Unreadable => (UNREADABLE, None),
        MinionState::NotConnected => (NOT_CONNECTED, None),
        MinionState::Queued => (PENDING | BATCH, None),
        MinionState::NotSent => (NOT_CONNECTED | BATCH, None),
    }
}

fn unpack(byte: u8, asked_at: Option<Stamp>) -> MinionState {
    match byte & KIND {
        PENDING if byte & BATCH != 0 => MinionState::Queued,
        NOT_CONNECTED if byte & BATCH != 0 => MinionState::NotSent,
        PENDING => MinionState::Pending {
            restarted: byte & RESTARTED != 0,
            evidence: match byte >> EVIDENCE_SHIFT {
                1 => Evidence::StillRunning,
                2 => Evidence::NotRunning,
                _ => Evidence::Nothing,
            },
            asked_at,
        },
        RETURNED => MinionState::Returned,
        UNREADABLE => MinionState::Unreadable,
        _ => MinionState::NotConnected,
    }
}

mod compact;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::compact::Bytes;
    use super::*;

    impl JobMinions {
        fn get(&self, name: &str) -> Option<MinionState> {
            self.position(name).map(|at| self.state(at))
        }
    }

    fn every_state() -> Vec<MinionState> {
        let mut states = vec![
            MinionState::Returned,
            MinionState::Unreadable,
            MinionState::NotConnected,
            MinionState::Queued,
            MinionState::NotSent,
        ];
        for restarted in [false, true] {
            for evidence in [
                Evidence::Nothing,
                Evidence::StillRunning,
                Evidence::NotRunning,
            ] {
                for asked_at in [None, Some(Stamp(1_700_000_000_000_000))] {
                    states.push(MinionState::Pending {
                        restarted,
                        evidence,
                        asked_at,
                    });
                }
            }
        }
        states
    }

    #[test]
    fn every_state_is_kept_as_it_was_set() {
        let states = every_state();
        let names: Vec<String> = (0..states.len()).map(|i| format!("m{i:02}")).collect();
        let mut minions = JobMinions::pending(names.iter().map(String::as_str));
        for (name, state) in names.iter().zip(&states) {
            let at = minions.position(name).expect("expected");
            minions.set(at, *state);
        }
        for (name, state) in names.iter().zip(&states) {
            assert_eq!(minions.get(name), Some(*state), "{name}");
        }
        // A state set again loses what the earlier one had.
        let at = minions.position("m09").expect("expected");
        minions.set(at, MinionState::Returned);
        assert_eq!(minions.get("m09"), Some(MinionState::Returned));
        assert!(minions.asked.len() < states.len());
    }

    #[test]
    fn names_are_kept_in_the_order_given_and_duplicates_are_one() {
        let given = ["web-2", "db-1", "web-10", "", "web-2", "é-minion", "a"];
        let minions = JobMinions::pending(given);
        assert_eq!(minions.len(), 6);
        for name in given {
            assert!(minions.contains(name), "{name:?}");
            assert!(matches!(
                minions.get(name),
                Some(MinionState::Pending { .. })
            ));
        }
        for absent in ["web", "web-1", "web-20", "z", "db-1 "] {
            assert_eq!(minions.position(absent), None, "{absent:?}");
        }
        let order: Vec<&str> = minions.iter().map(|(name, _)| name).collect();
        assert_eq!(order, ["web-2", "db-1", "web-10", "", "é-minion", "a"]);
        assert_eq!(JobMinions::pending([]).len(), 0);
    }

    /// Every state, and a find_job's times, as a checkpoint writes them
    /// and reads them back; the map of names to states of format 1 reads
    /// back the same.
    #[test]
    fn a_checkpoint_gives_back_every_state_and_reads_the_map_of_format_1() {
        let states = every_state();
        let before: BTreeMap<String, MinionState> = states
            .iter()
            .enumerate()
            .map(|(i, state)| (format!("minion-{i}-é"), *state))
            .chain([("x".repeat(300), MinionState::Returned)])
            .collect();
        let mut minions = JobMinions::pending(before.keys().map(String::as_str));
        for (name, state) in &before {
            let at = minions.position(name).expect("expected");
            minions.set(at, *state);
        }
        let written = rmp_serde::to_vec(&minions).expect("encodes");
        let read: JobMinions = rmp_serde::from_slice(&written).expect("decodes");
        assert_eq!(read, minions);
        let read_map: BTreeMap<String, MinionState> =
            read.iter().map(|(n, s)| (n.to_owned(), s)).collect();
        assert_eq!(read_map, before);
        // Smaller than the map it replaced.
        let format_1 = rmp_serde::to_vec(&before).expect("encodes");
        assert!(
            written.len() < format_1.len(),
            "{} against {}",
            written.len(),
            format_1.len()
        );
        let read: JobMinions =
            rmp_serde::from_slice(&format_1).expect("the map of format 1 decodes");
        assert_eq!(read, minions);
    }

    /// A compact form that does not hold together is refused, naming why.
    #[test]
    fn a_damaged_compact_form_is_refused() {
        let refused = |text: &str, lengths: &[u8], states: &[u8], asked: Vec<(usize, Stamp)>| {
            let written =
                rmp_serde::to_vec(&(text, Bytes(lengths), Bytes(states), asked)).expect("encodes");
            match rmp_serde::from_slice::<JobMinions>(&written) {
                Ok(read) => panic!("read as {read:?}"),
                Err(error) => error.to_string(),
            }
        };
        let good: JobMinions = rmp_serde::from_slice(
            &rmp_serde::to_vec(&(
                "ab",
                Bytes(&[1, 1]),
                Bytes(&[RETURNED, PENDING]),
                Vec::<(usize, Stamp)>::new(),
            ))
            .expect("encodes"),
        )
        .expect("a good one decodes");
        assert_eq!(
            good.iter().collect::<Vec<_>>()[0],
            ("a", MinionState::Returned)
        );
        let t = Stamp(1);
        for (why, text, lengths, states, asked) in [
            ("do not add up", "abc", &[1u8, 1][..], &[0u8, 0][..], vec![]),
            ("do not cut", "é", &[1u8, 1][..], &[0u8, 0][..], vec![]),
            ("listed twice", "aa", &[1u8, 1][..], &[0u8, 0][..], vec![]),
            (
                "3 states for 2 names",
                "ab",
                &[1u8, 1][..],
                &[0u8, 0, 0][..],
                vec![],
            ),
            (
                "no known form",
                "ab",
                &[1u8, 1][..],
                &[0u8, 0x40][..],
                vec![],
            ),
            (
                "minion 2 of 2",
                "ab",
                &[1u8, 1][..],
                &[0u8, 0][..],
                vec![(2, t)],
            ),
            (
                "does not fit",
                "ab",
                &[0xffu8, 0xff, 0xff, 0xff, 0xff, 0x01][..],
                &[0u8][..],
                vec![],
            ),
        ] {
            let error = refused(text, lengths, states, asked);
            assert!(error.contains(why), "{why}: {error}");
        }
    }

    #[test]
    fn minions_added_later_keep_every_state_and_find_their_place() {
        let mut lists = SharedLists::default();
        let mut minions = JobMinions::pending_shared(&mut lists, &["web-2", "db-1"]);
        let asked = Some(Stamp(1_700_000_000_000_000));
        let at = minions.position("web-2").expect("expected");
        minions.set(
            at,
            MinionState::Pending {
                restarted: true,
                evidence: Evidence::StillRunning,
                asked_at: asked,
            },
        );
        minions.update("db-1", |s| *s = MinionState::Returned);
        let added = minions.add(
            &mut lists,
            ["web-1", "db-1", "app-1", "web-1"],
            MinionState::Queued,
        );
        assert_eq!(added, 2, "db-1 is there already, web-1 is one");
        let order: Vec<(&str, MinionState)> = minions.iter().collect();
        assert_eq!(
            order,
            [
                (
                    "web-2",
                    MinionState::Pending {
                        restarted: true,
                        evidence: Evidence::StillRunning,
                        asked_at: asked
                    }
                ),
                ("db-1", MinionState::Returned),
                ("web-1", MinionState::Queued),
                ("app-1", MinionState::Queued),
            ]
        );
        assert_eq!(minions.add(&mut lists, ["web-2"], MinionState::Queued), 0);
    }

    #[test]
    fn jobs_expecting_the_same_minions_share_their_names() {
        let mut lists = SharedLists::default();
        let mut first = JobMinions::pending_shared(&mut lists, &["web-2", "web-1", "db-1"]);
        let second = JobMinions::pending_shared(&mut lists, &["db-1", "web-1", "web-2", "db-1"]);
        let other = JobMinions::pending_shared(&mut lists, &["db-1", "web-1"]);
        assert!(Arc::ptr_eq(&first.names, &second.names), "the same minions");
        assert!(!Arc::ptr_eq(&first.names, &other.names));
        assert_eq!(other.len(), 2);

        // Each job's states are its own.
        let at = first.position("web-1").expect("expected");
        first.set(at, MinionState::Returned);
        assert_eq!(first.get("web-1"), Some(MinionState::Returned));
        assert!(matches!(
            second.get("web-1"),
            Some(MinionState::Pending { .. })
        ));

        // A list goes with the last job holding it.
        let kept = Arc::downgrade(&first.names);
        drop((first, second));
        assert!(kept.upgrade().is_none());
        let again = JobMinions::pending_shared(&mut lists, &["web-1", "web-2", "db-1"]);
        assert_eq!(again.len(), 3);

        // Only the last lists made are looked for.
        let held: Vec<JobMinions> = (0..SHARED_LISTS)
            .map(|i| JobMinions::pending_shared(&mut lists, &[format!("m{i}").as_str()]))
            .collect();
        assert!(lists.lists.len() <= SHARED_LISTS);
        let late = JobMinions::pending_shared(&mut lists, &["web-1", "web-2", "db-1"]);
        assert!(
            !Arc::ptr_eq(&again.names, &late.names),
            "too old to be found"
        );
        assert_eq!(late, again, "the same minions all the same");
        let last = JobMinions::pending_shared(&mut lists, &["m15"]);
        assert!(Arc::ptr_eq(&last.names, &held[15].names));
    }
}
