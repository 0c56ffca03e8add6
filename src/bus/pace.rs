//! How long the bus reader waits after a read while the bus is busy: long
//! enough that its next read takes a batch (one wake-up of the reader and the
//! consumer for many events), never so long that the connection fills.
//!
//! What a connection holds while the reader waits is the kernel's, and differs
//! by transport (measured here with writes of one event each; `net.core.wmem_default`
//! 212,992, `net.ipv4.tcp_wmem` max 4 MiB):
//!
//! | one write | a Unix socket holds | writes |
//! |---|---|---|
//! | 200 B | 33.4 KB | 167 |
//! | 1 KB | 93 KB | 93 |
//! | 2.3 KB | 112.7 KB | 49 |
//! | 10 KB | 170 KB | 17 |
//! | 75 KB | 223 KB | 3 |
//!
//! A Unix socket's limit is the sender's buffer, with each write's overhead
//! counted; a TCP connection over loopback holds the sender's autotuned buffer
//! as well (3.9 MB, whatever the write size). When the connection is full the
//! master keeps what it writes in its own queue, and drops a subscriber that
//! is 10,000 writes behind (Salt 3008's `pub_server_write_queue_size`).
//!
//! A fixed pause caps how fast the reader can take the bus at what the
//! connection holds, once a pause: over ipc, 112.7 KB each 10 ms for events of
//! 2.3 KB (4,900 a second), whatever the master publishes. So the pause follows
//! the rate the last read saw: it is what lets a read take
//! [`Pace::target_bytes`] or [`Pace::target_frames`] (whichever comes first) at
//! that rate, at most [`Pace::max_pause`]. The targets are at most half of what
//! the connection holds for any event size (above), so at a steady rate a read
//! never finds it full, and a faster bus gets shorter pauses, not a growing
//! backlog.

use std::time::Duration;

use super::endpoint::Endpoint;

/// The reader's pacing for one kind of connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// How much a read should take at most at a steady rate.
    pub target_bytes: usize,
    /// How many events a read should take at most at a steady rate (a Unix
    /// socket holds fewer small writes than its bytes suggest).
    pub target_frames: usize,
    /// The longest pause, and so the latency the pacing adds while the bus is
    /// busy; a read more than twice this after the one before is a lone event,
    /// read at once.
    pub max_pause: Duration,
}

/// How much is asked of the socket per read; frames larger than this are
/// assembled over several reads. A read of at least half of it found a
/// backlog, and the next follows at once.
pub const READ_CHUNK: usize = 256 * 1024;

/// The longest pause on either transport: the latency pacing may add.
const MAX_PAUSE: Duration = Duration::from_millis(20);

impl Pace {
    /// A Unix socket: at most 40 events or 48 KiB a read (43–44% of what it
    /// holds for 1 KB and 2.3 KB writes, 22–29% for the rest, in the table above).
    pub const UNIX: Pace = Pace {
        target_bytes: 48 * 1024,
        target_frames: 40,
        max_pause: MAX_PAUSE,
    };

    /// TCP: the connection holds megabytes, so the pause is the longest at
    /// every rate this machine's master reaches (a read of half of
    /// [`READ_CHUNK`] is a backlog).
    pub const TCP: Pace = Pace {
        target_bytes: READ_CHUNK / 2,
        target_frames: 1024,
        max_pause: MAX_PAUSE,
    };

    pub fn for_endpoint(endpoint: &Endpoint) -> Pace {
        match endpoint {
            Endpoint::Unix(_) => Pace::UNIX,
            Endpoint::Tcp(_) => Pace::TCP,
        }
    }

