//! The reader's side of the queue to the pipeline: it never waits. The frames
//! one read splits go as one message (one wake-up of the consumer per read, not
//! per frame); frames that do not fit go to the spill on disk (`spill.rs`), and
//! every later frame behind them, until the queue has taken them all, in order;
//! only what the spill cannot take is dropped, counted, and becomes a
//! `queue_full` gap. Control messages (connections, gaps, lost frames) are
//! held, in order, until there is room, with gaps merged; while frames are
//! spilled, a control waits for the frames spilled before it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::time::Instant;

use super::message::{BatchSpares, BusGap, BusMessage, Frame, FrameBatch, GapReason, ReaderStats};
use super::spill::Spill;
use crate::ratelimit::LogLimiter;

/// The sending side of the queue; never waits.
///
/// The queue is bounded in frames and in bytes, counted in [`ReaderStats`] (the
/// consumer subtracts what it takes): a message carries every frame of one read.
/// Control messages are held, in order, until there is room; the frames of the
/// read in hand go first, so nothing is reordered. A `Connected` must precede
/// the new connection's data, so data never passes one. A held gap may be passed
/// by data: it is sent when two slots are free (one left for data), or after
/// waiting [`GAP_MAX_HOLD`] even into the last slot, so a queue that stays full
/// delivers frames, with at most one gap a second, not a flood of gaps. A gap's
/// meaning is its time span, not its place.
pub(super) struct Outbox {
    pub(super) tx: mpsc::Sender<BusMessage>,
    held: VecDeque<BusMessage>,
    held_since: Option<Instant>,
    stats: Arc<ReaderStats>,
    max_bytes: u64,
    max_frames: u64,
    /// The frames of the read in hand, sent together by [`Outbox::send_batch`].
    batch: Vec<Frame>,
    batch_bytes: u64,
    /// Where sent batches' vectors come back to, emptied.
    spares: Arc<BatchSpares>,
    /// Frames past the queue's bound, on disk (none when off).
    spill: Option<Spill>,
    /// Control messages behind spilled frames: each goes once the frames
    /// spilled before it (its count of `spilled_in`) have gone.
    after_spilled: VecDeque<(u64, BusMessage)>,
    /// Frames put in the spill and taken from it (or lost from it), in all.
    spilled_in: u64,
    spilled_out: u64,
    spill_log: LogLimiter,
}

/// Frames taken from the spill into one message at most.
const UNSPILL_BATCH: usize = 1024;

/// The longest a gap waits for a slot that leaves room for data.
const GAP_MAX_HOLD: Duration = Duration::from_secs(1);

impl Outbox {
    pub(super) fn new(
        tx: mpsc::Sender<BusMessage>,
        stats: Arc<ReaderStats>,
        max_bytes: u64,
        max_frames: u64,
    ) -> Self {
        Self {
            tx,
            held: VecDeque::new(),
            held_since: None,
            stats,
            max_bytes,
            max_frames: max_frames.max(1),
            batch: Vec::new(),
            batch_bytes: 0,
            spares: Arc::default(),
            spill: None,
            after_spilled: VecDeque::new(),
            spilled_in: 0,
            spilled_out: 0,
            spill_log: LogLimiter::new(Duration::from_secs(10)),
        }
    }

    /// Frames past the queue's bound go to `spill` rather than being dropped.
    pub(super) fn with_spill(mut self, spill: Spill) -> Self {
        self.spill = Some(spill);
        self
    }

    /// Frames wait in the spill: every new one goes behind them.
    pub(super) fn spilling(&self) -> bool {
        self.spill.as_ref().is_some_and(|s| !s.is_empty())
    }

    /// Holds a control message behind those already held (a gap right behind a
    /// held gap merges into it), after the frames of the read in hand.
    pub(super) fn control(&mut self, msg: BusMessage) {
        self.send_batch();
        if self.spilling() {
            self.after_spilled(msg);
        } else {
            self.hold(msg);
        }
    }

    /// Holds `msg` behind the frames spilled so far (a gap right behind a gap
    /// at the same place merges into it).
    fn after_spilled(&mut self, msg: BusMessage) {
        let at = self.spilled_in;
        match (self.after_spilled.back_mut(), msg) {
            (Some((place, BusMessage::Gap(held))), BusMessage::Gap(gap)) if *place == at => {
                merge_gap(held, gap)
            }
            (_, msg) => self.after_spilled.push_back((at, msg)),
        }
    }

