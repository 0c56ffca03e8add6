//! What the reader hands downstream ([`BusMessage`]: frames, connections, gaps,
//! lost frames), and the counters it shares with whoever reports on it
//! ([`ReaderStats`]).

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::SystemTime;

use bytes::Bytes;
use tokio::time::Instant;

use super::endpoint::Endpoint;

/// One frame as read, with when it was read.
#[derive(Debug, Clone)]
pub struct Frame {
    pub bytes: Bytes,
    /// When it was read; `None` for frames from a raw dump, which has no times.
    pub received_at: Option<SystemTime>,
    /// The same moment on the monotonic clock (live frames only): deadlines are
    /// kept on it, so a step of the wall clock moves no verdict.
    pub received_mono: Option<Instant>,
}

/// The frames one read split, in order. Dropped (the consumer is done with
/// it), its vector goes back to the reader's spares: a read allocates no
/// vector. A new one per read was a large allocation on the reader's thread,
/// at each of which glibc consolidated the small chunks freed to that thread's
/// arena (5% of the agent's CPU on failing returns).
#[derive(Debug, Default)]
pub struct FrameBatch {
    frames: Vec<Frame>,
    spares: Option<Arc<BatchSpares>>,
}

impl FrameBatch {
    /// A batch whose vector goes back to `spares` when dropped.
    pub(super) fn returning(frames: Vec<Frame>, spares: Arc<BatchSpares>) -> Self {
        Self {
            frames,
            spares: Some(spares),
        }
    }
}

impl From<Vec<Frame>> for FrameBatch {
    /// A batch whose vector is freed with it.
    fn from(frames: Vec<Frame>) -> Self {
        Self {
            frames,
            spares: None,
        }
    }
}

impl Deref for FrameBatch {
    type Target = [Frame];

    fn deref(&self) -> &[Frame] {
        &self.frames
    }
}

impl Clone for FrameBatch {
    fn clone(&self) -> Self {
        Self::from(self.frames.clone())
    }
}

impl Drop for FrameBatch {
    fn drop(&mut self) {
        if let Some(spares) = &self.spares {
            spares.keep(std::mem::take(&mut self.frames));
        }
    }
}

/// Emptied batch vectors for the reader's next reads: at most
/// [`MAX_SPARE_BATCHES`], each with room for at most [`MAX_SPARE_FRAMES`]
/// (a larger one is freed), so what is kept stays small.
#[derive(Debug, Default)]
pub struct BatchSpares(Mutex<Vec<Vec<Frame>>>);

/// Batch vectors kept for reuse: the reader fills one while the consumer
/// handles another; a few more for a consumer holding several.
const MAX_SPARE_BATCHES: usize = 4;
/// Frames a kept batch vector may have room for (64 bytes each).
const MAX_SPARE_FRAMES: usize = 1_024;

impl BatchSpares {
    /// An empty vector: a spare one if there is one.
    pub(super) fn take(&self) -> Vec<Frame> {
        // A poisoned lock (a panic while pushing a vector) only loses the reuse.
        self.0
            .lock()
            .ok()
            .and_then(|mut spares| spares.pop())
            .unwrap_or_default()
    }

    fn keep(&self, mut frames: Vec<Frame>) {
        if frames.capacity() > MAX_SPARE_FRAMES {
            return;
        }
        frames.clear();
        if let Ok(mut spares) = self.0.lock() {
            if spares.len() < MAX_SPARE_BATCHES {
                spares.push(frames);
            }
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.lock().map_or(0, |spares| spares.len())
    }
}

/// A stretch in which events may have been missed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusGap {
    pub started_at: SystemTime,
    pub ended_at: SystemTime,
    pub reason: GapReason,
    /// Frames read but dropped (queue full) inside the gap.
    pub dropped_frames: u64,
}

crate::label_set! {
    /// Why events may have been missed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum GapReason {
        /// The master closed or reset the connection (restart, stop).
        Disconnected = "disconnected",
        /// The master closed the connection while saltsight was behind in
        /// reading it: Salt drops a subscriber whose pending writes pass
        /// `pub_server_write_queue_size` ("Publisher discarding slow
        /// subscriber" in the master's log).
        Discarded = "discarded",
        /// Reading failed.
        ReadError = "read_error",
        /// Bare framing could not be followed; the reader reconnected.
        Desync = "desync",
        /// The pipeline fell behind and frames were dropped.
        QueueFull = "queue_full",
        /// saltsight stopped while disconnected.
        Shutdown = "shutdown",
        /// A frame was read but could not be read through (over the cap, or
        /// undecodable) and nothing in it named what it was.
        FrameLost = "frame_lost",
        /// saltsight itself was not running (a restart, an upgrade).
        Restart = "restart",
    }
}

