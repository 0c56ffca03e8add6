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

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use backon::{BackoffBuilder, ExponentialBuilder};
use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::endpoint::{BusStream, Endpoint};
use super::framing::{FrameSplitter, Split};
use crate::ratelimit::LogLimiter;

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
    Frame(Frame),
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
    /// Woken after each connection attempt, whatever its outcome, and when a
    /// connection is lost.
    changed: tokio::sync::Notify,
}

impl ReaderStats {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The consumer took a frame or chunk of `bytes` off the queue.
    pub fn consumed(&self, bytes: usize) {
        self.queued_bytes.fetch_sub(bytes as u64, Ordering::Relaxed);
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
    /// Bytes the queue may hold (frames of several MB are normal: a count alone
    /// would not bound memory).
    pub max_queue_bytes: usize,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    /// How long a frame may stay half-read with nothing arriving before the
    /// stream counts as out of sync.
    pub stall_timeout: Duration,
    pub delivery: Delivery,
}

/// How much is asked of the socket per read; frames larger than this are assembled
/// over several reads.
const READ_CHUNK: usize = 256 * 1024;

enum ConnectionEnd {
    Cancelled,
    Lost(GapReason),
}

/// How a connection ended.
struct Drained {
    end: ConnectionEnd,
    /// When its last frame was read (where the loss of a dropped subscriber begins).
    last_frame_at: Option<SystemTime>,
    /// It delivered a frame, or stayed up [`HEALTHY_AFTER`].
    healthy: bool,
}

/// How long a new connection must last, when it delivers nothing, to count as
/// working (and end the gap before it).
const HEALTHY_AFTER: Duration = Duration::from_secs(1);

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
        let outbox = Outbox::new(tx, stats.clone(), config.max_queue_bytes as u64);
        Self {
            config,
            stats,
            outbox,
            skip_log: LogLimiter::new(Duration::from_secs(10)),
        }
    }

    /// Runs until `cancel` fires or the queue's receiver is gone.
    ///
    /// A lost connection opens a gap at the last frame read on it (the master
    /// dropping a stalled subscriber lost everything since) and says so at once
    /// (`Disconnected`); the gap is reported whole (`Gap`) only once a new
    /// connection proves healthy (a frame split, or [`HEALTHY_AFTER`] without a
    /// loss), so a storm of failed connections is one gap. A connection that
    /// ends unhealthy is followed by the same backoff as a failed connect.
    #[tracing::instrument(name = "bus_reader", skip_all, fields(endpoint = %self.config.endpoint))]
    pub async fn run(mut self, cancel: CancellationToken) {
        let mut open_gap: Option<(SystemTime, GapReason)> = None;
        let mut backoff = self.backoff();
        let mut lost_log = LogLimiter::new(Duration::from_secs(10));
        while let Some(stream) = self.connect(&cancel).await {
            let endpoint = self.config.endpoint.clone();
            self.outbox.control(BusMessage::Connected {
                endpoint,
                at: SystemTime::now(),
            });
            self.outbox.flush_held();
            let drained = self.drain(stream, &cancel, &mut open_gap).await;
            self.stats.connected.store(false, Ordering::Relaxed);
            self.stats.changed.notify_waiters();
            let ConnectionEnd::Lost(reason) = drained.end else {
                break;
            };
            let at = drained.last_frame_at.unwrap_or_else(SystemTime::now);
            match &mut open_gap {
                Some((started_at, held)) => {
                    *started_at = (*started_at).min(at);
                    if *held == GapReason::QueueFull {
                        *held = reason;
                    }
                }
                None => {
                    open_gap = Some((at, reason));
                    self.outbox.control(BusMessage::Disconnected { at, reason });
                    self.outbox.flush_held();
                }
            }
            if let Some(suppressed) = lost_log.admit(reason.as_str()) {
                warn!(
                    reason = reason.as_str(),
                    suppressed,
                    "Lost the event bus; reconnecting."
                );
            }
            if drained.healthy {
                backoff = self.backoff();
            } else {
                // Garbage on every connection must not become a reconnect loop.
                let delay = backoff.next().unwrap_or(self.config.reconnect_max);
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(delay) => {}
                }
            }
            if self.outbox.tx.is_closed() {
                return;
            }
        }
        if let Some((started_at, _)) = open_gap {
            let now = SystemTime::now();
            self.outbox.control(BusMessage::Gap(BusGap {
                started_at,
                ended_at: now,
                reason: GapReason::Shutdown,
                dropped_frames: 0,
            }));
        }
        self.outbox.flush(Duration::from_secs(1)).await;
    }

    /// The reconnect delays: exponential from `reconnect_min` to `reconnect_max`,
    /// with backon's jitter (up to 100% of each delay), without end.
    fn backoff(&self) -> backon::ExponentialBackoff {
        ExponentialBuilder::default()
            .with_min_delay(self.config.reconnect_min)
            .with_max_delay(self.config.reconnect_max)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build()
    }

    /// Connects, retrying with exponential backoff (backon's jitter adds up to 100% of
    /// each delay) until it works or
    /// `cancel` fires. The first failure of a series is a warning naming the path
    /// and the user; repeats are debug.
    async fn connect(&mut self, cancel: &CancellationToken) -> Option<BusStream> {
        let mut backoff = self.backoff();
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
                    // Before the log line: whoever reads it may ask /readyz next.
                    self.stats.connected.store(true, Ordering::Relaxed);
                    self.stats.changed.notify_waiters();
                    info!(failed_attempts = failures, "Connected to the event bus.");
                    return Some(stream);
                }
                Err(error) => {
                    ReaderStats::add(&self.stats.connect_failures, 1);
                    self.stats.changed.notify_waiters();
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

    /// Reads one connection until it ends. Reports `open_gap` (what earlier
    /// connections lost) once this one proves healthy.
    async fn drain(
        &mut self,
        mut stream: BusStream,
        cancel: &CancellationToken,
        open_gap: &mut Option<(SystemTime, GapReason)>,
    ) -> Drained {
        let mut buf = BytesMut::with_capacity(READ_CHUNK);
        let mut splitter = FrameSplitter::new(self.config.max_frame_bytes);
        let connected_at = Instant::now();
        let mut drained = Drained {
            end: ConnectionEnd::Cancelled,
            last_frame_at: None,
            healthy: false,
        };
        // Set while inside a frame: when its next bytes are due at the latest.
        let mut stall_at: Option<Instant> = None;
        loop {
            if buf.capacity() - buf.len() < READ_CHUNK / 4 {
                buf.reserve(READ_CHUNK);
            }
            // A timer only while one is needed: an idle, healthy bus costs no wake-ups.
            let healthy_at = open_gap.is_some().then(|| connected_at + HEALTHY_AFTER);
            let wake_at = [stall_at, healthy_at].into_iter().flatten().min();
            let read = tokio::select! {
                biased;
                () = cancel.cancelled() => return drained,
                r = stream.read_buf(&mut buf) => Some(r),
                () = sleep_until_some(wake_at) => None,
            };
            let Some(read) = read else {
                if stall_at.is_some_and(|t| t <= Instant::now()) {
                    ReaderStats::add(&self.stats.desyncs, 1);
                    ReaderStats::add(&self.stats.stalls, 1);
                    warn!(
                        buffered_bytes = buf.len(),
                        stall_timeout_ms = self.config.stall_timeout.as_millis() as u64,
                        "A frame was begun but not finished in time; reconnecting."
                    );
                    drained.end = ConnectionEnd::Lost(GapReason::Desync);
                    return drained;
                }
                self.healthy(open_gap, &mut drained);
                continue;
            };
            let n = match read {
                Ok(0) => {
                    if !buf.is_empty() {
                        warn!(partial_bytes = buf.len(), "The bus closed inside a frame.");
                    }
                    drained.end = ConnectionEnd::Lost(GapReason::Disconnected);
                    return drained;
                }
                Ok(n) => n,
                Err(error) => {
                    // A reset is the master going away (a restart kills its publisher).
                    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
                    let reason = if matches!(
                        error.kind(),
                        ConnectionReset | ConnectionAborted | BrokenPipe
                    ) {
                        GapReason::Disconnected
                    } else {
                        warn!(%error, "Reading the event bus failed.");
                        GapReason::ReadError
                    };
                    drained.end = ConnectionEnd::Lost(reason);
                    return drained;
                }
            };
            ReaderStats::add(&self.stats.bytes, n as u64);
            let received_at = SystemTime::now();
            let received_mono = Some(Instant::now());
            if self.config.delivery == Delivery::RawChunks {
                let chunk = Frame {
                    bytes: buf.split().freeze(),
                    received_at: Some(received_at),
                    received_mono,
                };
                if !self.outbox.offer(BusMessage::Chunk(chunk)) {
                    // A lost chunk breaks the byte stream mid-frame: start a new one.
                    warn!("Capture fell behind the bus; reconnecting to restart the stream.");
                    drained.end = ConnectionEnd::Lost(GapReason::QueueFull);
                    return drained;
                }
                self.healthy(open_gap, &mut drained);
                continue;
            }
            let detected_before = splitter.framing();
            loop {
                match splitter.next(&mut buf) {
                    Ok(Some(Split::Frame(bytes))) => {
                        ReaderStats::add(&self.stats.frames, 1);
                        self.healthy(open_gap, &mut drained);
                        drained.last_frame_at = Some(received_at);
                        self.outbox.offer(BusMessage::Frame(Frame {
                            bytes,
                            received_at: Some(received_at),
                            received_mono,
                        }));
                    }
                    Ok(Some(Split::Skipped { declared_len, head })) => {
                        self.healthy(open_gap, &mut drained);
                        drained.last_frame_at = Some(received_at);
                        self.skipped(declared_len, head, received_at);
                    }
                    Ok(None) => break,
                    Err(error) => {
                        ReaderStats::add(&self.stats.desyncs, 1);
                        if let Some(suppressed) = self.skip_log.admit(error.reason()) {
                            warn!(%error, reason = error.reason(), suppressed, "The frame stream is out of sync; reconnecting to resynchronise.");
                        }
                        drained.end = ConnectionEnd::Lost(GapReason::Desync);
                        return drained;
                    }
                }
            }
            stall_at = splitter
                .mid_frame(&buf)
                .then(|| Instant::now() + self.config.stall_timeout);
            if detected_before.is_none() {
                if let Some(framing) = splitter.framing() {
                    info!(framing = framing.as_str(), "Detected the bus framing.");
                }
            }
        }
    }

    /// This connection works: the gap earlier connections opened is over.
    fn healthy(&mut self, open_gap: &mut Option<(SystemTime, GapReason)>, drained: &mut Drained) {
        drained.healthy = true;
        if let Some((started_at, reason)) = open_gap.take() {
            self.outbox.control(BusMessage::Gap(BusGap {
                started_at,
                ended_at: SystemTime::now(),
                reason,
                dropped_frames: 0,
            }));
            self.outbox.flush_held();
        }
    }

    /// A frame over the cap was read and skipped: the pipeline hears of it (with
    /// its first bytes, to name it), counted, logged at most once an interval.
    fn skipped(&mut self, declared_len: u64, head: Bytes, received_at: SystemTime) {
        ReaderStats::add(&self.stats.skipped_too_large, 1);
        if let Some(suppressed) = self.skip_log.admit("too_large") {
            warn!(
                declared_len,
                cap = self.config.max_frame_bytes,
                suppressed,
                "Skipped a frame over bus.max_frame_bytes by its length prefix."
            );
        }
        self.outbox.control(BusMessage::Lost(Lost {
            head,
            declared_len,
            received_at,
        }));
        self.outbox.flush_held();
    }
}

