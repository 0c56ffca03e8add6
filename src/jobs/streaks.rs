//! Missing streaks: how many jobs in a row each minion was expected in and
//! did not answer (verdicts that are `unknown_gap` neither count nor break a
//! streak: saltsight could not tell). A return ends the streak. One missed
//! `test.ping` is noise on a large fleet; the same minion missing job after job
//! is a signal, with its own alert. Bounded: minions past the cap are not
//! followed, and counted.

use foldhash::{HashMap, HashMapExt};

use crate::record::MissingReason;
use crate::time::Stamp;

/// A streak this long makes a minion "missing repeatedly".
pub const REPEATEDLY: u32 = 3;

/// One minion's run of misses.
#[derive(Debug, Clone, Copy)]
struct Streak {
    count: u32,
    /// The first missed job's publish (unknown for a streak restored from a
    /// checkpoint older than this field).
    since: Option<Stamp>,
}

#[derive(Debug, Clone)]
pub struct Streaks {
    by_minion: HashMap<Box<str>, Streak>,
    max_minions: usize,
    /// Minions whose streak is at least [`REPEATEDLY`].
    repeatedly: u64,
}

impl Streaks {
    pub fn new(max_minions: usize) -> Self {
        Self {
            by_minion: HashMap::new(),
            max_minions,
            repeatedly: 0,
        }
    }

    /// A verdict for `minion` in a job published `at`: its streak now (as it
    /// was for `unknown_gap`, which is not counted) and when the streak began,
    /// or `None` when the minion is not followed because the cap is reached
    /// (its streak is then unknown; this miss is at least 1).
    pub fn missed(
        &mut self,
        minion: &str,
        reason: MissingReason,
        at: Stamp,
    ) -> Option<(u32, Option<Stamp>)> {
        if reason == MissingReason::UnknownGap {
            let known = self.by_minion.get(minion);
            return Some(known.map_or((0, None), |s| (s.count, s.since)));
        }
        let streak = if let Some(streak) = self.by_minion.get_mut(minion) {
            streak.count += 1;
            *streak
        } else if self.by_minion.len() >= self.max_minions {
            return None;
        } else {
            let streak = Streak {
                count: 1,
                since: Some(at),
            };
            self.by_minion.insert(minion.into(), streak);
            streak
        };
        if streak.count == REPEATEDLY {
            self.repeatedly += 1;
        }
        Some((streak.count, streak.since))
    }

    /// `minion` answered: its streak ends.
    pub fn returned(&mut self, minion: &str) {
        if let Some(streak) = self.by_minion.remove(minion) {
            if streak.count >= REPEATEDLY {
                self.repeatedly -= 1;
            }
        }
    }

    /// Each followed minion's streak, for a checkpoint.
    pub fn saving(&self) -> Vec<(&str, u32)> {
        self.by_minion
            .iter()
            .map(|(m, s)| (&**m, s.count))
            .collect()
    }

    /// When each followed streak began, for a checkpoint.
    pub fn saving_since(&self) -> Vec<(&str, Stamp)> {
        self.by_minion
            .iter()
            .filter_map(|(m, s)| Some((&**m, s.since?)))
            .collect()
    }

    /// Takes back saved streaks (at most `max_minions` of them) and when
    /// they began.
    pub fn restore(&mut self, saved: Vec<(Box<str>, u32)>, since: Vec<(Box<str>, Stamp)>) {
        let since: HashMap<Box<str>, Stamp> = since.into_iter().collect();
        self.by_minion = saved
            .into_iter()
            .take(self.max_minions)
            .map(|(m, count)| {
                let since = since.get(&m).copied();
                (m, Streak { count, since })
            })
            .collect();
        self.repeatedly = self
            .by_minion
            .values()
            .filter(|s| s.count >= REPEATEDLY)
            .count() as u64;
    }

    /// Minions missing [`REPEATEDLY`] jobs in a row or more.
    pub fn repeatedly(&self) -> u64 {
        self.repeatedly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streak's count after a miss in a job published at 0.
    fn miss(s: &mut Streaks, minion: &str, reason: MissingReason) -> Option<u32> {
        s.missed(minion, reason, Stamp(0)).map(|(n, _)| n)
    }

    #[test]
    fn a_streak_counts_misses_in_a_row_and_a_return_ends_it() {
        let mut s = Streaks::new(10);
        assert_eq!(miss(&mut s, "a", MissingReason::NoResponse), Some(1));
        assert_eq!(
            miss(&mut s, "a", MissingReason::UnknownGap),
            Some(1),
            "not counted"
        );
        assert_eq!(miss(&mut s, "a", MissingReason::NotConnected), Some(2));
        assert_eq!(miss(&mut s, "a", MissingReason::NoResponse), Some(3));
        assert_eq!(s.repeatedly(), 1);
        assert_eq!(miss(&mut s, "a", MissingReason::NoResponse), Some(4));
        assert_eq!(s.repeatedly(), 1);
        s.returned("a");
        assert_eq!(s.repeatedly(), 0);
        assert_eq!(miss(&mut s, "a", MissingReason::NoResponse), Some(1));
    }

    #[test]
    fn a_streak_says_since_when() {
        let mut s = Streaks::new(10);
        let r = MissingReason::NotConnected;
        assert_eq!(s.missed("a", r, Stamp(5)), Some((1, Some(Stamp(5)))));
        assert_eq!(s.missed("a", r, Stamp(9)), Some((2, Some(Stamp(5)))));
        s.returned("a");
        assert_eq!(s.missed("a", r, Stamp(12)), Some((1, Some(Stamp(12)))));
        // A gap before any miss counts nothing and starts nothing.
        assert_eq!(
            s.missed("b", MissingReason::UnknownGap, Stamp(3)),
            Some((0, None))
        );
    }

    #[test]
    fn minions_past_the_cap_are_not_followed() {
        let mut s = Streaks::new(1);
        miss(&mut s, "a", MissingReason::NoResponse);
        assert_eq!(miss(&mut s, "b", MissingReason::NoResponse), None);
        assert_eq!(miss(&mut s, "b", MissingReason::NoResponse), None);
        assert_eq!(miss(&mut s, "a", MissingReason::NoResponse), Some(2));
    }
}
