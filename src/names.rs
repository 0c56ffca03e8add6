//! A list of distinct names in the order first given, each found by name:
//! the names one after another in one string with an offset each (no
//! allocation per name), and a table of their places hashed by the name.
//! Made in one pass, with no sort: a 200,000-minion job's list is taken in
//! about as long as its event takes to decode (its names sorted took five
//! times that on the `big_job` bench, in the order Salt gives them).

use std::hash::BuildHasher;

use foldhash::fast::FixedState;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

#[derive(Debug, Default, Clone)]
pub struct NameList {
    text: String,
    /// Where each name starts in `text`, then where the last one ends.
    starts: Vec<usize>,
    /// Each name's place, hashed by the name.
    places: HashTable<u32>,
}

/// A list read back that is not one (from a damaged checkpoint).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadList {
    #[error("the names' offsets do not cut their text at characters, in order")]
    Cut,
    #[error("the name {0:?} is listed twice")]
    Repeated(String),
}

fn hash(name: &str) -> u64 {
    FixedState::default().hash_one(name)
}

/// The name at `place` of `text` cut at `starts` (the table's closures see
/// the parts, not the list, while it is borrowed to change).
fn named<'a>(text: &'a str, starts: &[usize], place: u32) -> &'a str {
    let place = place as usize;
    &text[starts[place]..starts[place + 1]]
}

impl NameList {
    /// The distinct names of `names`, in the order first given.
    pub fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let names = names.into_iter();
        let mut list = Self::default();
        list.reserve(names.size_hint().0);
        for name in names {
            list.insert(name);
        }
        list
    }

    /// A list held as `text` cut at `starts` (from zero to the text's end,
    /// in order, each at a character), as [`NameList::parts`] gives it.
    pub fn from_parts(text: String, starts: Vec<usize>) -> Result<Self, BadList> {
        let cut = match starts.as_slice() {
            [] => text.is_empty(),
            [first, .., last] | [first @ last] => {
                *first == 0
                    && *last == text.len()
                    && starts.windows(2).all(|w| w[0] <= w[1])
                    && starts.iter().all(|at| text.is_char_boundary(*at))
            }
        };
        if !cut || u32::try_from(starts.len()).is_err() {
            return Err(BadList::Cut);
        }
        let mut list = Self {
            text,
            starts,
            places: HashTable::new(),
        };
        let count = list.len();
        let Self {
            text,
            starts,
            places,
        } = &mut list;
        let name = |at: u32| named(text, starts, at);
        places.reserve(count, |&at| hash(name(at)));
        for at in 0..count as u32 {
            let this = name(at);
            let hashed = hash(this);
            if places.find(hashed, |&other| name(other) == this).is_some() {
                return Err(BadList::Repeated(this.to_owned()));
            }
            places.insert_unique(hashed, at, |&other| hash(name(other)));
        }
        Ok(list)
    }

    /// The text and where each name starts in it (then where the last ends).
    pub fn parts(&self) -> (&str, &[usize]) {
        (&self.text, &self.starts)
    }

    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name at `at` (below [`NameList::len`]).
    pub fn name(&self, at: usize) -> &str {
        &self.text[self.starts[at]..self.starts[at + 1]]
    }

    /// Where `name` is, if listed.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.places
            .find(hash(name), |&at| self.name(at as usize) == name)
            .map(|&at| at as usize)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// Lists `name` last unless listed already; where it is. One hash and
    /// one probe of the table either way.
    pub fn insert(&mut self, name: &str) -> usize {
        let Self {
            text,
            starts,
            places,
        } = self;
        if starts.is_empty() {
            starts.push(0);
        }
        let at = starts.len() - 1;
        match places.entry(
            hash(name),
            |&place| named(text, starts, place) == name,
            |&place| hash(named(text, starts, place)),
        ) {
            Entry::Occupied(held) => *held.get() as usize,
            Entry::Vacant(room) => {
                // Lists are bounded far below (`jobs.max_expected`, the
                // fleet's bound): a place always fits.
                room.insert(u32::try_from(at).unwrap_or(u32::MAX));
                text.push_str(name);
                starts.push(text.len());
                at
            }
        }
    }

    /// Room for `additional` more names (their text as long as the names'
    /// so far, on average; 32 bytes each in an empty list).
    pub fn reserve(&mut self, additional: usize) {
        let average = match self.len() {
            0 => 32,
            names => self.text.len().div_ceil(names),
        };
        let Self {
            text,
            starts,
            places,
        } = self;
        text.reserve(additional.saturating_mul(average));
        starts.reserve(additional + usize::from(starts.is_empty()));
        places.reserve(additional, |&other| hash(named(text, starts, other)));
    }

    /// Every name, in the order listed.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).map(|at| self.name(at))
    }

    /// The names listed after the first `since`.
    pub fn since(&self, since: usize) -> impl Iterator<Item = &str> {
        (since.min(self.len())..self.len()).map(|at| self.name(at))
    }

    /// Whether the names are those of `names`, in any order, a name given
    /// twice being one: each of them listed, and every listed one given.
    pub fn are(&self, names: &[&str]) -> bool {
        if names.len() < self.len() {
            return false;
        }
        let mut seen = vec![false; self.len()];
        let mut distinct = 0;
        let all_listed = names.iter().all(|name| match self.position(name) {
            Some(at) => {
                distinct += usize::from(!std::mem::replace(&mut seen[at], true));
                true
            }
            None => false,
        });
        all_listed && distinct == self.len()
    }

    /// The room of its table, its offsets and its text.
    #[cfg(test)]
    pub fn capacities(&self) -> (usize, usize, usize) {
        (
            self.places.capacity(),
            self.starts.capacity(),
            self.text.capacity(),
        )
    }
}

