//! The consumer loop: one source, one bounded queue, one task that decodes each
//! frame and hands the event to a [`Handler`] synchronously (so the event may
//! borrow from its frame), and drains in order on shutdown.
//!
//! The reader never waits on the queue (see `bus::reader`; it holds, bounded, past
//! a burst's worth of queued bytes); a recording does, since
//! a file can wait. What is queued always comes before the wall clock: a handler's
//! wake-up (`tick`) is taken only when the queue is empty.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::source::{RecordingTotals, Source, read_recording};
use crate::bus::{BusGap, BusMessage, BusReader, Endpoint, Frame, ReaderStats};
use crate::event::{self, DecodeError, DecodeReason, Event};
use crate::metrics::catalog::{EventMetrics, Step};
use crate::ratelimit::LogLimiter;
use crate::service::Watchdog;
use tokio::time::Instant;

/// What the pipeline does with what comes off the source. Called from one task.
pub trait Handler {
    fn event(&mut self, event: &Event<'_>, frame: &Frame) -> anyhow::Result<()>;
    fn gap(&mut self, gap: &BusGap) -> anyhow::Result<()>;
    fn connected(&mut self, _endpoint: &Endpoint) -> anyhow::Result<()> {
        Ok(())
    }
    /// Events may be being missed from `at` on (the connection was lost, or the
    /// reader started dropping frames); a [`BusGap`] with the whole stretch follows.
    fn gap_started(&mut self, _at: SystemTime) -> anyhow::Result<()> {
        Ok(())
    }
    /// A frame was read but could not be read through (undecodable, or skipped
    /// over the size cap); `tag` when it was readable: what it was, and so what
    /// is lost. Received at `at` (the epoch for a raw dump).
    fn unreadable(&mut self, _tag: Option<&str>, _at: SystemTime) -> anyhow::Result<()> {
        Ok(())
    }
    /// Raw chunks (capture mode only).
    fn chunk(&mut self, _chunk: &Frame) -> anyhow::Result<()> {
        Ok(())
    }
    /// The frames of one message (one read of the live bus, or one frame of a
    /// recording) have all been handed to [`Handler::event`], received at
    /// `received` (live): what is done once per read rather than per event
    /// (writing the outputs, the timers' work) is done now.
    fn batch_end(&mut self, _received: Option<Instant>) -> anyhow::Result<()> {
        Ok(())
    }
    /// When the handler next needs to be woken with nothing queued (live
    /// sources only), on the monotonic clock.
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }
    /// The monotonic clock reached `now` (live sources only).
    fn tick(&mut self, _now: Instant) -> anyhow::Result<()> {
        Ok(())
    }
    /// The source ended (`recording`: the end of a recording; else a live stop); flush.
    fn finish(&mut self, _recording: bool) -> anyhow::Result<()> {
        Ok(())
    }
}

/// What went through, for the exit summary and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub frames: u64,
    pub events_by_class: BTreeMap<&'static str, u64>,
    pub decode_errors: BTreeMap<DecodeReason, u64>,
    pub malformed_fields: u64,
    pub gaps: u64,
    /// Frames read but skipped (over `bus.max_frame_bytes`).
    pub frames_lost: u64,
    /// The recording ended in damage (what came before was replayed).
    pub recording_damaged: bool,
    pub recording_skipped_frames: u64,
    pub recording_desyncs: u64,
    pub recording_trailing_bytes: u64,
    pub recording_discarded_bytes: u64,
}

impl Summary {
    pub fn events(&self) -> u64 {
        self.events_by_class.values().sum()
    }
}

/// One consumer loop: a source, the bounded queue between it and the handler,
/// and what the loop reports to (event metrics, systemd's watchdog).
pub struct Consumer {
    source: Source,
    queue: usize,
    cancel: CancellationToken,
    reader_stats: Arc<ReaderStats>,
    metrics: EventMetrics,
    watchdog: Option<Watchdog>,
}

impl Consumer {
    /// Reads `source` through a queue of `queue` frames until it ends
    /// (a recording) or `cancel` fires (live).
    pub fn new(source: Source, queue: usize, cancel: CancellationToken) -> Self {
        Self {
            source,
            queue,
            cancel,
            reader_stats: Arc::default(),
            metrics: EventMetrics::default(),
            watchdog: None,
        }
    }

