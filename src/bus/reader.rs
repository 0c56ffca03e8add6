//! The reader task: connect, drain the socket as fast as it delivers, hand frames to
//! a bounded queue without ever waiting on it, and reconnect with backoff.
//!
//! Invariants:
//! - it only reads: it never writes to the socket, never shuts it down halfway, and
//!   never opens `master_event_pull.ipc`;
//! - it never awaits the queue while connected: when the queue is full the frame is
//!   dropped, counted, and the loss becomes a [`BusGap`] delivered before the next
//!   frame that fits (the master drops a subscriber with 10,000 writes pending, so a
//!   blocked reader would lose more, and cost the master memory first);
//! - every stretch of time in which events may have been missed after the first
//!   connection (disconnect, desync, queue full) is delivered as one [`BusGap`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use backon::{BackoffBuilder, ExponentialBuilder};
use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::endpoint::{BusStream, Endpoint};
use super::framing::{FrameSplitter, Framing, SkipReason, Split};
use crate::ratelimit::LogLimiter;

/// One frame as read, with when it was read.
#[derive(Debug, Clone)]
pub struct Frame {
    pub bytes: Bytes,
    /// When it was read; `None` for frames from a raw dump, which has no times.
    pub received_at: Option<SystemTime>,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapReason {
    /// The master closed or reset the connection (restart, stop).
    Disconnected,
    /// Reading failed.
    ReadError,
    /// Bare framing could not be followed; the reader reconnected.
    Desync,
    /// The pipeline fell behind and frames were dropped.
    QueueFull,
    /// saltsight stopped while disconnected.
    Shutdown,
}

impl GapReason {
    pub fn as_str(self) -> &'static str {
        match self {
            GapReason::Disconnected => "disconnected",
            GapReason::ReadError => "read_error",
            GapReason::Desync => "desync",
            GapReason::QueueFull => "queue_full",
            GapReason::Shutdown => "shutdown",
        }
    }
}

/// What the reader hands downstream.
#[derive(Debug, Clone)]
pub enum BusMessage {
    Frame(Frame),
    /// Raw bytes as read (capture mode): no splitting.
    Chunk(Frame),
    /// A connection was made.
    Connected {
        endpoint: Endpoint,
        at: SystemTime,
    },
    /// The framing detected on the current connection, once its first byte arrived.
    FramingDetected(Framing),
    Gap(BusGap),
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
    pub skipped_empty: AtomicU64,
    pub desyncs: AtomicU64,
    pub gaps: AtomicU64,
}

impl ReaderStats {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Split into frames (the pipeline).
    Frames,
    /// Raw chunks as read (`saltsight capture`).
    RawChunks,
}

#[derive(Debug, Clone)]
pub struct ReaderConfig {
    pub endpoint: Endpoint,
    pub max_frame_bytes: usize,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    pub delivery: Delivery,
}

/// How much is asked of the socket per read; frames larger than this are assembled
/// over several reads.
const READ_CHUNK: usize = 256 * 1024;

enum ConnectionEnd {
    Cancelled,
    Lost(GapReason),
}

pub struct BusReader {
    config: ReaderConfig,
    stats: Arc<ReaderStats>,
    outbox: Outbox,
    skip_log: LogLimiter,
}

impl BusReader {
    pub fn new(
        config: ReaderConfig,
        tx: mpsc::Sender<BusMessage>,
        stats: Arc<ReaderStats>,
    ) -> Self {
        let outbox = Outbox {
            tx,
            held_gap: None,
            stats: stats.clone(),
        };
        Self {
            config,
            stats,
            outbox,
            skip_log: LogLimiter::new(Duration::from_secs(10)),
        }
    }

    /// Runs until `cancel` fires or the queue's receiver is gone.
    #[tracing::instrument(name = "bus_reader", skip_all, fields(endpoint = %self.config.endpoint))]
    pub async fn run(mut self, cancel: CancellationToken) {
        let mut open_gap: Option<(SystemTime, GapReason)> = None;
        while let Some(stream) = self.connect(&cancel).await {
            let now = SystemTime::now();
            if let Some((started_at, reason)) = open_gap.take() {
                self.outbox.hold_gap(BusGap {
                    started_at,
                    ended_at: now,
                    reason,
                    dropped_frames: 0,
                });
            }
            let endpoint = self.config.endpoint.clone();
            self.outbox
                .offer(BusMessage::Connected { endpoint, at: now });
            self.stats.connected.store(true, Ordering::Relaxed);
            let end = self.drain(stream, &cancel).await;
            self.stats.connected.store(false, Ordering::Relaxed);
            match end {
                ConnectionEnd::Cancelled => break,
                ConnectionEnd::Lost(reason) => {
                    warn!(
                        reason = reason.as_str(),
                        "Lost the event bus; reconnecting."
                    );
                    open_gap = Some((SystemTime::now(), reason));
                }
            }
            if self.outbox.tx.is_closed() {
                return;
            }
        }
        if let Some((started_at, _)) = open_gap {
            let now = SystemTime::now();
            self.outbox.hold_gap(BusGap {
                started_at,
                ended_at: now,
                reason: GapReason::Shutdown,
                dropped_frames: 0,
            });
        }
        self.outbox.flush(Duration::from_secs(1)).await;
    }

