//! The reader task: connect, drain the socket as fast as it delivers, hand frames to
//! a bounded queue without waiting on it (but for a bounded hold past a burst's
//! worth of queued bytes), and reconnect with backoff. Each
//! connection is read on a blocking thread of its own (`spawn_blocking`): while
//! it pauses between reads under sustained traffic (as long as `pace` says the
//! connection can hold), what the master writes wakes nothing (the runtime's
//! poller would wake at every write), and a read takes everything that arrived
//! meanwhile.
//!
//! Invariants:
//! - it only reads: it never writes to the socket, shuts down only its own read
//!   side (at shutdown, to end a blocked read), and never opens
//!   `master_event_pull.ipc`;
//! - it never awaits the queue while connected: the frames one read splits go
//!   downstream as one message (one wake-up of the consumer per read); when the
//!   queue is full (in frames or bytes) frames wait on disk (`spill.rs`), in
//!   order, and go on as the queue takes them; only what the spill refuses is
//!   dropped, counted, and becomes a [`BusGap`] (the master drops a subscriber
//!   with 10,000 writes pending, so a blocked reader would lose more, and cost
//!   the master memory first);
//! - it waits for the consumer in one case only, bounded: past 1 MiB queued it
//!   stops reading until the consumer has taken the burst, for at most 100 ms a
//!   stretch (`hold.rs`), so a burst read while the consumer waits for a core
//!   stays in the socket and the master's queue, not in saltsight's memory;
//! - every stretch of time in which events may have been missed after the first
//!   connection (disconnect, desync, queue full) is delivered as one [`BusGap`].

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use backon::{BackoffBuilder, ExponentialBuilder};
use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::endpoint::{BlockingBusStream, BusStream, Endpoint};
use super::framing::{FrameSplitter, Split};
use super::hold::Hold;
pub use super::message::{BusGap, BusMessage, Frame, GapReason, Lost, ReaderStats};
use super::outbox::Outbox;
use super::pace::{Pace, READ_CHUNK};
use super::spill::{Spill, SpillConfig};
use crate::ratelimit::LogLimiter;

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
    /// Frames (or capture chunks) the queue may hold.
    pub max_queue_frames: usize,
    /// Bytes the queue may hold (frames of several MB are normal: a count alone
    /// would not bound memory).
    pub max_queue_bytes: usize,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    /// How long a frame may stay half-read with nothing arriving before the
    /// stream counts as out of sync.
    pub stall_timeout: Duration,
    pub delivery: Delivery,
    /// Where frames go while the queue is full (frames only; none: dropped).
    pub spill: Option<SpillConfig>,
}

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

/// How often the reader looks for room in the queue while frames wait on
/// disk and the socket is quiet.
const UNSPILL_EVERY: Duration = Duration::from_millis(5);