    /// Holds `msg` behind what is held, a gap merged into a held gap before it.
    fn hold(&mut self, msg: BusMessage) {
        self.held_since.get_or_insert_with(Instant::now);
        match (self.held.back_mut(), msg) {
            (Some(BusMessage::Gap(held)), BusMessage::Gap(gap)) => merge_gap(held, gap),
            (_, msg) => self.held.push_back(msg),
        }
    }

    /// Sends what is held while there is room; returns whether data may go next
    /// (nothing but gaps is left held).
    pub(super) fn flush_held(&mut self) -> bool {
        if self.held.is_empty() {
            return true;
        }
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

    /// Whether `frames` more frames of `bytes` fit in the queue, counting the
    /// read in hand. One frame is always let into an empty queue, however
    /// large, so a frame over the byte budget cannot stall the stream for ever.
    fn fits(&self, frames: u64, bytes: u64) -> bool {
        let queued_frames =
            self.stats.queued_frames.load(Ordering::Relaxed) + self.batch.len() as u64;
        let queued_bytes = self.stats.queued_bytes.load(Ordering::Relaxed) + self.batch_bytes;
        queued_frames == 0
            || (queued_frames + frames <= self.max_frames && queued_bytes + bytes <= self.max_bytes)
    }

    /// Adds a frame to the read in hand without waiting, if the queue has room
    /// for it; one that does not fit is dropped, counted, and widens a
    /// `queue_full` gap.
    pub(super) fn offer_frame(&mut self, frame: Frame) {
        let bytes = frame.bytes.len() as u64;
        if !self.spilling() && self.fits(1, bytes) {
            self.batch.push(frame);
            self.batch_bytes += bytes;
        } else if !self.tx.is_closed() {
            // What fitted goes first: the spill or the gap follows the frames
            // read before it.
            self.send_batch();
            self.spill_or_drop(frame);
        }
    }

    /// Puts `frame` behind the spilled ones; where there is no spill, or it
    /// refuses, drops it (counted, a gap in its place).
    fn spill_or_drop(&mut self, frame: Frame) {
        let Some(spill) = &mut self.spill else {
            self.dropped(1);
            return;
        };
        let before = spill.held_frames();
        match spill.push(&frame) {
            Ok(()) => {
                self.spilled_in += 1;
                ReaderStats::add(&self.stats.spilled_frames, 1);
            }
            Err(error) => {
                // A write that failed lost what was pending with it.
                let lost = before.saturating_sub(spill.held_frames());
                self.spilled_out += lost;
                if lost > 0 {
                    ReaderStats::add(&self.stats.spill_errors, 1);
                }
                if let Some(suppressed) = self.spill_log.admit("refused") {
                    tracing::warn!(%error, lost_with_it = lost, suppressed, "The bus spill refused a frame: it is dropped and counted, a queue_full gap.");
                }
                self.dropped(1 + lost);
            }
        }
        self.note_spill_bytes();
    }

    /// The bytes the spill holds now, for the gauge.
    fn note_spill_bytes(&self) {
        let held = self.spill.as_ref().map_or(0, Spill::held_bytes);
        self.stats.spill_bytes.store(held, Ordering::Relaxed);
    }

    /// Hands the queue what it has room for from the spill, in order, with
    /// the controls held behind the spilled frames in their places.
    pub(super) fn unspill(&mut self) {
        if self.spill.is_none() || (!self.spilling() && self.after_spilled.is_empty()) {
            // What waited behind the spill goes as room comes.
            if self.spill.is_some() && !self.held.is_empty() {
                self.flush_held();
            }
            return;
        }
        loop {
            while self
                .after_spilled
                .front()
                .is_some_and(|(place, _)| *place <= self.spilled_out)
            {
                self.send_batch_now();
                if let Some((_, msg)) = self.after_spilled.pop_front() {
                    self.hold(msg);
                }
            }
            if !self.flush_held() {
                break;
            }
            let Some(spill) = &mut self.spill else {
                break;
            };
            let bytes = match spill.front() {
                Ok(None) => break,
                Ok(Some(frame)) => frame.bytes.len() as u64,
                Err((error, lost)) => {
                    self.spilled_out += lost;
                    ReaderStats::add(&self.stats.spill_errors, 1);
                    tracing::warn!(%error, lost, "Part of the bus spill could not be read back: its frames are lost, a queue_full gap.");
                    self.send_batch_now();
                    self.dropped(lost);
                    continue;
                }
            };
            if self.batch.len() >= UNSPILL_BATCH || !self.fits(1, bytes) {
                self.send_batch_now();
                if !self.fits(1, bytes) {
                    break;
                }
            }
            let Some(frame) = self.spill.as_mut().and_then(Spill::advance) else {
                break;
            };
            self.spilled_out += 1;
            self.batch.push(frame);
            self.batch_bytes += bytes;
        }
        self.send_batch_now();
        if !self.spilling() {
            // Everything spilled has gone: what waited behind it is due.
            while let Some((_, msg)) = self.after_spilled.pop_front() {
                self.hold(msg);
            }
            self.flush_held();
        }
        self.note_spill_bytes();
    }

    /// Sends the read in hand as one message. Returns false when it could not
    /// go (its frames dropped and counted, or the queue is closed).
    pub(super) fn send_batch(&mut self) -> bool {
        if self.spilling() {
            // Behind what is spilled: the read in hand joins it.
            let frames = std::mem::take(&mut self.batch);
            self.batch_bytes = 0;
            for frame in frames {
                self.spill_or_drop(frame);
            }
            return false;
        }
        self.send_batch_now()
    }

    /// Sends the batch in hand as one message, spilled frames or not.
    fn send_batch_now(&mut self) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        if self.spill.is_some() && !self.flush_held() && !self.tx.is_closed() {
            // A control waits for room, and data may not pass it: the read in
            // hand waits behind it, on disk.
            let frames = std::mem::take(&mut self.batch);
            self.batch_bytes = 0;
            for frame in frames {
                self.spill_or_drop(frame);
            }
            return false;
        }
        let frames = std::mem::replace(&mut self.batch, self.spares.take());
        let bytes = std::mem::take(&mut self.batch_bytes);
        let n = frames.len() as u64;
        let batch = FrameBatch::returning(frames, self.spares.clone());
        self.send_counted(BusMessage::Frames(batch), n, bytes)
    }