    /// Shares the reader's counters (metrics, systemd status).
    pub fn reader_stats(mut self, stats: Arc<ReaderStats>) -> Self {
        self.reader_stats = stats;
        self
    }

    /// Counts each event into registered metrics.
    pub fn metrics(mut self, metrics: EventMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Feeds systemd's watchdog from the loop.
    pub fn watchdog(mut self, watchdog: Option<Watchdog>) -> Self {
        self.watchdog = watchdog;
        self
    }

    /// Runs the source into `handler`; the handler comes back for its results.
    pub async fn run<H: Handler>(self, mut handler: H) -> anyhow::Result<(Summary, H)> {
        let Consumer {
            source,
            queue,
            cancel,
            reader_stats,
            metrics,
            mut watchdog,
        } = self;
        let (tx, mut rx) = mpsc::channel::<BusMessage>(queue.max(1));
        let live = matches!(source, Source::Live(_));
        let producer = match source {
            Source::Live(config) => {
                let reader = BusReader::new(config, tx, reader_stats.clone());
                tokio::spawn(async move {
                    reader.run(cancel).await;
                    Ok(RecordingTotals::default())
                })
            }
            Source::Recording {
                path,
                max_frame_bytes,
                progress,
            } => tokio::task::spawn_blocking(move || {
                read_recording(&path, max_frame_bytes, progress, &tx, &cancel)
            }),
        };

        let mut summary = Summary::default();
        let mut frames = Frames {
            metrics,
            decode_log: LogLimiter::new(Duration::from_secs(10)),
            slow_log: LogLimiter::new(Duration::from_secs(10)),
        };
        let mut dropped_seen = 0u64;
        // One timer for the loop, moved only when the next wake-up moves (not made
        // per message), on the monotonic clock.
        let mut timer = std::pin::pin!(tokio::time::sleep_until(Instant::now()));
        let mut armed: Option<Instant> = None;
        loop {
            let now = Instant::now();
            // Fed here, between events, so a handler that hangs starves systemd's
            // watchdog (busy or idle, the loop passes here often enough).
            let dog_at = watchdog.as_mut().map(|dog| dog.feed(now));
            let wake_at = if live { handler.next_wakeup() } else { None };
            let due = earliest(wake_at, dog_at);
            if due != armed {
                if let Some(at) = due {
                    timer.as_mut().reset(at);
                }
                armed = due;
            }
            let message = tokio::select! {
                // What is queued comes first: it is older than the clock.
                biased;
                m = rx.recv() => m,
                () = &mut timer, if armed.is_some() => {
                    armed = None;
                    let now = Instant::now();
                    if wake_at.is_some_and(|at| at <= now) {
                        handler.tick(now)?;
                        frames.step(Step::Tick, now.elapsed(), None);
                    }
                    continue;
                }
            };
            let Some(message) = message else { break };
            // Frames dropped by the reader: a queue_full gap has begun, though its
            // BusGap is still held behind the backlog.
            let dropped = reader_stats
                .dropped_queue_full
                .load(std::sync::atomic::Ordering::Relaxed);
            if dropped != dropped_seen {
                dropped_seen = dropped;
                handler.gap_started(SystemTime::now())?;
            }
            match message {
                BusMessage::Frame(frame) => {
                    if live {
                        reader_stats.consumed(1, frame.bytes.len());
                    }
                    let began = Instant::now();
                    frames.frame(&frame, &mut summary, &mut handler)?;
                    let read = Instant::now();
                    frames.step(Step::Event, read - began, Some(&frame));
                    handler.batch_end(frame.received_mono)?;
                    frames.step(Step::ReadEnd, read.elapsed(), None);
                }
                BusMessage::Frames(batch) => {
                    if live {
                        let bytes = batch.iter().map(|f| f.bytes.len()).sum();
                        reader_stats.consumed(batch.len(), bytes);
                    }
                    // One clock read per event: each step ends where the next begins.
                    let mut began = Instant::now();
                    for frame in batch.iter() {
                        frames.frame(frame, &mut summary, &mut handler)?;
                        let ended = Instant::now();
                        frames.step(Step::Event, ended - began, Some(frame));
                        began = ended;
                    }
                    handler.batch_end(batch.last().and_then(|f| f.received_mono))?;
                    frames.step(Step::ReadEnd, began.elapsed(), None);
                }
                BusMessage::Chunk(chunk) => {
                    if live {
                        reader_stats.consumed(1, chunk.bytes.len());
                    }
                    handler.chunk(&chunk)?;
                }
                BusMessage::Gap(gap) => {
                    summary.gaps += 1;
                    handler.gap(&gap)?;
                }
                BusMessage::Connected { endpoint, .. } => handler.connected(&endpoint)?,
                BusMessage::Disconnected { at, .. } => handler.gap_started(at)?,
                BusMessage::Lost(lost) => {
                    summary.frames_lost += 1;
                    handler.unreadable(event::tag_of_head(&lost.head), lost.received_at)?;
                }
            }
        }
        handler.finish(!live)?;
        let totals = producer.await.context("the source task panicked")??;
        summary.recording_damaged = totals.damaged;
        summary.recording_skipped_frames = totals.skipped_frames;
        summary.recording_desyncs = totals.desyncs;
        summary.recording_trailing_bytes = totals.trailing_bytes;
        summary.recording_discarded_bytes = totals.discarded_bytes;
        Ok((summary, handler))
    }
}

/// What the loop does with each frame: decode, count, hand on.
struct Frames {
    metrics: EventMetrics,
    decode_log: LogLimiter,
    slow_log: LogLimiter,
}

/// A step that holds the pipeline this long is logged (rate-limited).
const SLOW_STEP: Duration = Duration::from_millis(100);

impl Frames {
    /// One step of the pipeline took `took`: measured, and said when slow
    /// (with the event's tag, for an event).
    fn step(&mut self, step: Step, took: Duration, frame: Option<&Frame>) {
        self.metrics.step(step, took);
        if took >= SLOW_STEP {
            if let Some(suppressed) = self.slow_log.admit(step.as_str()) {
                let tag = frame.and_then(|f| event::tag_of_head(&f.bytes));
                info!(
                    step = step.as_str(),
                    took_ms = took.as_millis() as u64,
                    tag,
                    suppressed,
                    "A step held the pipeline (the reader reads on meanwhile)."
                );
            }
        }
    }

