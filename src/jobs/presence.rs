//! Which minions the master has connected, as it says on the bus
//! (`salt/presence/present` and `salt/presence/change`, fired when the master
//! has `presence_events: True`) or as saltsight reads it from the master's
//! connections to its publish port (`[presence] source`, the
//! `master_connections` module): the tracker asks it, for a minion that did
//! not return, whether it was connected through the job.
//!
//! From the master's events, presence speaks only for minions it has seen
//! connected at least once: a minion behind NAT, or whose grains the master
//! has not cached, is never in the master's list, and must not read as "down"
//! for that. From the connections, it speaks for every minion the master's
//! cache maps to an address of its own, and for none whose address is shared.
//! Bounded: at most `max_minions` minions are followed; past that new ones are
//! not (counted).

use std::net::IpAddr;

use foldhash::{HashMap, HashSet};

use crate::master_connections::{ConnectionView, Seen};
use crate::time::Stamp;

/// What presence says of a minion over a job's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// Presence has not spoken, or does not follow this minion.
    Unknown,
    /// Connected through the job.
    Connected,
    Absent(Absence),
}

/// When a minion was not connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Absence {
    /// Not connected at publish (since `since`, when its loss was seen).
    BeforePublish { since: Option<Stamp> },
    /// Connected at publish, disconnected at `at` during the job.
    During { at: Stamp },
}

#[derive(Debug, Default, Clone)]
pub struct Presence {
    /// Followed minions now connected.
    connected: HashSet<Box<str>>,
    /// Followed minions: each was seen connected at least once. The value is
    /// when it was last seen going from connected to not.
    followed: HashMap<Box<str>, Option<Stamp>>,
    max_minions: usize,
    /// A whole list of the master's connections has come since start (or since
    /// the last gap): until then presence says nothing.
    known: bool,
    /// The address each connected minion's connection comes from (the
    /// connections source only).
    addresses: HashMap<Box<str>, IpAddr>,
    /// Minions whose state the connections source set last (the master's
    /// events take over a minion when they name it).
    by_connections: HashSet<Box<str>>,
    /// New minions not followed: `max_minions` was reached.
    pub refused: u64,
}

impl Presence {
    pub fn new(max_minions: usize) -> Self {
        Self {
            max_minions,
            ..Self::default()
        }
    }

    /// Whether presence has spoken since start.
    pub fn known(&self) -> bool {
        self.known
    }

    /// How many followed minions are connected now.
    pub fn connected(&self) -> usize {
        self.connected.len()
    }

    /// How many minions it follows now.
    pub fn followed(&self) -> usize {
        self.followed.len()
    }

    fn follow(&mut self, minion: &str) -> bool {
        if self.followed.contains_key(minion) {
            return true;
        }
        if self.followed.len() >= self.max_minions {
            self.refused += 1;
            return false;
        }
        self.followed.insert(minion.into(), None);
        true
    }

    fn connect(&mut self, minion: &str) {
        if self.follow(minion) && !self.connected.contains(minion) {
            self.connected.insert(minion.into());
        }
    }

    fn disconnect(&mut self, minion: &str, at: Stamp) {
        if self.follow(minion) {
            self.connected.remove(minion);
            self.addresses.remove(minion);
            if let Some(lost) = self.followed.get_mut(minion) {
                *lost = Some(at);
            }
        }
    }

    /// What the master's connections to its publish port say at `at`: a
    /// minion with a connection of its own is connected (from its address),
    /// one with none is not (lost at `at` if it was connected before; since
    /// an unknown time if it was never seen connected), and one behind a
    /// shared address is no longer followed: nothing is said of it.
    pub fn observe(&mut self, view: &ConnectionView, at: Stamp) {
        for (minion, seen) in &view.seen {
            if *seen != Seen::Unclear {
                self.by_connections.insert(minion.clone());
            }
            match seen {
                Seen::Connected { from } => {
                    self.connect(minion);
                    if self.connected.contains(&**minion) {
                        self.addresses.insert(minion.clone(), *from);
                    }
                }
                Seen::NotConnected => {
                    if self.connected.contains(&**minion) {
                        self.disconnect(minion, at);
                    } else if !self.followed.contains_key(&**minion) {
                        // Never seen connected: when it went is not known
                        // (not when it was first seen gone).
                        self.follow(minion);
                    }
                }
                // What the connections said before no longer holds; what the
                // master's events said of it still does.
                Seen::Unclear if self.by_connections.remove(&**minion) => {
                    self.connected.remove(&**minion);
                    self.followed.remove(&**minion);
                    self.addresses.remove(&**minion);
                }
                Seen::Unclear => {}
            }
        }
        self.known = true;
    }