    /// Offers a capture chunk without waiting. Returns whether it was queued; one
    /// that does not fit is dropped, counted, and widens a `queue_full` gap.
    pub(super) fn offer_chunk(&mut self, chunk: Frame) -> bool {
        let bytes = chunk.bytes.len() as u64;
        if !self.fits(1, bytes) {
            if !self.tx.is_closed() {
                self.dropped(1);
            }
            return false;
        }
        self.send_counted(BusMessage::Chunk(chunk), 1, bytes)
    }

    /// Sends `msg`, which holds `frames` frames of `bytes`, counted as queued
    /// before the send (the consumer may take them at once).
    fn send_counted(&mut self, msg: BusMessage, frames: u64, bytes: u64) -> bool {
        if self.flush_held() {
            ReaderStats::add(&self.stats.queued_frames, frames);
            ReaderStats::add(&self.stats.queued_bytes, bytes);
            match self.tx.try_send(msg) {
                Ok(()) => return true,
                Err(error) => {
                    self.stats.consumed(frames as usize, bytes as usize);
                    if let TrySendError::Closed(_) = error {
                        return false;
                    }
                }
            }
        } else if self.tx.is_closed() {
            return false;
        }
        self.dropped(frames);
        false
    }

    /// `frames` frames could not be queued: counted, and a `queue_full` gap.
    fn dropped(&mut self, frames: u64) {
        ReaderStats::add(&self.stats.dropped_queue_full, frames);
        let now = SystemTime::now();
        // Not `control`: the frames of the read in hand are being sent.
        let hold = if self.spilling() {
            Self::after_spilled
        } else {
            Self::hold
        };
        hold(
            self,
            BusMessage::Gap(BusGap {
                started_at: now,
                ended_at: now,
                reason: GapReason::QueueFull,
                dropped_frames: frames,
            }),
        );
    }

    /// At shutdown: the read in hand, then what is held, waiting (bounded) for room.
    pub(super) async fn flush(&mut self, grace: Duration) {
        let ends = Instant::now() + grace;
        self.send_batch();
        // What is spilled, as the consumer makes room, within the grace.
        while self.spilling() || !self.after_spilled.is_empty() {
            self.unspill();
            if Instant::now() >= ends || self.tx.is_closed() {
                let lost = self.spill.as_ref().map_or(0, Spill::held_frames);
                if let Some(spill) = &mut self.spill {
                    spill.clear();
                }
                self.spilled_out += lost;
                self.dropped(lost);
                while let Some((_, msg)) = self.after_spilled.pop_front() {
                    self.hold(msg);
                }
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
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
mod tests;
