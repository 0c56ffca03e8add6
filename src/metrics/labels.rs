//! Label values of open sets (Salt functions, SLS names), bounded: either the
//! configured list (everything else is `other`, by choice), or learned as they
//! are first seen up to a bound, after which new values are `other` and each
//! value refused is counted in `saltsight_metric_label_values_refused_total`.
//!
//! A value's index never changes once given, so per-value series can be kept in
//! a vector that grows as values are learned ([`PerValue`]): a lookup is one
//! hash of a short string, and the series handles are resolved once.

use std::collections::HashMap;

use std::hash::{BuildHasherDefault, Hasher};

use foldhash::{HashSet, HashSetExt};
use prometheus_client::metrics::counter::Counter;

pub use crate::config::metrics::LabelChoice as Choice;

/// The value every unlisted or refused one is counted under.
pub const OTHER: &str = "other";

/// Distinct refused values remembered (to count each once); past this, every
/// lookup of a value not remembered counts again, so the counter never stalls.
const MAX_REFUSED_REMEMBERED: usize = 4_096;

/// FNV-1a: label lookups hash short strings on every record, where SipHash's
/// DoS resistance buys nothing (the table is bounded and small).
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// One label's values: index 0 is `other`.
#[derive(Debug)]
pub struct LabelValues {
    names: Vec<String>,
    index: HashMap<String, usize, BuildHasherDefault<Fnv1a>>,
    /// Values that may still be learned (0 for a listed set, or when full).
    room: usize,
    learning: bool,
    refused_seen: HashSet<u64>,
    refused: Counter,
}

impl LabelValues {
    /// `refused` is registered by the caller, with this label's name.
    pub fn new(choice: &Choice, refused: Counter) -> Self {
        let (given, room, learning) = match choice {
            Choice::Listed(list) => (list.as_slice(), 0, false),
            Choice::Learned { seed, max } => {
                (seed.as_slice(), max.saturating_sub(seed.len()), true)
            }
        };
        let mut values = LabelValues {
            names: vec![OTHER.to_owned()],
            index: HashMap::default(),
            room: 0,
            learning,
            refused_seen: HashSet::new(),
            refused,
        };
        for name in given {
            values.add(name);
        }
        values.room = room;
        values
    }

    fn add(&mut self, name: &str) -> usize {
        let id = self.names.len();
        self.names.push(name.to_owned());
        self.index.insert(name.to_owned(), id);
        id
    }

    /// The value's index: its own, or `other`'s (0). An empty value, or one
    /// that is not a plausible name (see [`plausible`]), is `other` without
    /// counting: it is not a value the bound refused.
    pub fn of(&mut self, value: &str) -> usize {
        if let Some(&id) = self.index.get(value) {
            return id;
        }
        if !self.learning || !plausible(value) {
            return 0;
        }
        if self.room > 0 {
            self.room -= 1;
            return self.add(value);
        }
        let mut hash = Fnv1a::default();
        hash.write(value.as_bytes());
        let hash = hash.finish();
        let first_time = if self.refused_seen.len() < MAX_REFUSED_REMEMBERED {
            self.refused_seen.insert(hash)
        } else {
            !self.refused_seen.contains(&hash)
        };
        if first_time {
            self.refused.inc();
        }
        0
    }

    /// The value at an index [`of`](Self::of) gave.
    pub fn name(&self, id: usize) -> &str {
        &self.names[id]
    }

    /// Every value given an index so far, `other` first.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

/// A name Salt could have made: a function (`state.apply`,
/// `runner.state.orchestrate`, `wheel.key.list`) or an SLS list (`web,db`,
/// `roles/web`), at most 200 bytes. Anything else (a typo'd argument, a secret
/// where it does not belong, a crafted event) never becomes a label value.
pub fn plausible(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 200
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-,/:".contains(&b))
}

/// Series kept per label value, made when the value is first used: the handle
/// for an index is resolved once, then reused.
pub struct PerValue<T> {
    make: Box<dyn Fn(&str) -> T + Send + Sync>,
    series: Vec<T>,
}

impl<T> std::fmt::Debug for PerValue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerValue")
            .field("series", &self.series.len())
            .finish()
    }
}

