//! Which time the stages run on. Live: each event advances event time by its own
//! `_stamp` (a backlog is judged by when things happened), and an idle wake-up
//! judges at the master's time as the monotonic clock carries it forward from
//! the latest event (its `_stamp`, and the monotonic instant it was read): a
//! skewed master or a lagging bus cannot bring verdicts early, and a step of the
//! wall clock (NTP, a VM resumed) moves no verdict. Under replay, event time
//! only: the end of a recording passes every deadline.

use std::time::Duration;

use tokio::time::Instant;

use crate::time::Stamp;

/// Which time the tracker runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The master's time, carried by the monotonic clock between events (live).
    Wall,
    /// The latest `_stamp` seen (replay).
    EventTime,
}

/// Event time, and where the master's time stood on the monotonic clock.
#[derive(Debug, Clone, Copy)]
pub struct EventClock {
    pub clock: Clock,
    /// The latest `_stamp` seen.
    now: Stamp,
    /// The latest stamped event read live: its `_stamp` and the monotonic instant
    /// it was read. Until one comes, the wall clock at start.
    anchor: (Stamp, Instant),
}

impl EventClock {
    pub fn new(clock: Clock) -> Self {
        Self {
            clock,
            now: Stamp(i64::MIN),
            anchor: (Stamp::now(), Instant::now()),
        }
    }

    /// An event stamped `stamp` (when it has one), read at `received` on the
    /// monotonic clock (live frames).
    pub fn observe(&mut self, stamp: Option<Stamp>, received: Option<Instant>) {
        if let Some(stamp) = stamp {
            self.now = self.now.max(stamp);
            if let Some(received) = received {
                self.anchor = (stamp, received);
            }
        }
    }

    /// Event time: the latest `_stamp` seen.
    pub fn now(&self) -> Stamp {
        self.now
    }

    /// The master's time when the monotonic clock reads `at`.
    pub fn master_time(&self, at: Instant) -> Stamp {
        let (stamp, read) = self.anchor;
        if at >= read {
            stamp.plus(at - read)
        } else {
            stamp.minus(read - at)
        }
    }

    /// The monotonic instant at which the master's clock reads `master`.
    pub fn instant_of(&self, master: Stamp) -> Instant {
        let (stamp, read) = self.anchor;
        let ahead = master.micros_since(stamp);
        if ahead >= 0 {
            read + Duration::from_micros(ahead as u64)
        } else {
            read.checked_sub(Duration::from_micros(ahead.unsigned_abs()))
                .unwrap_or(read)
        }
    }
}

/// Bus lag: when saltsight received an event minus its `_stamp`, in
/// microseconds (both times are known live; a raw dump has no receipt time).
/// Defined once: the metrics and the pressure stage read the same figure.
pub fn bus_lag_micros(event: &crate::event::Event<'_>, frame: &crate::bus::Frame) -> Option<i64> {
    let (stamp, received) = event.stamp.zip(frame.received_at)?;
    Some(Stamp::from_system_time(received).micros_since(stamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_masters_time_moves_with_the_monotonic_clock_from_the_latest_event() {
        let mut clock = EventClock::new(Clock::Wall);
        let read = Instant::now();
        clock.observe(Some(Stamp(9_000_000)), Some(read));
        assert_eq!(clock.now(), Stamp(9_000_000));
        // A deadline 11 s after the event is due 11 s after it was read.
        assert_eq!(
            clock.instant_of(Stamp(20_000_000)),
            read + Duration::from_secs(11)
        );
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(clock.master_time(Instant::now()), Stamp(12_000_000));
        clock.observe(Some(Stamp(8_000_000)), None);
        assert_eq!(
            clock.now(),
            Stamp(9_000_000),
            "an older stamp does not go back"
        );
    }
}