/// What the reader hands downstream.
#[derive(Debug, Clone)]
pub enum BusMessage {
    /// One frame (a recording hands them over one by one).
    Frame(Frame),
    /// The frames one read of the live bus split, in order: one message, and
    /// one wake-up of the consumer, per read rather than per frame.
    Frames(FrameBatch),
    /// Raw bytes as read (capture mode): no splitting.
    Chunk(Frame),
    /// A connection was made.
    Connected {
        endpoint: Endpoint,
        at: SystemTime,
    },
    /// The connection was just lost: a gap has begun. Its [`BusGap`] follows at
    /// the reconnect (or at shutdown), so that nothing is judged in between.
    Disconnected {
        at: SystemTime,
        reason: GapReason,
    },
    Gap(BusGap),
    /// A frame that was read but could not be handed on (over the cap).
    Lost(Lost),
}

/// A frame read and not handed on: what is known of it.
#[derive(Debug, Clone)]
pub struct Lost {
    /// Its first bytes (its tag, when it is there).
    pub head: Bytes,
    pub declared_len: u64,
    pub received_at: SystemTime,
}

/// Where the consumer wakes a reader holding for it to take a burst
/// (`hold.rs`, which waits on it).
#[derive(Debug, Default)]
pub struct HoldSignal {
    pub(super) holding: AtomicBool,
    pub(super) lock: Mutex<()>,
    pub(super) taken: Condvar,
}

impl HoldSignal {
    /// The consumer took frames: wakes the reader if it is holding (one load
    /// otherwise).
    fn taken(&self) {
        if self.holding.load(Ordering::SeqCst) {
            let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.taken.notify_one();
        }
    }
}

/// Counters shared with whoever reports on the reader (metrics, `tail` at exit).
#[derive(Debug, Default)]
pub struct ReaderStats {
    pub connected: AtomicBool,
    pub connects: AtomicU64,
    pub connect_failures: AtomicU64,
    pub bytes: AtomicU64,
    pub frames: AtomicU64,
    pub dropped_queue_full: AtomicU64,
    pub skipped_too_large: AtomicU64,
    pub desyncs: AtomicU64,
    /// Desyncs that were a frame begun and never finished.
    pub stalls: AtomicU64,
    pub gaps: AtomicU64,
    /// Bytes of frames queued and not yet consumed: the consumer subtracts what it
    /// takes ([`ReaderStats::consumed`]).
    pub queued_bytes: AtomicU64,
    /// Frames (and capture chunks) queued and not yet consumed, likewise: the
    /// queue's bound in frames (`bus.queue_frames`), now that a message carries
    /// a read's worth of them.
    pub queued_frames: AtomicU64,
    /// Times the reader stopped reading for the consumer to take a burst
    /// (`hold.rs`), the microseconds it waited, and the holds that ended
    /// because their time was spent, not because the queue was taken.
    pub holds: AtomicU64,
    pub held_micros: AtomicU64,
    pub holds_spent: AtomicU64,
    /// Frames that went through the spill on disk (the queue was full), the
    /// bytes it holds now, and its write or read errors.
    pub spilled_frames: AtomicU64,
    pub spill_bytes: AtomicU64,
    pub spill_errors: AtomicU64,
    /// Where the consumer wakes a holding reader.
    pub(super) hold: HoldSignal,
    /// Woken after each connection attempt, whatever its outcome, and when a
    /// connection is lost.
    pub(super) changed: tokio::sync::Notify,
}

impl ReaderStats {
    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The consumer took `frames` frames or chunks, of `bytes` in all, off the queue.
    pub fn consumed(&self, frames: usize, bytes: usize) {
        self.queued_frames
            .fetch_sub(frames as u64, Ordering::Relaxed);
        // Before the hold's flag is read: a reader that set it sees this take.
        self.queued_bytes.fetch_sub(bytes as u64, Ordering::SeqCst);
        self.hold.taken();
    }

    /// Returns once the reader has tried to connect at least once (connected, or
    /// failed and retrying): what "started" means for a service manager.
    pub async fn first_attempt_over(&self) {
        self.when_changed(|s| {
            let attempts =
                s.connects.load(Ordering::Relaxed) + s.connect_failures.load(Ordering::Relaxed);
            (attempts > 0).then_some(())
        })
        .await
    }

    /// Whether connected, once that may have changed since `was` (a connection
    /// made or lost, or an attempt that failed).
    pub async fn connection_change(&self, was: bool) -> bool {
        self.when_changed(|s| {
            let now = s.connected.load(Ordering::Relaxed);
            (now != was).then_some(now)
        })
        .await
    }

    /// Waits for the reader's connection news until `ready` answers.
    async fn when_changed<T>(&self, ready: impl Fn(&Self) -> Option<T>) -> T {
        loop {
            // Made before the check: a wake-up between the two is not lost.
            let woken = self.changed.notified();
            if let Some(answer) = ready(self) {
                return answer;
            }
            woken.await;
        }
    }
}
