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

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::PathBuf;

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
    /// Lines of /proc/net/tcp* that could not be read, in all.
    pub unreadable_lines: u64,
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
            unreadable_lines: 0,
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
        if self.cache.refresh()? {
            self.book = AddressBook::new(
                self.cache
                    .minions()
                    .map(|(id, addrs)| (Box::from(id), addrs.to_vec())),
            );
            self.host = host_addresses();
        }
        let established = self.established()?;
        self.unreadable_lines += established.unreadable_lines;
        let remotes: HashSet<IpAddr> = established.by_remote.keys().copied().collect();
        let seen = self
            .book
            .judge(&remotes, &self.host)
            .map(|(id, seen)| (Box::from(id), seen))
            .collect();
        Ok(ConnectionView {
            seen,
            connections: established.total(),
            shared_addresses: self.book.shared_addresses(),
        })
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