    /// Whether `minion` is not connected now, by what presence knows, and
    /// since when it has been seen so.
    pub fn absent_now(&self, minion: &str) -> Option<Option<Stamp>> {
        if !self.known || self.connected.contains(minion) {
            return None;
        }
        self.followed.get(minion).copied()
    }

    /// The address `minion`'s connection comes from, when the connections
    /// source saw it connected.
    pub fn address(&self, minion: &str) -> Option<IpAddr> {
        self.addresses.get(minion).copied()
    }

    /// The master's whole list of connected minions at `at`: followed minions
    /// not in it are disconnected (at `at`, if they were connected).
    pub fn present<'a>(&mut self, minions: impl IntoIterator<Item = &'a str>, at: Stamp) {
        let now: HashSet<&str> = minions.into_iter().collect();
        self.by_connections.clear();
        let gone: Vec<Box<str>> = self
            .connected
            .iter()
            .filter(|m| !now.contains(m.as_ref()))
            .cloned()
            .collect();
        for minion in gone {
            self.disconnect(&minion, at);
        }
        for minion in now {
            self.connect(minion);
        }
        self.known = true;
    }

    /// A change at `at`: `new` minions connected, `lost` ones disconnected.
    /// It does not make an unknown view known: only a whole list does.
    pub fn change<'a>(
        &mut self,
        new: impl IntoIterator<Item = &'a str>,
        lost: impl IntoIterator<Item = &'a str>,
        at: Stamp,
    ) {
        for minion in lost {
            self.by_connections.remove(minion);
            self.disconnect(minion, at);
        }
        for minion in new {
            self.by_connections.remove(minion);
            self.connect(minion);
        }
    }

    /// Whether `minion` was connected from `from` (the publish) to `to` (the
    /// verdict), by what presence knows.
    pub fn connection(&self, minion: &str, from: Stamp, to: Stamp) -> Connection {
        let Some(&lost) = self.followed.get(minion).filter(|_| self.known) else {
            return Connection::Unknown;
        };
        match lost {
            // Lost before the publish and not back since.
            Some(at) if at < from && !self.connected.contains(minion) => {
                Connection::Absent(Absence::BeforePublish { since: Some(at) })
            }
            Some(at) if at >= from && at <= to => Connection::Absent(Absence::During { at }),
            _ => Connection::Connected,
        }
    }
}

/// Presence as a checkpoint writes it.
#[derive(Debug, serde::Serialize)]
pub struct SavingPresence<'a> {
    connected: Vec<&'a str>,
    followed: Vec<(&'a str, Option<Stamp>)>,
}

/// Presence as a checkpoint reads it back.
#[derive(Debug, serde::Deserialize)]
pub struct SavedPresence {
    connected: Vec<Box<str>>,
    followed: Vec<(Box<str>, Option<Stamp>)>,
}