/// Sleeps until `at`, or for ever.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The sending side of the queue; never waits.
///
/// Control messages are held, in order, until there is room. A `Connected` must
/// precede the new connection's data, so data never passes one. A held gap may be passed by data: it is sent when two slots
/// are free (one left for data), or after waiting [`GAP_MAX_HOLD`] even into the
/// last slot, so a queue that stays full delivers frames, with at most one gap a
/// second, not a flood of gaps. A gap's meaning is its time span, not its place.
struct Outbox {
    tx: mpsc::Sender<BusMessage>,
    held: VecDeque<BusMessage>,
    held_since: Option<Instant>,
    stats: Arc<ReaderStats>,
    max_bytes: u64,
}

/// The longest a gap waits for a slot that leaves room for data.
const GAP_MAX_HOLD: Duration = Duration::from_secs(1);

impl Outbox {
    fn new(tx: mpsc::Sender<BusMessage>, stats: Arc<ReaderStats>, max_bytes: u64) -> Self {
        Self {
            tx,
            held: VecDeque::new(),
            held_since: None,
            stats,
            max_bytes,
        }
    }

    /// Holds a control message behind those already held (a gap right behind a
    /// held gap merges into it).
    fn control(&mut self, msg: BusMessage) {
        self.held_since.get_or_insert_with(Instant::now);
        match (self.held.back_mut(), msg) {
            (Some(BusMessage::Gap(held)), BusMessage::Gap(gap)) => merge_gap(held, gap),
            (_, msg) => self.held.push_back(msg),
        }
    }