    /// Connects, retrying with exponential backoff and full jitter until it works or
    /// `cancel` fires. The first failure of a series is a warning naming the path
    /// and the user; repeats are debug.
    async fn connect(&mut self, cancel: &CancellationToken) -> Option<BusStream> {
        let mut backoff = ExponentialBuilder::default()
            .with_min_delay(self.config.reconnect_min)
            .with_max_delay(self.config.reconnect_max)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build();
        let mut failures = 0u64;
        loop {
            let attempt = tokio::select! {
                biased;
                () = cancel.cancelled() => return None,
                r = self.config.endpoint.connect() => r,
            };
            match attempt {
                Ok(stream) => {
                    ReaderStats::add(&self.stats.connects, 1);
                    info!(failed_attempts = failures, "Connected to the event bus.");
                    return Some(stream);
                }
                Err(error) => {
                    ReaderStats::add(&self.stats.connect_failures, 1);
                    if failures == 0 {
                        warn!(%error, "Cannot connect to the event bus; retrying with backoff.");
                    } else {
                        debug!(%error, failures, "Still cannot connect to the event bus.");
                    }
                    failures += 1;
                }
            }
            // `without_max_times` makes the iterator endless; the fallback is for form.
            let delay = backoff.next().unwrap_or(self.config.reconnect_max);
            tokio::select! {
                biased;
                () = cancel.cancelled() => return None,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    async fn drain(&mut self, mut stream: BusStream, cancel: &CancellationToken) -> ConnectionEnd {
        let mut buf = BytesMut::with_capacity(READ_CHUNK);
        let mut splitter = FrameSplitter::new(self.config.max_frame_bytes);
        loop {
            if buf.capacity() - buf.len() < READ_CHUNK / 4 {
                buf.reserve(READ_CHUNK);
            }
            let read = tokio::select! {
                biased;
                () = cancel.cancelled() => return ConnectionEnd::Cancelled,
                r = stream.read_buf(&mut buf) => r,
            };
            let n = match read {
                Ok(0) => {
                    if !buf.is_empty() {
                        warn!(partial_bytes = buf.len(), "The bus closed inside a frame.");
                    }
                    return ConnectionEnd::Lost(GapReason::Disconnected);
                }
                Ok(n) => n,
                Err(error) => {
                    // A reset is the master going away (a restart kills its publisher).
                    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
                    if matches!(
                        error.kind(),
                        ConnectionReset | ConnectionAborted | BrokenPipe
                    ) {
                        return ConnectionEnd::Lost(GapReason::Disconnected);
                    }
                    warn!(%error, "Reading the event bus failed.");
                    return ConnectionEnd::Lost(GapReason::ReadError);
                }
            };
            ReaderStats::add(&self.stats.bytes, n as u64);
            let received_at = SystemTime::now();
            if self.config.delivery == Delivery::RawChunks {
                self.outbox.offer(BusMessage::Chunk(Frame {
                    bytes: buf.split().freeze(),
                    received_at: Some(received_at),
                }));
                continue;
            }
            let detected_before = splitter.framing();
            loop {
                match splitter.next(&mut buf) {
                    Ok(Some(Split::Frame(bytes))) => {
                        ReaderStats::add(&self.stats.frames, 1);
                        self.outbox.offer(BusMessage::Frame(Frame {
                            bytes,
                            received_at: Some(received_at),
                        }));
                    }
                    Ok(Some(Split::Skipped {
                        declared_len,
                        reason,
                    })) => self.skipped(declared_len, reason),
                    Ok(None) => break,
                    Err(error) => {
                        ReaderStats::add(&self.stats.desyncs, 1);
                        warn!(%error, reason = error.reason(), "Bare framing lost; reconnecting to resynchronise.");
                        return ConnectionEnd::Lost(GapReason::Desync);
                    }
                }
            }
            if detected_before.is_none() {
                if let Some(framing) = splitter.framing() {
                    info!(framing = framing.as_str(), "Detected the bus framing.");
                    self.outbox.offer(BusMessage::FramingDetected(framing));
                }
            }
        }
    }

    fn skipped(&mut self, declared_len: u64, reason: SkipReason) {
        let (counter, label) = match reason {
            SkipReason::TooLarge => (&self.stats.skipped_too_large, "too_large"),
            SkipReason::Empty => (&self.stats.skipped_empty, "empty"),
        };
        ReaderStats::add(counter, 1);
        if let Some(suppressed) = self.skip_log.admit(label) {
            warn!(
                declared_len,
                cap = self.config.max_frame_bytes,
                reason = label,
                suppressed,
                "Skipped a frame by its length prefix."
            );
        }
    }
}

/// The sending side of the queue, holding back a gap until there is room for it.
struct Outbox {
    tx: mpsc::Sender<BusMessage>,
    held_gap: Option<BusGap>,
    stats: Arc<ReaderStats>,
}

impl Outbox {
    /// Offers a message without waiting. A held gap goes first; a message that does
    /// not fit is dropped and, if it was a frame, widens the held gap.
    fn offer(&mut self, msg: BusMessage) {
        if let Some(mut gap) = self.held_gap.take() {
            if gap.reason == GapReason::QueueFull {
                gap.ended_at = SystemTime::now();
            }
            match self.tx.try_send(BusMessage::Gap(gap)) {
                Ok(()) => ReaderStats::add(&self.stats.gaps, 1),
                Err(
                    TrySendError::Full(BusMessage::Gap(gap))
                    | TrySendError::Closed(BusMessage::Gap(gap)),
                ) => {
                    self.held_gap = Some(gap);
                    self.dropped(msg);
                    return;
                }
                Err(_) => return,
            }
        }
        match self.tx.try_send(msg) {
            Ok(()) => {}
            Err(TrySendError::Full(msg)) => self.dropped(msg),
            Err(TrySendError::Closed(_)) => {}
        }
    }

    fn dropped(&mut self, msg: BusMessage) {
        let now = SystemTime::now();
        let frames = u64::from(matches!(msg, BusMessage::Frame(_) | BusMessage::Chunk(_)));
        ReaderStats::add(&self.stats.dropped_queue_full, frames);
        self.hold_gap(BusGap {
            started_at: now,
            ended_at: now,
            reason: GapReason::QueueFull,
            dropped_frames: frames,
        });
    }

    /// Merges `gap` into the held one: the earliest start, the latest end, the first
    /// reason, the dropped frames added up.
    fn hold_gap(&mut self, gap: BusGap) {
        self.held_gap = Some(match self.held_gap.take() {
            None => gap,
            Some(held) => BusGap {
                started_at: held.started_at.min(gap.started_at),
                ended_at: held.ended_at.max(gap.ended_at),
                reason: held.reason,
                dropped_frames: held.dropped_frames + gap.dropped_frames,
            },
        });
    }

    /// At shutdown: waits (bounded) for room for a held gap.
    async fn flush(&mut self, grace: Duration) {
        if let Some(gap) = self.held_gap.take() {
            if tokio::time::timeout(grace, self.tx.send(BusMessage::Gap(gap)))
                .await
                .is_ok_and(|r| r.is_ok())
            {
                ReaderStats::add(&self.stats.gaps, 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_msg() -> BusMessage {
        BusMessage::Frame(Frame {
            bytes: Bytes::from_static(b"x"),
            received_at: None,
        })
    }

    #[test]
    fn a_full_queue_drops_counts_and_delivers_one_gap_before_the_next_frame() {
        let (tx, mut rx) = mpsc::channel(2);
        let stats = Arc::new(ReaderStats::default());
        let mut outbox = Outbox {
            tx,
            held_gap: None,
            stats: stats.clone(),
        };
        for _ in 0..5 {
            outbox.offer(frame_msg());
        }
        assert_eq!(stats.dropped_queue_full.load(Ordering::Relaxed), 3);
        assert!(matches!(rx.try_recv(), Ok(BusMessage::Frame(_))));
        assert!(matches!(rx.try_recv(), Ok(BusMessage::Frame(_))));
        outbox.offer(frame_msg());
        match rx.try_recv() {
            Ok(BusMessage::Gap(gap)) => {
                assert_eq!(gap.reason, GapReason::QueueFull);
                assert_eq!(gap.dropped_frames, 3);
            }
            other => panic!("expected the gap first, got {other:?}"),
        }
        assert!(matches!(rx.try_recv(), Ok(BusMessage::Frame(_))));
        assert!(rx.try_recv().is_err());
    }
}