impl Presence {
    pub fn saving(&self) -> SavingPresence<'_> {
        SavingPresence {
            connected: self.connected.iter().map(|m| &**m).collect(),
            followed: self.followed.iter().map(|(m, t)| (&**m, *t)).collect(),
        }
    }

    /// Takes back saved presence (at most `max_minions` minions). What the
    /// master said before a restart is old news (a minion may have gone while
    /// saltsight was down, unheard): presence says nothing until the master's
    /// next list.
    pub fn restore(&mut self, saved: SavedPresence) {
        self.followed = saved.followed.into_iter().take(self.max_minions).collect();
        self.connected = saved
            .connected
            .into_iter()
            .filter(|m| self.followed.contains_key(m))
            .collect();
        self.addresses.clear();
        self.by_connections.clear();
        self.known = false;
    }

    /// Events may have been missed (a bus gap): presence says nothing until the
    /// master's next list.
    pub fn forget_view(&mut self) {
        self.known = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000;

    #[test]
    fn a_minion_lost_before_or_during_a_job_is_absent_and_a_back_one_is_not() {
        let mut p = Presence::new(10);
        assert_eq!(
            p.connection("a", Stamp(0), Stamp(10 * S)),
            Connection::Unknown,
            "nothing known"
        );
        p.present(["a", "b", "c"], Stamp(S));
        p.change([], ["a"], Stamp(2 * S));
        // Job 1 from 5 s to 15 s: a is still gone; b is lost at 8 s.
        p.change([], ["b"], Stamp(8 * S));
        assert_eq!(
            p.connection("a", Stamp(5 * S), Stamp(15 * S)),
            Connection::Absent(Absence::BeforePublish {
                since: Some(Stamp(2 * S))
            })
        );
        assert_eq!(
            p.connection("b", Stamp(5 * S), Stamp(15 * S)),
            Connection::Absent(Absence::During { at: Stamp(8 * S) })
        );
        assert_eq!(
            p.connection("c", Stamp(5 * S), Stamp(15 * S)),
            Connection::Connected
        );
        // a comes back: a later job sees it connected.
        p.present(["a", "c"], Stamp(20 * S));
        assert_eq!(
            p.connection("a", Stamp(25 * S), Stamp(30 * S)),
            Connection::Connected
        );
        // b, lost before job 2 and never back, is absent in it too.
        assert!(matches!(
            p.connection("b", Stamp(25 * S), Stamp(30 * S)),
            Connection::Absent(Absence::BeforePublish { .. })
        ));
    }

    #[test]
    fn a_minion_never_seen_connected_is_not_called_absent() {
        let mut p = Presence::new(10);
        p.present(["a"], Stamp(S));
        assert_eq!(
            p.connection("nat1", Stamp(5 * S), Stamp(15 * S)),
            Connection::Unknown
        );
    }

    #[test]
    fn a_list_without_a_minion_is_its_loss() {
        let mut p = Presence::new(10);
        p.present(["a", "b"], Stamp(S));
        p.present(["a"], Stamp(3 * S));
        assert_eq!(
            p.connection("b", Stamp(2 * S), Stamp(4 * S)),
            Connection::Absent(Absence::During { at: Stamp(3 * S) })
        );
    }

    fn view(seen: &[(&str, Seen)]) -> ConnectionView {
        ConnectionView {
            seen: seen.iter().map(|(m, s)| (Box::from(*m), *s)).collect(),
            ..ConnectionView::default()
        }
    }

    #[test]
    fn the_connections_say_absent_for_a_minion_never_seen_and_nothing_for_a_shared_one() {
        let from: IpAddr = "127.0.0.5".parse().unwrap();
        let mut p = Presence::new(10);
        assert_eq!(p.absent_now("db1"), None, "nothing known yet");
        p.observe(
            &view(&[
                ("web1", Seen::Connected { from }),
                ("db1", Seen::NotConnected),
                ("nat1", Seen::Unclear),
            ]),
            Stamp(S),
        );
        // Absent, since a time not known: it was never seen connected, and
        // when it was first seen gone is not when it went (issue 68).
        assert_eq!(p.absent_now("db1"), Some(None));
        assert_eq!(p.absent_now("web1"), None);
        assert_eq!(p.address("web1"), Some(from));
        assert_eq!(p.absent_now("nat1"), None);
        assert_eq!(
            p.connection("nat1", Stamp(2 * S), Stamp(3 * S)),
            Connection::Unknown
        );
        // A job from 2 s to 12 s: web1's connection goes at 6 s.
        p.observe(&view(&[("web1", Seen::NotConnected)]), Stamp(6 * S));
        assert_eq!(
            p.connection("web1", Stamp(2 * S), Stamp(12 * S)),
            Connection::Absent(Absence::During { at: Stamp(6 * S) })
        );
        assert_eq!(p.address("web1"), None);
        // db1 stays absent, since a time not known; web1 since it went.
        p.observe(&view(&[("db1", Seen::NotConnected)]), Stamp(7 * S));
        assert_eq!(p.absent_now("db1"), Some(None));
        assert_eq!(p.absent_now("web1"), Some(Some(Stamp(6 * S))));
        // A minion that was followed and now shares its address: unknown.
        p.observe(&view(&[("web1", Seen::Unclear)]), Stamp(8 * S));
        assert_eq!(p.absent_now("web1"), None);
    }

    /// The master's events (transport tcp, presence_events) name a minion;
    /// the connections cannot tell it apart (every lab minion shares the
    /// host's addresses): what the events said stands.
    #[test]
    fn connections_that_cannot_tell_leave_what_the_events_said() {
        let mut p = Presence::new(10);
        p.present(["a", "b"], Stamp(S));
        p.change([], ["a"], Stamp(2 * S));
        p.observe(
            &view(&[("a", Seen::Unclear), ("b", Seen::Unclear)]),
            Stamp(3 * S),
        );
        assert_eq!(p.absent_now("a"), Some(Some(Stamp(2 * S))));
        assert_eq!(
            p.connection("b", Stamp(4 * S), Stamp(5 * S)),
            Connection::Connected
        );
    }

    #[test]
    fn minions_past_the_cap_are_not_followed() {
        let mut p = Presence::new(1);
        p.present(["a", "b"], Stamp(S));
        assert_eq!(p.followed(), 1);
        assert_eq!(p.refused, 1);
    }
}