    /// The pause after a read of `bytes` that finished `frames` frames,
    /// `since` the read before it returned (`None`: the first read).
    pub fn after(&self, bytes: usize, frames: usize, since: Option<Duration>) -> Duration {
        let Some(since) = since else {
            return Duration::ZERO;
        };
        if since >= 2 * self.max_pause || bytes >= READ_CHUNK / 2 || bytes == 0 {
            return Duration::ZERO;
        }
        // At the rate this read saw (bytes / since), the pause that gathers the target.
        let by_bytes = self.target_bytes as f64 / bytes as f64;
        let share = if frames == 0 {
            by_bytes
        } else {
            by_bytes.min(self.target_frames as f64 / frames as f64)
        };
        since.mul_f64(share.min(1e3)).min(self.max_pause)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{ErrorKind, Write};
    use std::os::unix::net::UnixStream;

    use super::*;

    /// What a Unix socket pair holds for writes of `size` bytes: written
    /// without reading until the kernel refuses.
    fn unix_holds(size: usize) -> usize {
        let (mut writer, _reader) = UnixStream::pair().expect("a socket pair");
        writer.set_nonblocking(true).expect("non-blocking");
        let write = vec![7u8; size];
        let mut held = 0;
        loop {
            match writer.write(&write) {
                Ok(n) if n == size => held += n,
                Ok(n) => return held + n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return held,
                Err(e) => panic!("writing the socket pair: {e}"),
            }
        }
    }

    /// A master publishing `rate` bytes a second in events of `size` bytes to a
    /// reader that paces itself and spends `work` on each read: what each read
    /// finds once the pauses have settled (capped at what the socket holds).
    fn settled_read(pace: &Pace, rate: f64, size: usize, holds: usize, work: Duration) -> usize {
        let mut pause = Duration::ZERO;
        let mut found = 0;
        for _ in 0..200 {
            let since = pause + work;
            found = ((rate * since.as_secs_f64()) as usize).min(holds);
            pause = pace.after(found, found / size, Some(since));
        }
        found
    }

    #[test]
    fn at_a_steady_rate_a_read_finds_a_unix_socket_at_most_half_full() {
        // The reader's own work a read (split, hand on): tens of microseconds.
        let work = Duration::from_micros(50);
        for size in [200, 400, 1_000, 2_300, 5_000, 10_000, 75_000] {
            let holds = unix_holds(size);
            assert!(holds >= size, "{size}-byte writes: the socket held {holds}");
            // From a trickle to 50 MB/s (this machine's master publishes 31 MB/s
            // at most), or what fills a quarter of the socket during the work alone.
            let fastest = (holds as f64 / 4.0 / work.as_secs_f64()).min(50e6);
            let mut rate = 10_000.0;
            while rate <= fastest {
                let found = settled_read(&Pace::UNIX, rate, size, holds, work);
                assert!(
                    found <= holds / 2,
                    "{size}-byte events at {:.1} MB/s: a read finds {found} of the {holds} bytes the socket holds",
                    rate / 1e6
                );
                rate *= 1.5;
            }
        }
    }

    #[test]
    fn a_lone_read_and_a_backlog_are_followed_at_once() {
        let pace = Pace::UNIX;
        assert_eq!(pace.after(300, 1, None), Duration::ZERO);
        assert_eq!(pace.after(300, 1, Some(2 * pace.max_pause)), Duration::ZERO);
        let since = Some(Duration::from_millis(5));
        assert_eq!(pace.after(READ_CHUNK / 2, 100, since), Duration::ZERO);
        assert!(pace.after(READ_CHUNK / 2 - 1, 100, since) > Duration::ZERO);
    }

    #[test]
    fn the_pause_gathers_the_target_at_the_rate_the_read_saw() {
        let pace = Pace::UNIX;
        let since = Some(Duration::from_millis(10));
        // 24 KiB in 10 ms: 20 ms more would gather 48 KiB, the longest pause.
        assert_eq!(pace.after(24 * 1024, 10, since), pace.max_pause);
        // 96 KiB in 10 ms: 5 ms gathers 48 KiB.
        assert_eq!(pace.after(96 * 1024, 10, since), Duration::from_millis(5));
        // 80 small events in 10 ms: 5 ms gathers 40 of them, though few bytes.
        assert_eq!(pace.after(16_000, 80, since), Duration::from_millis(5));
        // The failing mix over tcp (127 KB in 20 ms, 100 events): the longest pause.
        let since = Some(Duration::from_millis(20));
        assert_eq!(Pace::TCP.after(127_000, 100, since), Pace::TCP.max_pause);
    }
}
