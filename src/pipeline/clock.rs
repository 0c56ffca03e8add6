//! Which time the stages run on. Live, the wall clock: each event advances event
//! time by its own `_stamp` (a backlog is judged by when things happened), and
//! an idle wake-up at the next deadline judges at the wall clock minus the
//! master's observed offset (receive time minus `_stamp`), so a skewed master or
//! a lagging bus cannot bring verdicts early. Under replay, event time only: the
//! end of a recording passes every deadline.

use std::time::SystemTime;

use crate::time::Stamp;

/// Which time the tracker runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The wall clock (live).
    Wall,
    /// The latest `_stamp` seen (replay).
    EventTime,
}

/// Event time and the master's offset, as events arrive.
#[derive(Debug, Clone, Copy)]
pub struct EventClock {
    pub clock: Clock,
    /// The latest `_stamp` seen.
    now: Stamp,
    /// Receive time minus `_stamp` of the latest event: the master's clock offset
    /// plus bus lag.
    offset_micros: i64,
}

impl EventClock {
    pub fn new(clock: Clock) -> Self {
        Self {
            clock,
            now: Stamp(i64::MIN),
            offset_micros: 0,
        }
    }

    /// An event stamped `stamp` (when it has one), received at `received`.
    pub fn observe(&mut self, stamp: Option<Stamp>, received: Option<SystemTime>) {
        if let Some(stamp) = stamp {
            self.now = self.now.max(stamp);
            if let Some(received) = received {
                self.offset_micros = Stamp::from_system_time(received).micros_since(stamp);
            }
        }
    }

    /// Event time: the latest `_stamp` seen.
    pub fn now(&self) -> Stamp {
        self.now
    }

    /// The master's clock when the wall clock reads `wall`.
    pub fn master_time(&self, wall: Stamp) -> Stamp {
        Stamp(wall.0.saturating_sub(self.offset_micros))
    }

    /// The wall-clock time at which the master's clock reads `master`.
    pub fn wall_time(&self, master: Stamp) -> Stamp {
        Stamp(master.0.saturating_add(self.offset_micros))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_time_only_moves_forward_and_the_offset_follows_the_latest_event() {
        let mut clock = EventClock::new(Clock::Wall);
        let received = Stamp(10_000_000).to_system_time();
        clock.observe(Some(Stamp(9_000_000)), Some(received));
        assert_eq!(clock.now(), Stamp(9_000_000));
        // A master 1 s behind: deadlines are judged 1 s later on the wall clock.
        assert_eq!(clock.wall_time(Stamp(20_000_000)), Stamp(21_000_000));
        assert_eq!(clock.master_time(Stamp(21_000_000)), Stamp(20_000_000));
        clock.observe(Some(Stamp(8_000_000)), None);
        assert_eq!(
            clock.now(),
            Stamp(9_000_000),
            "an older stamp does not go back"
        );
    }
}
