//! Established connections → minion ids, by the addresses the master's minion
//! data cache holds for each minion (its `ipv4` and `ipv6` grains), with
//! Salt's own rules (`CkMinions.connected_ids`) and one more: an address that
//! several minions share (NAT, a proxy) cannot say which of them is connected.
//!
//! - Loopback addresses in grains never match (Salt drops `127.0.0.1` and
//!   `::1` from the connections before matching; every minion has them).
//! - A connection from `127.0.0.1` or `::1` is the master's own host: it
//!   stands for the host's other addresses (a minion on the master's host).
//! - A minion whose grains hold no other address is **unclear** (Salt calls
//!   it not connected).
//! - A minion is **connected** when one of its addresses, held by it alone,
//!   has a connection; **not connected** when none of its addresses has one
//!   (Salt's `[Not connected]`); **unclear** when its only addresses with a
//!   connection are shared with other minions: then nothing is said of it.

use std::net::IpAddr;

use foldhash::{HashMap, HashSet};

/// What the connections say of one minion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Holds a connection to the publish port (from `from`).
    Connected { from: IpAddr },
    /// None of its cached addresses holds a connection.
    NotConnected,
    /// A connection comes from an address it shares with other minions.
    Unclear,
}

/// Minion ids by address, built from the cache.
#[derive(Debug, Default, Clone)]
pub struct AddressBook {
    minions: HashMap<Box<str>, Vec<IpAddr>>,
    by_address: HashMap<IpAddr, u32>,
}

/// `127.0.0.1` and `::1`: Salt never matches these (every minion lists them);
/// other loopback addresses (`127.0.0.2`...) are addresses like any other.
fn is_local(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => *v4 == std::net::Ipv4Addr::LOCALHOST,
        IpAddr::V6(v6) => *v6 == std::net::Ipv6Addr::LOCALHOST,
    }
}

fn matchable(ip: &IpAddr) -> bool {
    !is_local(ip) && !ip.is_unspecified()
}

impl AddressBook {
    /// The book of `minions` (id, its grains' addresses).
    pub fn new(minions: impl IntoIterator<Item = (Box<str>, Vec<IpAddr>)>) -> Self {
        let mut book = Self::default();
        for (id, mut addrs) in minions {
            addrs.retain(matchable);
            addrs.sort_unstable();
            addrs.dedup();
            for ip in &addrs {
                *book.by_address.entry(*ip).or_default() += 1;
            }
            book.minions.insert(id, addrs);
        }
        book
    }

    pub fn len(&self) -> usize {
        self.minions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.minions.is_empty()
    }

    /// Addresses held by more than one minion.
    pub fn shared_addresses(&self) -> usize {
        self.by_address.values().filter(|n| **n > 1).count()
    }

    /// What `remotes` (the connections' remote addresses) say of each minion
    /// in the book. `host` is the master host's own non-loopback addresses,
    /// which a loopback connection stands for.
    pub fn judge(
        &self,
        remotes: &HashSet<IpAddr>,
        host: &[IpAddr],
    ) -> impl Iterator<Item = (&str, Seen)> {
        let local = remotes.iter().any(is_local);
        let has = move |ip: &IpAddr| remotes.contains(ip) || (local && host.contains(ip));
        self.minions.iter().map(move |(id, addrs)| {
            if addrs.is_empty() {
                // Nothing to match it by: Salt would call it not connected.
                return (&**id, Seen::Unclear);
            }
            let mut seen = Seen::NotConnected;
            for ip in addrs.iter().filter(|ip| has(ip)) {
                if self.by_address.get(ip).copied().unwrap_or(0) > 1 {
                    seen = Seen::Unclear;
                } else {
                    return (&**id, Seen::Connected { from: *ip });
                }
            }
            (&**id, seen)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn book(entries: &[(&str, &[&str])]) -> AddressBook {
        AddressBook::new(
            entries
                .iter()
                .map(|(id, addrs)| (Box::from(*id), addrs.iter().map(|a| ip(a)).collect())),
        )
    }

    fn judged(book: &AddressBook, remotes: &[&str], host: &[&str]) -> Vec<(String, Seen)> {
        let remotes: HashSet<IpAddr> = remotes.iter().map(|a| ip(a)).collect();
        let host: Vec<IpAddr> = host.iter().map(|a| ip(a)).collect();
        let mut out: Vec<(String, Seen)> = book
            .judge(&remotes, &host)
            .map(|(id, seen)| (id.to_owned(), seen))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    #[test]
    fn a_minion_is_connected_by_an_address_of_its_own_and_not_connected_without_one() {
        let b = book(&[
            ("web1", &["127.0.0.1", "10.0.0.1"]),
            ("db1", &["127.0.0.1", "10.0.0.2", "fd00::2"]),
            ("web2", &["10.0.0.3"]),
        ]);
        assert_eq!(
            judged(&b, &["10.0.0.1", "fd00::2"], &[]),
            vec![
                (
                    "db1".into(),
                    Seen::Connected {
                        from: ip("fd00::2")
                    }
                ),
                (
                    "web1".into(),
                    Seen::Connected {
                        from: ip("10.0.0.1")
                    }
                ),
                ("web2".into(), Seen::NotConnected),
            ]
        );
    }

    #[test]
    fn loopback_grains_never_match_and_a_loopback_connection_is_the_masters_host() {
        let b = book(&[
            ("master-minion", &["127.0.0.1", "10.0.0.9"]),
            ("lab1", &["127.0.0.1", "127.0.0.5"]),
            ("nowhere", &["127.0.0.1"]),
        ]);
        // Only a loopback connection: it stands for the host's 10.0.0.9.
        assert_eq!(
            judged(&b, &["127.0.0.1"], &["10.0.0.9"]),
            vec![
                ("lab1".into(), Seen::NotConnected),
                (
                    "master-minion".into(),
                    Seen::Connected {
                        from: ip("10.0.0.9")
                    }
                ),
                ("nowhere".into(), Seen::Unclear),
            ]
        );
        // 127.0.0.5 is an address like any other (one host, several sources).
        assert_eq!(
            judged(&b, &["127.0.0.5"], &[])[0],
            (
                "lab1".into(),
                Seen::Connected {
                    from: ip("127.0.0.5")
                }
            )
        );
    }

    #[test]
    fn minions_sharing_an_address_are_unclear_while_it_has_a_connection() {
        let b = book(&[
            ("a", &["192.0.2.7"]),
            ("b", &["192.0.2.7"]),
            ("c", &["192.0.2.7", "10.0.0.3"]),
        ]);
        assert_eq!(b.shared_addresses(), 1);
        let seen = judged(&b, &["192.0.2.7"], &[]);
        assert_eq!(seen[0], ("a".into(), Seen::Unclear));
        assert_eq!(seen[1], ("b".into(), Seen::Unclear));
        assert_eq!(seen[2], ("c".into(), Seen::Unclear));
        // c has an address of its own: that one decides.
        let seen = judged(&b, &["192.0.2.7", "10.0.0.3"], &[]);
        assert_eq!(
            seen[2],
            (
                "c".into(),
                Seen::Connected {
                    from: ip("10.0.0.3")
                }
            )
        );
        // No connection from the shared address at all: none of them is there.
        let seen = judged(&b, &[], &[]);
        assert!(
            seen.iter().all(|(_, s)| *s == Seen::NotConnected),
            "{seen:?}"
        );
    }
}