impl PartialEq for NameList {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text && self.starts[..] == other.starts[..]
    }
}

impl Eq for NameList {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_in_the_order_given_once_each_and_found_by_name() {
        let given = ["web-2", "db-1", "web-10", "", "web-2", "é-minion", "a"];
        let list = NameList::of(given);
        assert_eq!(list.len(), 6);
        assert_eq!(
            list.iter().collect::<Vec<_>>(),
            ["web-2", "db-1", "web-10", "", "é-minion", "a"]
        );
        for name in given {
            assert_eq!(list.name(list.position(name).unwrap()), name);
        }
        for absent in ["web", "web-1", "web-20", "z", "db-1 "] {
            assert_eq!(list.position(absent), None, "{absent:?}");
        }
        assert_eq!(list.since(4).collect::<Vec<_>>(), ["é-minion", "a"]);
        assert!(list.are(&["a", "", "é-minion", "web-10", "db-1", "web-2"]));
        assert!(!list.are(&["a", "a", "é-minion", "web-10", "db-1", "web-2"]));
        assert!(list.are(&["a", "a", "", "é-minion", "web-10", "db-1", "web-2"]));
        assert!(!list.are(&["a", "", "é-minion", "web-10", "db-1", "web-2", "z"]));
        assert!(!list.are(&["a"]));
        assert!(NameList::of([]).is_empty());
    }

    #[test]
    fn a_list_read_from_its_parts_is_the_same_and_a_name_twice_is_refused() {
        let list = NameList::of(["b", "a", "ccc"]);
        let (text, starts) = list.parts();
        let read = NameList::from_parts(text.to_owned(), starts.to_vec()).unwrap();
        assert_eq!(read, list);
        assert_eq!(read.position("ccc"), Some(2));
        assert_eq!(
            NameList::from_parts("abab".into(), vec![0, 2, 4]),
            Err(BadList::Repeated("ab".into()))
        );
        for (text, starts) in [("ab", vec![0, 1]), ("ab", vec![1, 2]), ("é", vec![0, 1, 2])] {
            assert_eq!(NameList::from_parts(text.into(), starts), Err(BadList::Cut));
        }
    }

    /// Room made once: no table grown under the names that follow.
    #[test]
    fn room_made_is_not_grown_again() {
        let mut list = NameList::default();
        list.reserve(3_000);
        let room = list.capacities();
        assert!(room.0 >= 3_000, "{room:?}");
        for m in 0..3_000 {
            list.insert(&format!("web{m:028}"));
        }
        assert_eq!(list.capacities(), room);
    }
}
