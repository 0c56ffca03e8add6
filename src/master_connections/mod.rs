//! Which minions hold a connection to the master, read on the master,
//! read-only, the way Salt's own CLI decides `[Not connected]`
//! (`salt.utils.minions.CkMinions.connected_ids`): the established TCP
//! connections to the publish port (`proc_net.rs`), mapped to minion ids
//! through the addresses the master's minion data cache holds for each
//! (`cache.rs`, `mapping.rs`).
//!
//! This is ZeroMQ's presence: a minion keeps one connection to the publish
//! port while its process lives, a crashed or stopped one has none, and a
//! hung one (SIGSTOPped, deadlocked) keeps it. Where it cannot tell (several
//! minions behind one address, a minion not in the cache) it says nothing of
//! that minion, never "not connected".
//!
//! One sample reads `/proc/net/tcp` and `tcp6` (a line per socket of the
//! host) and stats the cache's directory; the cache's files are read again
//! only when they change.

pub mod cache;
pub mod mapping;
pub mod proc_net;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use foldhash::HashSet;

pub use cache::{CacheCounts, CacheError, Layout, MinionCache};
pub use mapping::{AddressBook, Seen};
pub use proc_net::Established;

#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error("cannot read {path} (the master's connections): {source}")]
    Proc {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// One look at the connections: what they say of each minion in the cache.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ConnectionView {
    pub seen: Vec<(Box<str>, Seen)>,
    /// Established connections to the publish port.
    pub connections: u32,
    /// Addresses held by several minions in the cache.
    pub shared_addresses: usize,
}

impl ConnectionView {
    pub fn count(&self, which: fn(&Seen) -> bool) -> usize {
        self.seen.iter().filter(|(_, s)| which(s)).count()
    }
}

crate::counts! {
    /// The connections source's own figures, read at scrape.
    pub struct ConnectionCounts {
        counter samples = "saltsight_presence_connection_samples",
            "Looks at the master's connections to its publish port (at a publish, or before verdicts; at most one a second)";
        counter failures = "saltsight_presence_connection_sample_failures",
            "Looks that failed (/proc or the minion data cache unreadable): verdicts then fall back to presence events and find_job";
        counter lines_unreadable = "saltsight_presence_proc_lines_unreadable",
            "Lines of /proc/net/tcp{,6} that could not be read (skipped)";
        gauge cache_minions = "saltsight_presence_cache_minions",
            "Minions the master's data cache maps to addresses (the connections source judges these)";
        gauge cache_refused = "saltsight_presence_cache_refused",
            "Minions of the data cache not read at the last refresh: past jobs.max_minions, or a file over 16 MiB";
        gauge cache_unreadable = "saltsight_presence_cache_unreadable",
            "Files of the data cache that could not be read or decoded at the last refresh";
        gauge minions_unclear = "saltsight_presence_minions_unclear",
            "Minions the connections cannot speak for: an address shared with others (NAT) holds a connection, or no address but loopback";
    }
}

/// Reads the master's connections to its publish port.
#[derive(Debug)]
pub struct ConnectionWatch {
    publish_port: u16,
    proc_net: PathBuf,
    cache: MinionCache,
    book: AddressBook,
    /// The host's own non-loopback addresses (what a loopback connection
    /// stands for), read with the cache.
    host: Vec<IpAddr>,
    pub counts: Arc<ConnectionCounts>,
}

impl ConnectionWatch {
    /// Connections to `publish_port`, minions from the cache under `cachedir`.
    pub fn new(publish_port: u16, cachedir: PathBuf, max_minions: usize) -> Self {
        Self {
            publish_port,
            proc_net: PathBuf::from("/proc/net"),
            cache: MinionCache::new(cachedir, max_minions),
            book: AddressBook::default(),
            host: Vec::new(),
            counts: Arc::default(),
        }
    }

    pub fn publish_port(&self) -> u16 {
        self.publish_port
    }

    pub fn cache(&self) -> &MinionCache {
        &self.cache
    }

    /// The established connections to the publish port, by remote address.
    pub fn established(&self) -> Result<Established, SampleError> {
        let mut found = Established::default();
        for name in ["tcp", "tcp6"] {
            let path = self.proc_net.join(name);
            match std::fs::read_to_string(&path) {
                Ok(text) => found.add_table(&text, self.publish_port),
                // A kernel without IPv6 has no tcp6.
                Err(e) if name == "tcp6" && e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(SampleError::Proc { path, source }),
            }
        }
        Ok(found)
    }