impl<T> PerValue<T> {
    /// Made now for every value `values` holds (so their series are at 0 from
    /// the start), later for the values learned.
    pub fn new(values: &LabelValues, make: impl Fn(&str) -> T + Send + Sync + 'static) -> Self {
        let mut per = PerValue {
            make: Box::new(make),
            series: Vec::new(),
        };
        per.grow(values, values.names().len() - 1);
        per
    }

    fn grow(&mut self, values: &LabelValues, id: usize) {
        while self.series.len() <= id {
            let name = values.name(self.series.len());
            self.series.push((self.make)(name));
        }
    }

    /// The series of the value at `id` (an index `values` gave).
    pub fn get(&mut self, values: &LabelValues, id: usize) -> &T {
        self.grow(values, id);
        &self.series[id]
    }

    /// The series of `value`'s label value (learned now if there is room).
    pub fn of(&mut self, values: &mut LabelValues, value: &str) -> &T {
        let id = values.of(value);
        self.get(values, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(names: &[&str]) -> Choice {
        Choice::Listed(names.iter().map(|n| (*n).to_owned()).collect())
    }

    #[test]
    fn a_listed_set_is_exactly_the_list() {
        let refused = Counter::default();
        let mut values = LabelValues::new(&listed(&["state.apply", "cmd.run"]), refused.clone());
        assert_eq!(values.of("cmd.run"), 2);
        assert_eq!(values.of("pillar.items"), 0);
        let x = values.of("x");
        assert_eq!(values.name(x), OTHER);
        assert_eq!(refused.get(), 0, "unlisted is a choice, not a refusal");
    }

    #[test]
    fn learned_values_stop_at_the_bound_and_each_refusal_counts_once() {
        let refused = Counter::default();
        let choice = Choice::Learned {
            seed: vec!["state.apply".into()],
            max: 3,
        };
        let mut values = LabelValues::new(&choice, refused.clone());
        assert_eq!(values.of("state.apply"), 1);
        assert_eq!(values.of("test.true"), 2);
        assert_eq!(values.of("test.exception"), 3);
        assert_eq!(values.of("test.true"), 2, "an index never changes");
        assert_eq!(values.of("cmd.run"), 0);
        assert_eq!(values.of("cmd.run"), 0);
        assert_eq!(values.of("pkg.install"), 0);
        assert_eq!(refused.get(), 2, "two distinct values refused");
        assert_eq!(
            values.names(),
            ["other", "state.apply", "test.true", "test.exception"]
        );
        // Not names: `other`, never learned, never counted.
        for junk in ["", "rm -rf /", "a\nb", &"x".repeat(201)] {
            assert_eq!(values.of(junk), 0, "{junk:?}");
        }
        assert_eq!(refused.get(), 2);
    }

    #[test]
    fn refusals_past_the_remembered_ones_still_count() {
        let refused = Counter::default();
        let choice = Choice::Learned {
            seed: Vec::new(),
            max: 0,
        };
        let mut values = LabelValues::new(&choice, refused.clone());
        for i in 0..MAX_REFUSED_REMEMBERED + 10 {
            values.of(&format!("f{i}"));
        }
        values.of("f0");
        values.of("f_new");
        values.of("f_new");
        assert_eq!(refused.get() as usize, MAX_REFUSED_REMEMBERED + 10 + 2);
    }

    #[test]
    fn per_value_series_are_made_once_as_values_come() {
        let choice = Choice::Learned {
            seed: vec!["a".into()],
            max: 5,
        };
        let mut values = LabelValues::new(&choice, Counter::default());
        let made = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = made.clone();
        let mut per = PerValue::new(&values, move |name| {
            log.lock().unwrap().push(name.to_owned());
            name.len()
        });
        assert_eq!(*made.lock().unwrap(), ["other", "a"]);
        let b = values.of("bbb");
        assert_eq!(*per.get(&values, b), 3);
        assert_eq!(*per.get(&values, b), 3);
        assert_eq!(*made.lock().unwrap(), ["other", "a", "bbb"]);
    }
}