/// A connection the master closes within this long of the reader being
/// behind (a read of a backlog, a hold) was dropped for being slow: its gap
/// is `discarded`, not `disconnected`.
const BEHIND_FOR: Duration = Duration::from_secs(2);

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
        let mut outbox = Outbox::new(
            tx,
            stats.clone(),
            config.max_queue_bytes as u64,
            config.max_queue_frames as u64,
        );
        if let (Delivery::Frames, Some(spill)) = (config.delivery, &config.spill) {
            outbox = outbox.with_spill(Spill::new(&spill.dir, spill.max_bytes));
        }
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
            let drained = match stream.into_blocking() {
                Ok((blocking, closer)) => {
                    // Cancelling ends the blocked read: its read side is shut.
                    let watch = tokio::spawn({
                        let cancel = cancel.clone();
                        async move {
                            cancel.cancelled().await;
                            closer.close_read();
                        }
                    });
                    let cancel = cancel.clone();
                    let mut gap = open_gap.take();
                    let read = tokio::task::spawn_blocking(move || {
                        let drained = self.drain(blocking, &cancel, &mut gap);
                        (self, drained, gap)
                    })
                    .await;
                    watch.abort();
                    match read {
                        Ok((reader, drained, gap)) => {
                            self = reader;
                            open_gap = gap;
                            drained
                        }
                        Err(error) if error.is_panic() => {
                            std::panic::resume_unwind(error.into_panic())
                        }
                        // The runtime is shutting down: nothing is left to do.
                        Err(_) => return,
                    }
                }
                Err(error) => {
                    warn!(%error, "Cannot read the event bus connection; reconnecting.");
                    Drained {
                        end: ConnectionEnd::Lost(GapReason::ReadError),
                        last_frame_at: None,
                        healthy: false,
                    }
                }
            };
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
                    suppressed, "Lost the event bus; reconnecting."
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

    /// Reads one connection until it ends, blocking (on a thread of its own).
    /// Reports `open_gap` (what earlier connections lost) once this one proves
    /// healthy.
    fn drain(
        &mut self,
        mut stream: BlockingBusStream,
        cancel: &CancellationToken,
        open_gap: &mut Option<(SystemTime, GapReason)>,
    ) -> Drained {
        let mut buf = BytesMut::new();
        // Read into, then copied into `buf` (what was read only): no unsafe
        // read into spare capacity, no zeroing per read.
        let mut scratch = vec![0u8; READ_CHUNK];
        let mut timeout: Option<Duration> = None;
        let mut splitter = FrameSplitter::new(self.config.max_frame_bytes);
        let connected_at = Instant::now();
        let mut drained = Drained {
            end: ConnectionEnd::Cancelled,
            last_frame_at: None,
            healthy: false,
        };
        // Set while inside a frame: when its next bytes are due at the latest.
        let mut stall_at: Option<Instant> = None;
        // When the reader was last behind the socket: a read of half its
        // buffer or more (a backlog), or a hold for the consumer.
        let mut behind_at: Option<Instant> = None;
        let mut last_read_at: Option<Instant> = None;
        let pace = Pace::for_endpoint(&self.config.endpoint);
        let mut hold = Hold::new();
        loop {
            // What waits on disk goes first, as far as the queue has room.
            self.outbox.unspill();
            // A timer only while one is needed: an idle, healthy bus costs no
            // wake-ups (frames spilled on disk are due as the queue empties).
            let healthy_at = open_gap.is_some().then(|| connected_at + HEALTHY_AFTER);
            let unspill_at = self
                .outbox
                .spilling()
                .then(|| Instant::now() + UNSPILL_EVERY);
            let wake_at = [stall_at, healthy_at, unspill_at]
                .into_iter()
                .flatten()
                .min();
            let wanted = wake_at.map(|at| {
                at.saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1))
            });
            if wanted != timeout {
                if let Err(error) = stream.set_read_timeout(wanted) {
                    warn!(%error, "Cannot time the event bus read; reconnecting.");
                    drained.end = ConnectionEnd::Lost(GapReason::ReadError);
                    return drained;
                }
                timeout = wanted;
            }
            let read = match stream.read(&mut scratch) {
                _ if cancel.is_cancelled() => return drained,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    None
                }
                other => Some(other),
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
            // Closed while saltsight was behind: the master dropped it as a
            // slow subscriber (a master that stops closes an idle reader too).
            let lost = |behind_at: Option<Instant>| {
                if behind_at.is_some_and(|t| t.elapsed() <= BEHIND_FOR) {
                    GapReason::Discarded
                } else {
                    GapReason::Disconnected
                }
            };
            let n = match read {
                Ok(0) => {
                    if !buf.is_empty() {
                        warn!(partial_bytes = buf.len(), "The bus closed inside a frame.");
                    }
                    drained.end = ConnectionEnd::Lost(lost(behind_at));
                    return drained;
                }
                Ok(n) if buf.is_empty() => {
                    refill(&mut buf, &scratch[..n]);
                    n
                }
                Ok(n) => {
                    append(&mut buf, &scratch[..n]);
                    n
                }
                Err(error) => {
                    // A reset is the master going away (a restart kills its publisher).
                    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
                    let reason = if matches!(
                        error.kind(),
                        ConnectionReset | ConnectionAborted | BrokenPipe
                    ) {
                        lost(behind_at)
                    } else {
                        warn!(%error, "Reading the event bus failed.");
                        GapReason::ReadError
                    };
                    drained.end = ConnectionEnd::Lost(reason);
                    return drained;
                }
            };
            ReaderStats::add(&self.stats.bytes, n as u64);
            // The clocks are read once per read: every frame it splits shares them.
            let received_at = SystemTime::now();
            let now = Instant::now();
            // Half a buffer at once is a backlog (`pace` reads on at once too).
            if n >= READ_CHUNK / 2 {
                behind_at = Some(now);
            }
            // The pipeline's clock is tokio's (paused in tests).
            let received_mono = Some(tokio::time::Instant::now());
            let since_last_read = last_read_at.map(|t| now.duration_since(t));
            last_read_at = Some(now);
            if self.config.delivery == Delivery::RawChunks {
                let chunk = Frame {
                    bytes: buf.split().freeze(),
                    received_at: Some(received_at),
                    received_mono,
                };
                if !self.outbox.offer_chunk(chunk) {
                    // A lost chunk breaks the byte stream mid-frame: start a new one.
                    warn!("Capture fell behind the bus; reconnecting to restart the stream.");
                    drained.end = ConnectionEnd::Lost(GapReason::QueueFull);
                    return drained;
                }
                self.healthy(open_gap, &mut drained);
                continue;
            }
            let detected_before = splitter.framing();
            let mut frames = 0;
            loop {
                match splitter.next(&mut buf) {
                    Ok(Some(Split::Frame(bytes))) => {
                        frames += 1;
                        ReaderStats::add(&self.stats.frames, 1);
                        self.healthy(open_gap, &mut drained);
                        drained.last_frame_at = Some(received_at);
                        self.outbox.offer_frame(Frame {
                            bytes,
                            received_at: Some(received_at),
                            received_mono,
                        });
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
                        // The frames split before the desync are good.
                        self.outbox.send_batch();
                        drained.end = ConnectionEnd::Lost(GapReason::Desync);
                        return drained;
                    }
                }
            }
            // Everything this read split: one message, one wake-up downstream.
            self.outbox.send_batch();
            stall_at = splitter
                .mid_frame(&buf)
                .then(|| now + self.config.stall_timeout);
            if detected_before.is_none() {
                if let Some(framing) = splitter.framing() {
                    info!(framing = framing.as_str(), "Detected the bus framing.");
                }
            }
            // A burst the consumer has not taken: wait for it (bounded), then
            // read the backlog at once.
            if hold.after_read(&self.stats) {
                behind_at = Some(Instant::now());
                continue;
            }
            // Under sustained traffic, what arrives meanwhile is the next read's batch.
            let pause = pace.after(n, frames, since_last_read);
            if !pause.is_zero() {
                std::thread::sleep(pause);
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

/// Puts a read into `buf`, which holds no part of a frame. The frames split off
/// a read keep its buffer alive until the consumer is done with them. Once it
/// is (the usual case: a read's frames are handled well within the pace), the
/// same buffer takes the next read: no allocation per read (each one cost the
/// reader's thread a consolidation of glibc's small free chunks, 5% of the
/// agent's CPU on failing returns). Otherwise a new one of less than twice what
/// was read, so queued frames hold about what they are; only the one buffer
/// being reused can be larger, and at most [`READ_CHUNK`]: one that grew to
/// hold a large frame (read over several reads) is let go, not kept.
fn refill(buf: &mut BytesMut, read: &[u8]) {
    debug_assert!(buf.is_empty());
    if !buf.try_reclaim(read.len()) || buf.capacity() > READ_CHUNK {
        *buf = BytesMut::with_capacity(read.len().next_power_of_two());
    }
    buf.extend_from_slice(read);
}

/// Puts a read after the part of a frame `buf` holds. Where it does not fit,
/// a buffer of its own is made for the two, of what they need, or twice the
/// part when the part is the larger (a frame read over many reads is copied
/// a few times, not once a read). `BytesMut` would double its own, and keep
/// the frames already split from it in front: with the highstate mix's 75 KB
/// returns, read 256 KiB at a time and most reads ending inside one, the
/// buffer doubled to 512 KiB, and each read's frames held all of it while
/// queued (heaptrack over a live round: 4.56 MB in these buffers at its peak).
fn append(buf: &mut BytesMut, read: &[u8]) {
    if !buf.try_reclaim(read.len()) {
        let capacity = (buf.len() + read.len()).max(2 * buf.len());
        let mut fresh = BytesMut::with_capacity(capacity);
        fresh.extend_from_slice(buf);
        *buf = fresh;
    }
    buf.extend_from_slice(read);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_after_part_of_a_frame_takes_what_the_two_need() {
        // A read of frames and a part; the frames handled and let go.
        let mut buf = BytesMut::new();
        refill(&mut buf, &[1; 4000]);
        drop(buf.split_to(3000));
        append(&mut buf, &[2; 4000]);
        assert_eq!(
            buf.capacity(),
            5000,
            "the part and the read, not twice the buffer"
        );
        assert_eq!(&buf[..1000], &[1; 1000][..]);
        assert_eq!(&buf[1000..], &[2; 4000][..]);

        // The same with the frames still queued: they keep their buffer.
        let queued = buf.split_to(4500).freeze();
        append(&mut buf, &[3; 4000]);
        assert_eq!(buf.capacity(), 4500);
        assert_eq!(&queued[..1000], &[1; 1000][..]);
        assert_eq!(&queued[1000..], &[2; 3500][..], "queued frames untouched");
        drop(queued);

        // Handled: the part moves to its buffer's front, no new one.
        let storage = buf.as_ptr();
        drop(buf.split_to(4000));
        append(&mut buf, &[4; 4000]);
        assert_eq!(buf.as_ptr(), storage, "the same buffer, reused");
        assert_eq!(&buf[..500], &[3; 500][..]);
        assert_eq!(&buf[500..], &[4; 4000][..]);

        // One frame over many reads: the buffer at least doubles each time.
        let mut big = BytesMut::new();
        let mut grown = 0;
        for _ in 0..64 {
            let before = big.capacity();
            append(&mut big, &[5; 1000]);
            if big.capacity() != before {
                grown += 1;
            }
        }
        assert_eq!(big.len(), 64_000);
        assert!(grown <= 8, "grew {grown} times for 64 reads");
    }

    #[test]
    fn a_read_reuses_the_buffer_its_handled_frames_gave_back() {
        let mut buf = BytesMut::new();
        refill(&mut buf, &[1; 3000]);
        let storage = buf.as_ptr();
        assert_eq!(buf.capacity(), 4096, "less than twice the read");
        let frames = [buf.split_to(1000).freeze(), buf.split_to(2000).freeze()];
        drop(frames);
        refill(&mut buf, &[2; 4000]);
        assert_eq!(buf.as_ptr(), storage, "the handled frames' buffer, again");
        assert_eq!(&buf[..], &[2; 4000][..]);

        // A frame still queued keeps its buffer: the next read gets its own.
        let held = buf.split_to(4000).freeze();
        refill(&mut buf, &[3; 100]);
        assert_ne!(buf.as_ptr(), storage);
        assert_eq!(buf.capacity(), 128);
        assert_eq!(&held[..], &[2; 4000][..], "the held frame is untouched");
        assert_eq!(&buf[..], &[3; 100][..]);

        // A read larger than the buffer it could reuse: a new one.
        let small = buf.as_ptr();
        buf.clear();
        refill(&mut buf, &[4; 5000]);
        assert_ne!(buf.as_ptr(), small);
        assert_eq!(&buf[..], &[4; 5000][..]);

        // A buffer grown past READ_CHUNK for a large frame is not kept.
        buf.clear();
        buf.reserve(4 * READ_CHUNK);
        let large = buf.as_ptr();
        refill(&mut buf, &[5; 100]);
        assert_ne!(buf.as_ptr(), large);
        assert_eq!(buf.capacity(), 128);
    }
}
