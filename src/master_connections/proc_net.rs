//! `/proc/net/tcp` and `/proc/net/tcp6`: the remote addresses of the
//! established connections to one local port, read as Salt's own
//! `salt.utils.network.local_port_tcp` reads them (its fallback when `ss` is
//! absent): every line whose local port is the port and whose state is `01`
//! (ESTABLISHED), whatever the local address.
//!
//! The kernel prints an IPv4 address as the 32-bit word in host byte order
//! (`0100007F` is 127.0.0.1 on a little-endian machine) and an IPv6 address as
//! four such words. An IPv4 peer of an IPv6 socket (`::ffff:a.b.c.d`) is read
//! as the IPv4 address it is, which Salt's own reading does not do.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use foldhash::HashMap;

/// ESTABLISHED in the kernel's `tcp_states.h`.
const ESTABLISHED: u8 = 0x01;

/// Lines read at most from one file (a master with 100,000 minions has about
/// as many connections to its publish port, and as many to its return port).
pub const MAX_LINES: usize = 1_000_000;

/// What one read found: connections from each remote address, and the lines
/// that could not be read (counted, never fatal: the kernel's format is
/// stable, but a line cut by a concurrent change is possible).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Established {
    pub by_remote: HashMap<IpAddr, u32>,
    pub unreadable_lines: u64,
    /// Lines past [`MAX_LINES`], not read.
    pub lines_refused: u64,
}

impl Established {
    pub fn total(&self) -> u32 {
        self.by_remote.values().sum()
    }

    /// Adds the established connections to `port` listed in one file's text.
    pub fn add_table(&mut self, text: &str, port: u16) {
        for (n, line) in text.lines().skip(1).enumerate() {
            if n >= MAX_LINES {
                self.lines_refused += 1;
                continue;
            }
            match parse_line(line) {
                Some(entry) if entry.local_port == port && entry.state == ESTABLISHED => {
                    *self.by_remote.entry(entry.remote).or_default() += 1;
                }
                Some(_) => {}
                None if line.trim().is_empty() => {}
                None => self.unreadable_lines += 1,
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    local_port: u16,
    remote: IpAddr,
    state: u8,
}

/// `  sl  local_address rem_address   st ...`: `0: 0100007F:1199 0500007F:D2F4 01 ...`.
fn parse_line(line: &str) -> Option<Entry> {
    let mut fields = line.split_ascii_whitespace();
    let _slot = fields.next()?.strip_suffix(':')?;
    let (_, local_port) = address(fields.next()?)?;
    let (remote, _) = address(fields.next()?)?;
    let state = u8::from_str_radix(fields.next()?, 16).ok()?;
    Some(Entry {
        local_port,
        remote,
        state,
    })
}

/// `ADDR:PORT` in the kernel's hex.
fn address(field: &str) -> Option<(IpAddr, u16)> {
    let (addr, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match addr.len() {
        8 => IpAddr::V4(ipv4_of_word(addr)?),
        32 => {
            let mut octets = [0u8; 16];
            for (i, chunk) in octets.chunks_mut(4).enumerate() {
                let word = u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok()?;
                chunk.copy_from_slice(&word.to_ne_bytes());
            }
            let v6 = Ipv6Addr::from(octets);
            match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(v6),
            }
        }
        _ => return None,
    };
    Some((ip, port))
}

fn ipv4_of_word(hex: &str) -> Option<Ipv4Addr> {
    let word = u32::from_str_radix(hex, 16).ok()?;
    Some(Ipv4Addr::from(word.to_ne_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as a little-endian kernel prints them (taken from a lab master:
    // the publish port 4505 is 0x1199).
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1199 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:1199 0500007F:D2F4 01 00000000:00000000 02:000A7B1E 00000000     0        0 1002 1 0000000000000000 20 4 30 10 -1\n\
   2: 0100007F:1199 0600007F:A001 01 00000000:00000000 02:000A7B1E 00000000     0        0 1003 1 0000000000000000 20 4 30 10 -1\n\
   3: 0100007F:1199 0600007F:A002 08 00000000:00000000 00:00000000 00000000     0        0 1004 1 0000000000000000 20 4 30 10 -1\n\
   4: 0100007F:119A 0700007F:A003 01 00000000:00000000 00:00000000 00000000     0        0 1005 1 0000000000000000 20 4 30 10 -1\n\
   5: 0100007F:1199 0600007F:A004 01 00000000:00000000 02:000A7B1E 00000000     0        0 1006 1 0000000000000000 20 4 30 10 -1\n\
   6: garbage\n";

    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 00000000000000000000000001000000:1199 00000000000000000000000001000000:C350 01 00000000:00000000 00:00000000 00000000     0        0 2001 1 0000000000000000 20 4 30 10 -1\n\
   1: 0000000000000000FFFF00000100007F:1199 0000000000000000FFFF00000900007F:C351 01 00000000:00000000 00:00000000 00000000     0        0 2002 1 0000000000000000 20 4 30 10 -1\n\
   2: B80D0120000000000000000001000000:1199 B80D0120000000000000000002000000:C352 01 00000000:00000000 00:00000000 00000000     0        0 2003 1 0000000000000000 20 4 30 10 -1\n\
   3: 00000000000000000000000001000000:1199 00000000000000000000000001000000:C353 06 00000000:00000000 00:00000000 00000000     0        0 2004 1 0000000000000000 20 4 30 10 -1\n";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn established_connections_to_the_port_by_remote_address() {
        let mut found = Established::default();
        found.add_table(TCP, 4505);
        // The listener (0A), TIME_WAIT (08) and another port are not counted.
        assert_eq!(found.by_remote.len(), 2, "{found:?}");
        assert_eq!(found.by_remote[&ip("127.0.0.5")], 1);
        assert_eq!(found.by_remote[&ip("127.0.0.6")], 2);
        assert_eq!(found.unreadable_lines, 1, "the garbage line");
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn ipv6_peers_and_ipv4_peers_of_ipv6_sockets() {
        let mut found = Established::default();
        found.add_table(TCP6, 4505);
        assert_eq!(found.by_remote[&ip("::1")], 1);
        assert_eq!(found.by_remote[&ip("127.0.0.9")], 1, "v4-mapped read as v4");
        assert_eq!(found.by_remote[&ip("2001:db8::2")], 1);
        assert_eq!(found.total(), 3, "TIME_WAIT (06) not counted");
        assert_eq!(found.unreadable_lines, 0);
    }

    #[test]
    fn cut_lines_are_counted_not_fatal() {
        let mut found = Established::default();
        found.add_table(
            "header\n   1: 0100007F:11\n   2: 0100007F:1199 0500007F\n",
            4505,
        );
        assert_eq!(found.unreadable_lines, 2);
        assert!(found.by_remote.is_empty());
    }
}