    fn frame<H: Handler>(
        &mut self,
        frame: &Frame,
        summary: &mut Summary,
        handler: &mut H,
    ) -> anyhow::Result<()> {
        summary.frames += 1;
        match event::decode_shared(&frame.bytes) {
            Ok(event) => {
                *summary
                    .events_by_class
                    .entry(event.class.as_str())
                    .or_default() += 1;
                let lag = super::clock::bus_lag_micros(&event, frame);
                self.metrics
                    .event(event.class, event.malformed_field.is_some(), lag);
                if let Some(field) = event.malformed_field {
                    summary.malformed_fields += 1;
                    if let Some(suppressed) = self.decode_log.admit("malformed_field") {
                        warn!(
                            tag = event.tag,
                            field, suppressed, "Event field of an unexpected type; left empty."
                        );
                    }
                }
                debug!(tag = event.tag, class = event.class.as_str(), "Event.");
                handler.event(&event, frame)
            }
            Err(error) => {
                self.metrics.decode_error(error.reason());
                note_decode_error(summary, &mut self.decode_log, &error);
                // Read, but not readable: the handler says what that loses.
                let at = frame.received_at.unwrap_or(UNIX_EPOCH);
                handler.unreadable(error.tag(), at)
            }
        }
    }
}

/// The earlier of two optional instants.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn note_decode_error(summary: &mut Summary, log: &mut LogLimiter, error: &DecodeError) {
    *summary.decode_errors.entry(error.reason()).or_default() += 1;
    if let Some(suppressed) = log.admit(error.reason().as_str()) {
        warn!(%error, reason = error.reason().as_str(), tag = error.tag(), suppressed, "Skipped an undecodable frame.");
    }
}