    /// Reads the cache where it changed, then the connections.
    pub fn sample(&mut self) -> Result<ConnectionView, SampleError> {
        self.counts.samples.inc();
        let view = self.look();
        if view.is_err() {
            self.counts.failures.inc();
        }
        view
    }

    fn look(&mut self) -> Result<ConnectionView, SampleError> {
        if self.cache.refresh()? {
            self.book = AddressBook::new(
                self.cache
                    .minions()
                    .map(|(id, addrs)| (Box::from(id), addrs.to_vec())),
            );
            self.host = host_addresses();
            let c = self.cache.counts;
            self.counts.cache_minions.set(c.minions as u64);
            self.counts.cache_refused.set(c.refused);
            self.counts.cache_unreadable.set(c.unreadable);
        }
        let established = self.established()?;
        self.counts
            .lines_unreadable
            .add(established.unreadable_lines);
        let remotes: HashSet<IpAddr> = established.by_remote.keys().copied().collect();
        let seen = self
            .book
            .judge(&remotes, &self.host)
            .map(|(id, seen)| (Box::from(id), seen))
            .collect();
        let view = ConnectionView {
            seen,
            connections: established.total(),
            shared_addresses: self.book.shared_addresses(),
        };
        self.counts
            .minions_unclear
            .set(view.count(|s| *s == Seen::Unclear) as u64);
        Ok(view)
    }
}

/// The host's own addresses other than loopback, as Salt's
/// `ip_addrs(include_loopback=False)` lists them.
fn host_addresses() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut out: Vec<IpAddr> = addrs
        .filter_map(|ifa| {
            let addr = ifa.address?;
            if let Some(v4) = addr.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                addr.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        .filter(|ip| !ip.is_loopback())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One whole look, over a /proc/net and a cache made here: the
    /// connections' addresses mapped through the grains, and its figures.
    #[test]
    #[cfg(target_endian = "little")]
    fn a_look_maps_connections_through_the_cache_and_counts() {
        let dir = tempfile::tempdir().unwrap();
        let proc_net = dir.path().join("net");
        std::fs::create_dir_all(&proc_net).unwrap();
        // 4505 = 0x1199; peers 127.0.0.11 (web1) and 127.0.0.15 (nat1/nat2).
        std::fs::write(
            proc_net.join("tcp"),
            "  sl  local_address rem_address   st\n\
             0: 0100007F:1199 0B00007F:D001 01 0\n\
             1: 0100007F:1199 0F00007F:D002 01 0\n\
             2: 0100007F:1199 0C00007F:D003 06 0\n",
        )
        .unwrap();
        let grains = dir.path().join("cache/grains");
        std::fs::create_dir_all(&grains).unwrap();
        for (id, ip) in [
            ("web1", "127.0.0.11"),
            ("web2", "127.0.0.12"),
            ("nat1", "127.0.0.15"),
            ("nat2", "127.0.0.15"),
        ] {
            let bytes =
                rmp_serde::to_vec_named(&serde_json::json!({"ipv4": ["127.0.0.1", ip]})).unwrap();
            std::fs::write(grains.join(format!("{id}.p")), bytes).unwrap();
        }
        let mut watch = ConnectionWatch::new(4505, dir.path().join("cache"), 100);
        watch.proc_net = proc_net;
        let mut view = watch.sample().unwrap();
        view.seen.sort_by(|a, b| a.0.cmp(&b.0));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            view.seen,
            vec![
                (Box::from("nat1"), Seen::Unclear),
                (Box::from("nat2"), Seen::Unclear),
                (
                    Box::from("web1"),
                    Seen::Connected {
                        from: ip("127.0.0.11")
                    }
                ),
                // Its only connection is TIME_WAIT (06): gone.
                (Box::from("web2"), Seen::NotConnected),
            ]
        );
        assert_eq!(view.connections, 2);
        assert_eq!(watch.counts.samples.get(), 1);
        assert_eq!(watch.counts.cache_minions.get(), 4);
        assert_eq!(watch.counts.minions_unclear.get(), 2);
        // A /proc that cannot be read is a failure, counted.
        watch.proc_net = dir.path().join("nowhere");
        let error = watch.sample().unwrap_err().to_string();
        assert!(error.contains("the master's connections"), "{error}");
        assert_eq!(watch.counts.failures.get(), 1);
    }
}