    /// Sends what is held while there is room; returns whether data may go next
    /// (nothing but gaps is left held).
    fn flush_held(&mut self) -> bool {
        let overdue = self.held_since.is_some_and(|t| t.elapsed() >= GAP_MAX_HOLD);
        while let Some(front) = self.held.front() {
            let is_gap = matches!(front, BusMessage::Gap(_));
            let keep_free = usize::from(is_gap && !overdue);
            // One producer: the capacity seen cannot shrink before the send.
            if self.tx.capacity() <= keep_free {
                break;
            }
            let Some(mut msg) = self.held.pop_front() else {
                break;
            };
            if let BusMessage::Gap(gap) = &mut msg {
                if gap.reason == GapReason::QueueFull {
                    gap.ended_at = SystemTime::now();
                }
                ReaderStats::add(&self.stats.gaps, 1);
            }
            if self.tx.try_send(msg).is_err() {
                return false;
            }
        }
        if self.held.is_empty() {
            self.held_since = None;
        }
        self.held.iter().all(|m| matches!(m, BusMessage::Gap(_)))
    }

    /// Offers a frame or chunk without waiting. Returns whether it was queued; a
    /// message that does not fit is dropped, counted, and widens a `queue_full` gap.
    fn offer(&mut self, msg: BusMessage) -> bool {
        let bytes = match &msg {
            BusMessage::Frame(f) | BusMessage::Chunk(f) => f.bytes.len() as u64,
            _ => 0,
        };
        let queued = self.stats.queued_bytes.load(Ordering::Relaxed);
        // One frame is always let in, however large, so a frame over the byte
        // budget cannot stall the stream for ever.
        let fits = queued == 0 || queued + bytes <= self.max_bytes;
        if fits && self.flush_held() {
            match self.tx.try_send(msg) {
                Ok(()) => {
                    ReaderStats::add(&self.stats.queued_bytes, bytes);
                    return true;
                }
                Err(TrySendError::Closed(_)) => return false,
                Err(TrySendError::Full(_)) => {}
            }
        } else if self.tx.is_closed() {
            return false;
        }
        ReaderStats::add(&self.stats.dropped_queue_full, 1);
        let now = SystemTime::now();
        self.control(BusMessage::Gap(BusGap {
            started_at: now,
            ended_at: now,
            reason: GapReason::QueueFull,
            dropped_frames: 1,
        }));
        false
    }

