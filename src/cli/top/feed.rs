//! What the pipeline hands `saltsight top`'s screen, without ever waiting on
//! it: each redacted record over a bounded channel (`try_send`; what a full
//! channel refuses is counted and shown), and the bus's state (connected, in a
//! gap, events read, the newest event's lag) in atomics the screen reads at
//! each redraw.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::SystemTime;

use tokio::time::Instant;

use crate::bus::{BusGap, Endpoint, Frame};
use crate::event::Event;
use crate::pipeline::Handler;
use crate::record::Record;
use crate::sink::output::{Output, OutputError};
use crate::time::Stamp;

/// Records waiting for the screen at most.
pub const CHANNEL_RECORDS: usize = 4096;

/// The bus as the screen sees it.
#[derive(Debug, Default)]
pub struct BusWatch {
    connected: AtomicBool,
    in_gap: AtomicBool,
    events: AtomicU64,
    /// Unix microseconds when the last event was read (0: none yet).
    last_event_micros: AtomicI64,
    /// Received minus `_stamp` of the last event that had one, in microseconds.
    lag_micros: AtomicI64,
    /// Records the full channel refused.
    refused: AtomicU64,
}

/// A copy of [`BusWatch`] for one redraw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BusState {
    pub connected: bool,
    pub in_gap: bool,
    pub events: u64,
    pub last_event: Option<Stamp>,
    pub lag_micros: Option<i64>,
    pub refused: u64,
}

impl BusWatch {
    pub fn state(&self) -> BusState {
        let last = self.last_event_micros.load(Ordering::Relaxed);
        let events = self.events.load(Ordering::Relaxed);
        BusState {
            connected: self.connected.load(Ordering::Relaxed),
            in_gap: self.in_gap.load(Ordering::Relaxed),
            events,
            last_event: (last != 0).then_some(Stamp(last)),
            lag_micros: (events > 0).then(|| self.lag_micros.load(Ordering::Relaxed)),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

/// The channel's two ends: the output for the pipeline, the receiver for the screen.
pub fn channel(watch: Arc<BusWatch>) -> (ScreenOutput, Receiver<Record>) {
    let (sender, receiver) = sync_channel(CHANNEL_RECORDS);
    (ScreenOutput { sender, watch }, receiver)
}

/// The output that hands records to the screen.
pub struct ScreenOutput {
    sender: SyncSender<Record>,
    watch: Arc<BusWatch>,
}

impl Output for ScreenOutput {
    fn name(&self) -> &str {
        "top"
    }

    fn queue(&mut self, record: &Record, _json: &[u8]) -> Result<(), OutputError> {
        match self.sender.try_send(record.clone()) {
            Ok(()) => {}
            // Behind, or gone (quitting): the pipeline goes on either way.
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.watch.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    fn flush(&mut self, _: &[u8]) -> Result<(), OutputError> {
        Ok(())
    }
}

/// A handler that notes the bus's state in a [`BusWatch`], then hands every
/// call on to the one it wraps (the agent).
pub struct Watched<H> {
    inner: H,
    watch: Arc<BusWatch>,
}

impl<H> Watched<H> {
    pub fn new(inner: H, watch: Arc<BusWatch>) -> Self {
        Self { inner, watch }
    }
}

impl<H: Handler> Handler for Watched<H> {
    fn event(&mut self, event: &Event<'_>, frame: &Frame) -> anyhow::Result<()> {
        let received = frame.received_at.unwrap_or_else(SystemTime::now);
        let received = Stamp::from_system_time(received);
        let w = &self.watch;
        w.events.fetch_add(1, Ordering::Relaxed);
        w.last_event_micros.store(received.0, Ordering::Relaxed);
        if let Some(stamp) = event.stamp {
            w.lag_micros
                .store(received.micros_since(stamp), Ordering::Relaxed);
        }
        self.inner.event(event, frame)
    }

    fn gap(&mut self, gap: &BusGap) -> anyhow::Result<()> {
        self.watch.in_gap.store(false, Ordering::Relaxed);
        self.inner.gap(gap)
    }

    fn connected(&mut self, endpoint: &Endpoint) -> anyhow::Result<()> {
        self.watch.connected.store(true, Ordering::Relaxed);
        self.inner.connected(endpoint)
    }

    fn gap_started(&mut self, at: SystemTime) -> anyhow::Result<()> {
        self.watch.in_gap.store(true, Ordering::Relaxed);
        self.inner.gap_started(at)
    }

    fn unreadable(&mut self, tag: Option<&str>, at: SystemTime) -> anyhow::Result<()> {
        self.inner.unreadable(tag, at)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.inner.next_wakeup()
    }

    fn tick(&mut self, now: Instant) -> anyhow::Result<()> {
        self.inner.tick(now)
    }

    fn finish(&mut self, recording: bool) -> anyhow::Result<()> {
        self.inner.finish(recording)
    }
}
