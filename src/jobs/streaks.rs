//! Missing streaks: how many jobs in a row each minion was expected in and
//! did not answer (verdicts that are `unknown_gap` neither count nor break a
//! streak: saltsight could not tell). A return ends the streak. One missed
//! `test.ping` is noise on a large fleet; the same minion missing job after job
//! is a signal, with its own alert. Bounded: minions past the cap are not
//! followed, and counted.

use std::collections::HashMap;

use crate::record::MissingReason;
use crate::time::Stamp;

/// A streak this long makes a minion "missing repeatedly".
pub const REPEATEDLY: u32 = 3;

#[derive(Debug)]
pub struct Streaks {
    by_minion: HashMap<Box<str>, u32>,
    /// When each followed streak began (the first missed job's publish).
    since: HashMap<Box<str>, Stamp>,
    max_minions: usize,
    /// Minions whose streak is at least [`REPEATEDLY`].
    repeatedly: u64,
}

impl Streaks {
    pub fn new(max_minions: usize) -> Self {
        Self {
            by_minion: HashMap::new(),
            since: HashMap::new(),
            max_minions,
            repeatedly: 0,
        }
    }

    /// A verdict for `minion`: its streak now (as it was for `unknown_gap`,
    /// which is not counted), or `None` when the minion is not followed because
    /// the cap is reached (its streak is then unknown; this miss is at least 1).
    pub fn missed(&mut self, minion: &str, reason: MissingReason) -> Option<u32> {
        self.missed_at(minion, reason, None).map(|(n, _)| n)
    }

    /// Like [`Streaks::missed`], for a job published `at`: also when the
    /// streak began (known once a job of it was seen with its time).
    pub fn missed_at(
        &mut self,
        minion: &str,
        reason: MissingReason,
        at: Option<Stamp>,
    ) -> Option<(u32, Option<Stamp>)> {
        let streak = self.count_miss(minion, reason)?;
        if let (Some(at), true) = (at, streak > 0) {
            if !self.since.contains_key(minion) && self.by_minion.contains_key(minion) {
                self.since.insert(minion.into(), at);
            }
        }
        Some((streak, self.since.get(minion).copied()))
    }

    fn count_miss(&mut self, minion: &str, reason: MissingReason) -> Option<u32> {
        if reason == MissingReason::UnknownGap {
            return Some(self.by_minion.get(minion).copied().unwrap_or(0));
        }
        let streak = if let Some(streak) = self.by_minion.get_mut(minion) {
            *streak += 1;
            *streak
        } else if self.by_minion.len() >= self.max_minions {
            return None;
        } else {
            self.by_minion.insert(minion.into(), 1);
            1
        };
        if streak == REPEATEDLY {
            self.repeatedly += 1;
        }
        Some(streak)
    }

    /// `minion` answered: its streak ends.
    pub fn returned(&mut self, minion: &str) {
        self.since.remove(minion);
        if let Some(streak) = self.by_minion.remove(minion) {
            if streak >= REPEATEDLY {
                self.repeatedly -= 1;
            }
        }
    }

    /// Each followed minion's streak, for a checkpoint.
    pub fn saving(&self) -> Vec<(&str, u32)> {
        self.by_minion.iter().map(|(m, s)| (&**m, *s)).collect()
    }

    /// When each followed streak began, for a checkpoint.
    pub fn saving_since(&self) -> Vec<(&str, Stamp)> {
        self.since.iter().map(|(m, s)| (&**m, *s)).collect()
    }

    /// Takes back saved streaks (at most `max_minions` of them) and when
    /// they began.
    pub fn restore(&mut self, saved: Vec<(Box<str>, u32)>, since: Vec<(Box<str>, Stamp)>) {
        self.by_minion = saved.into_iter().take(self.max_minions).collect();
        self.since = since
            .into_iter()
            .filter(|(m, _)| self.by_minion.contains_key(m))
            .collect();
        self.repeatedly = self
            .by_minion
            .values()
            .filter(|s| **s >= REPEATEDLY)
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

    #[test]
    fn a_streak_counts_misses_in_a_row_and_a_return_ends_it() {
        let mut s = Streaks::new(10);
        assert_eq!(s.missed("a", MissingReason::NoResponse), Some(1));
        assert_eq!(
            s.missed("a", MissingReason::UnknownGap),
            Some(1),
            "not counted"
        );
        assert_eq!(s.missed("a", MissingReason::NotConnected), Some(2));
        assert_eq!(s.missed("a", MissingReason::NoResponse), Some(3));
        assert_eq!(s.repeatedly(), 1);
        assert_eq!(s.missed("a", MissingReason::NoResponse), Some(4));
        assert_eq!(s.repeatedly(), 1);
        s.returned("a");
        assert_eq!(s.repeatedly(), 0);
        assert_eq!(s.missed("a", MissingReason::NoResponse), Some(1));
    }

    #[test]
    fn a_streak_says_since_when() {
        let mut s = Streaks::new(10);
        let r = MissingReason::NotConnected;
        assert_eq!(
            s.missed_at("a", r, Some(Stamp(5))),
            Some((1, Some(Stamp(5))))
        );
        assert_eq!(
            s.missed_at("a", r, Some(Stamp(9))),
            Some((2, Some(Stamp(5))))
        );
        s.returned("a");
        assert_eq!(
            s.missed_at("a", r, Some(Stamp(12))),
            Some((1, Some(Stamp(12))))
        );
        // A gap before any miss counts nothing and starts nothing.
        assert_eq!(
            s.missed_at("b", MissingReason::UnknownGap, Some(Stamp(3))),
            Some((0, None))
        );
    }

    #[test]
    fn minions_past_the_cap_are_not_followed() {
        let mut s = Streaks::new(1);
        s.missed("a", MissingReason::NoResponse);
        assert_eq!(s.missed("b", MissingReason::NoResponse), None);
        assert_eq!(s.missed("b", MissingReason::NoResponse), None);
        assert_eq!(s.missed("a", MissingReason::NoResponse), Some(2));
    }
}