    /// At shutdown: waits (bounded) for room for what is held.
    async fn flush(&mut self, grace: Duration) {
        while let Some(msg) = self.held.pop_front() {
            if !tokio::time::timeout(grace, self.tx.send(msg))
                .await
                .is_ok_and(|r| r.is_ok())
            {
                return;
            }
        }
    }
}

/// Merges `gap` into `held`: the earliest start, the latest end, dropped frames
/// added up, and the stronger reason (losing the connection outranks falling behind).
fn merge_gap(held: &mut BusGap, gap: BusGap) {
    held.started_at = held.started_at.min(gap.started_at);
    held.ended_at = held.ended_at.max(gap.ended_at);
    held.dropped_frames += gap.dropped_frames;
    if held.reason == GapReason::QueueFull {
        held.reason = gap.reason;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_msg() -> BusMessage {
        BusMessage::Frame(Frame {
            bytes: Bytes::from_static(b"x"),
            received_at: None,
            received_mono: None,
        })
    }

    fn outbox(capacity: usize) -> (Outbox, mpsc::Receiver<BusMessage>, Arc<ReaderStats>) {
        let (tx, rx) = mpsc::channel(capacity);
        let stats = Arc::new(ReaderStats::default());
        (Outbox::new(tx, stats.clone(), u64::MAX), rx, stats)
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_drops_counts_and_delivers_one_gap_when_there_is_room() {
        let (mut outbox, mut rx, stats) = outbox(2);
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

    /// A consumer that takes one message per frame offered keeps the queue full:
    /// gaps must not crowd out frames (the held gap waits for room for itself and
    /// a frame).
    #[tokio::test(start_paused = true)]
    async fn sustained_overload_delivers_frames_and_at_most_a_gap_a_second() {
        let (mut outbox, mut rx, stats) = outbox(4);
        let (mut frames, mut gaps, mut dropped_in_gaps) = (0u64, 0u64, 0u64);
        for i in 0..1000 {
            if i % 100 == 0 {
                tokio::time::advance(Duration::from_millis(500)).await;
            }
            outbox.offer(frame_msg());
            outbox.offer(frame_msg());
            match rx.try_recv() {
                Ok(BusMessage::Frame(_)) => frames += 1,
                Ok(BusMessage::Gap(g)) => {
                    gaps += 1;
                    dropped_in_gaps += g.dropped_frames;
                }
                _ => {}
            }
        }
        while let Ok(msg) = rx.try_recv() {
            match msg {
                BusMessage::Frame(_) => frames += 1,
                BusMessage::Gap(g) => {
                    gaps += 1;
                    dropped_in_gaps += g.dropped_frames;
                }
                _ => {}
            }
        }
        let dropped = stats.dropped_queue_full.load(Ordering::Relaxed);
        assert_eq!(
            frames + dropped,
            2000,
            "every frame is delivered or counted"
        );
        assert!(frames >= 990, "frames delivered: {frames}, gaps: {gaps}");
        // 5 s of simulated overload: about one gap a second, never one per frame.
        assert!((1..=6).contains(&gaps), "frames {frames}, gaps {gaps}");
        // What is still held has not been delivered yet; the rest is accounted for.
        let held: u64 = outbox
            .held
            .iter()
            .map(|m| {
                if let BusMessage::Gap(g) = m {
                    g.dropped_frames
                } else {
                    0
                }
            })
            .sum();
        assert_eq!(dropped_in_gaps + held, dropped);
    }

    #[tokio::test(start_paused = true)]
    async fn a_disconnect_merged_into_a_held_queue_full_gap_is_reported_as_the_disconnect() {
        let (mut outbox, mut rx, _) = outbox(3);
        for _ in 0..4 {
            outbox.offer(frame_msg()); // the fourth is dropped: a queue_full gap is held
        }
        let now = SystemTime::now();
        outbox.control(BusMessage::Gap(BusGap {
            started_at: now,
            ended_at: now,
            reason: GapReason::Disconnected,
            dropped_frames: 0,
        }));
        outbox.control(BusMessage::Connected {
            endpoint: Endpoint::Unix("/x".into()),
            at: now,
        });
        for _ in 0..3 {
            assert!(matches!(rx.try_recv(), Ok(BusMessage::Frame(_))));
        }
        // A held Connected: data waits behind it, in order.
        outbox.offer(frame_msg());
        match rx.try_recv() {
            Ok(BusMessage::Gap(gap)) => assert_eq!(
                (gap.reason, gap.dropped_frames),
                (GapReason::Disconnected, 1)
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(rx.try_recv(), Ok(BusMessage::Connected { .. })));
        assert!(matches!(rx.try_recv(), Ok(BusMessage::Frame(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn the_byte_budget_drops_what_would_exceed_it_until_consumed() {
        let (tx, mut rx) = mpsc::channel(100);
        let stats = Arc::new(ReaderStats::default());
        let mut outbox = Outbox::new(tx, stats.clone(), 2);
        let one_byte = || {
            BusMessage::Frame(Frame {
                bytes: Bytes::from_static(b"x"),
                received_at: None,
                received_mono: None,
            })
        };
        assert!(outbox.offer(one_byte()));
        assert!(outbox.offer(one_byte()));
        assert!(!outbox.offer(one_byte()), "over the 2-byte budget");
        assert!(matches!(rx.try_recv(), Ok(BusMessage::Frame(_))));
        stats.consumed(1);
        assert!(outbox.offer(one_byte()));
        assert_eq!(stats.dropped_queue_full.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_queue_is_not_counted_as_drops() {
        let (mut outbox, rx, stats) = outbox(1);
        drop(rx);
        assert!(!outbox.offer(frame_msg()));
        assert_eq!(stats.dropped_queue_full.load(Ordering::Relaxed), 0);
    }
}
