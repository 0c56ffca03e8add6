//! When the bus reader waits for the consumer: only while the frames it has
//! queued pass [`HOLD_AT_BYTES`], and for at most [`MAX_HOLD`] a stretch.
//!
//! The reader reads the socket whatever the consumer is doing, so a burst read
//! while the consumer waits for a core is held in saltsight's memory: in the
//! load test's highstate mix, 4–13 MB within the first 65 ms of traffic, which
//! set the agent's peak. Past [`HOLD_AT_BYTES`] the reader stops reading until
//! the consumer has taken the queue below [`RESUME_BELOW_BYTES`]: what arrives
//! meanwhile waits in the kernel's socket buffer and the master's queue for
//! this subscriber (the master's memory, for at most [`MAX_HOLD`] of events).
//!
//! The master drops a subscriber that is 10,000 writes behind
//! (`pub_server_write_queue_size`), so a hold never lasts past [`MAX_HOLD`]
//! (at the fastest rate a 3008.3 master publishes on this machine, about 8,500
//! small events a second, 850 writes): after that the reader reads on, and a consumer that
//! stays behind meets the queue's own bounds, which drop and count
//! (`bus.queue_bytes`, `bus.queue_frames`). A new hold begins only once the
//! queue has fallen below [`RESUME_BELOW_BYTES`].

use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::message::ReaderStats;

/// Queued bytes at which the reader stops reading: four of the largest reads
/// ([`super::pace::READ_CHUNK`]). In plain highstate rounds the queue stays
/// under 1 MB for 98.8% of the time.
pub const HOLD_AT_BYTES: u64 = 1 << 20;

/// Queued bytes below which a hold ends.
pub const RESUME_BELOW_BYTES: u64 = HOLD_AT_BYTES / 2;

/// The longest the reader waits for the consumer in one stretch.
pub const MAX_HOLD: Duration = Duration::from_millis(100);

/// The reader's side: whether this stretch's hold is spent.
#[derive(Debug)]
pub(super) struct Hold {
    at_bytes: u64,
    resume_below: u64,
    max: Duration,
    /// A hold ran out since the queue was last below `resume_below`: no other
    /// until it is.
    spent: bool,
}

impl Hold {
    pub(super) fn new() -> Self {
        Self::with(HOLD_AT_BYTES, RESUME_BELOW_BYTES, MAX_HOLD)
    }

    fn with(at_bytes: u64, resume_below: u64, max: Duration) -> Self {
        Self {
            at_bytes,
            resume_below,
            max,
            spent: false,
        }
    }

    /// After a read has been queued: waits while the queue is past the hold
    /// mark, until the consumer has taken it below the resume mark or this
    /// stretch's hold is spent. Returns whether it waited (the socket then
    /// holds a backlog: read it at once).
    pub(super) fn after_read(&mut self, stats: &ReaderStats) -> bool {
        let queued = || stats.queued_bytes.load(Ordering::SeqCst);
        let queued_now = queued();
        if queued_now < self.resume_below {
            self.spent = false;
            return false;
        }
        if queued_now < self.at_bytes || self.spent {
            return false;
        }
        let signal = &stats.hold;
        let started = Instant::now();
        let ends = started + self.max;
        let mut guard = signal.lock.lock().unwrap_or_else(PoisonError::into_inner);
        // Set under the lock, before the check: the consumer's wake-up after
        // its next take cannot come between the check and the wait.
        signal.holding.store(true, Ordering::SeqCst);
        let mut drained = false;
        loop {
            if queued() < self.resume_below {
                drained = true;
                break;
            }
            let now = Instant::now();
            if now >= ends {
                break;
            }
            guard = signal
                .taken
                .wait_timeout(guard, ends - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        signal.holding.store(false, Ordering::SeqCst);
        drop(guard);
        let held = started.elapsed();
        ReaderStats::add(&stats.holds, 1);
        ReaderStats::add(&stats.held_micros, held.as_micros() as u64);
        self.spent = !drained;
        if self.spent {
            ReaderStats::add(&stats.holds_spent, 1);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::mpsc;

    use super::*;

    fn queue(stats: &ReaderStats, bytes: u64) {
        stats.queued_bytes.fetch_add(bytes, Ordering::SeqCst);
        stats.queued_frames.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn below_the_mark_the_reader_reads_on() {
        let stats = ReaderStats::default();
        let mut hold = Hold::with(1000, 500, Duration::from_secs(60));
        queue(&stats, 999);
        assert!(!hold.after_read(&stats));
        assert_eq!(stats.holds.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_hold_ends_when_the_consumer_takes_the_queue_below_the_resume_mark() {
        let stats = Arc::new(ReaderStats::default());
        // Long enough that only the consumer can end it within the test's time.
        let mut hold = Hold::with(1000, 500, Duration::from_secs(30));
        queue(&stats, 600);
        queue(&stats, 600);
        let (holding_tx, holding_rx) = mpsc::channel();
        let consumer = std::thread::spawn({
            let stats = stats.clone();
            move || {
                // Waits until the reader is holding, then takes in two steps.
                while !stats.hold.holding.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                holding_tx.send(()).expect("the test is waiting");
                stats.consumed(1, 600); // 600 left: still holding
                stats.consumed(1, 200); // 400 left: below the resume mark
            }
        });
        let started = Instant::now();
        assert!(hold.after_read(&stats));
        holding_rx.recv().expect("the consumer saw the hold");
        consumer.join().expect("the consumer ran");
        assert!(started.elapsed() < Duration::from_secs(30));
        assert_eq!(stats.queued_bytes.load(Ordering::SeqCst), 400);
        assert_eq!(stats.holds.load(Ordering::SeqCst), 1);
        assert_eq!(stats.holds_spent.load(Ordering::SeqCst), 0);
        assert!(!hold.spent, "drained: a later burst may hold again");
    }

    #[test]
    fn a_stalled_consumer_holds_the_reader_once_a_stretch() {
        let stats = ReaderStats::default();
        let mut hold = Hold::with(1000, 500, Duration::from_millis(5));
        queue(&stats, 1200);
        queue(&stats, 400);
        queue(&stats, 400);
        assert!(hold.after_read(&stats), "held, up to the bound");
        assert_eq!(stats.holds_spent.load(Ordering::SeqCst), 1);
        assert!(stats.held_micros.load(Ordering::SeqCst) >= 5_000);
        // Spent: the reader reads on while the queue stays past the resume mark.
        assert!(!hold.after_read(&stats));
        stats.consumed(1, 1200); // 800 left: not below the resume mark
        assert!(!hold.after_read(&stats));
        stats.consumed(1, 400); // 400: the stretch is over
        assert!(!hold.after_read(&stats));
        queue(&stats, 1000);
        assert!(hold.after_read(&stats), "a new stretch may hold again");
        assert_eq!(stats.holds.load(Ordering::SeqCst), 2);
    }
}
