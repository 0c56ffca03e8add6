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
        self.stats.spill_bytes.store(
            self.spill.as_ref().map_or(0, Spill::held_bytes),
            Ordering::Relaxed,
        );
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
        self.stats.spill_bytes.store(
            self.spill.as_ref().map_or(0, Spill::held_bytes),
            Ordering::Relaxed,
        );
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
mod tests {
    use super::*;
    use crate::bus::{Endpoint, Frame};
    use bytes::Bytes;

    fn frame() -> Frame {
        Frame {
            bytes: Bytes::from_static(b"x"),
            received_at: None,
            received_mono: None,
        }
    }

    /// A read that split one frame; whether it was queued.
    fn offer(outbox: &mut Outbox) -> bool {
        let dropped = outbox.stats.dropped_queue_full.load(Ordering::Relaxed);
        outbox.offer_frame(frame());
        outbox.send_batch() && outbox.stats.dropped_queue_full.load(Ordering::Relaxed) == dropped
    }

    /// The consumer takes one message; its frames are no longer queued.
    fn take(rx: &mut mpsc::Receiver<BusMessage>, stats: &ReaderStats) -> Option<BusMessage> {
        let msg = rx.try_recv().ok()?;
        if let BusMessage::Frames(frames) = &msg {
            stats.consumed(frames.len(), frames.iter().map(|f| f.bytes.len()).sum());
        }
        Some(msg)
    }

    fn is_frames(msg: Option<BusMessage>, n: usize) -> bool {
        matches!(msg, Some(BusMessage::Frames(f)) if f.len() == n)
    }

    /// A queue of `capacity` frames (and as many messages).
    fn outbox(capacity: usize) -> (Outbox, mpsc::Receiver<BusMessage>, Arc<ReaderStats>) {
        let (tx, rx) = mpsc::channel(capacity);
        let stats = Arc::new(ReaderStats::default());
        (
            Outbox::new(tx, stats.clone(), u64::MAX, capacity as u64),
            rx,
            stats,
        )
    }

    fn numbered(n: usize) -> Frame {
        Frame {
            bytes: Bytes::from(n.to_string()),
            received_at: None,
            received_mono: None,
        }
    }

    /// Everything the consumer can take now, as frame numbers and control names.
    fn take_all(rx: &mut mpsc::Receiver<BusMessage>, stats: &ReaderStats) -> Vec<String> {
        let mut seen = Vec::new();
        while let Some(msg) = take(rx, stats) {
            match msg {
                BusMessage::Frames(frames) => seen.extend(
                    frames
                        .iter()
                        .map(|f| String::from_utf8_lossy(&f.bytes).into_owned()),
                ),
                BusMessage::Disconnected { .. } => seen.push("disconnected".into()),
                BusMessage::Connected { .. } => seen.push("connected".into()),
                BusMessage::Gap(gap) => seen.push(format!("gap {}", gap.dropped_frames)),
                other => seen.push(format!("{other:?}")),
            }
        }
        seen
    }

    /// Past the queue's bound frames wait on disk, and the controls read
    /// between them keep their places: the consumer gets every frame, in
    /// order, and nothing is dropped.
    #[tokio::test(start_paused = true)]
    async fn a_full_queue_spills_and_delivers_every_frame_in_order_with_its_controls() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (outbox, mut rx, stats) = outbox(4);
        let mut outbox = outbox.with_spill(Spill::new(dir.path(), 1 << 30));
        let mut expected = Vec::new();
        for n in 0..10 {
            outbox.offer_frame(numbered(n));
            outbox.send_batch();
            expected.push(n.to_string());
        }
        outbox.control(BusMessage::Disconnected {
            at: SystemTime::now(),
            reason: GapReason::Disconnected,
        });
        expected.push("disconnected".into());
        outbox.control(BusMessage::Connected {
            endpoint: Endpoint::Tcp(([127, 0, 0, 1], 1).into()),
            at: SystemTime::now(),
        });
        expected.push("connected".into());
        for n in 10..3000 {
            outbox.offer_frame(numbered(n));
            if n % 7 == 0 {
                outbox.send_batch();
            }
            expected.push(n.to_string());
        }
        outbox.send_batch();
        assert!(outbox.spilling());
        let mut seen = Vec::new();
        for _ in 0..10_000 {
            outbox.unspill();
            let taken = take_all(&mut rx, &stats);
            if taken.is_empty() && !outbox.spilling() {
                break;
            }
            seen.extend(taken);
        }
        assert_eq!(seen, expected);
        assert_eq!(stats.dropped_queue_full.load(Ordering::Relaxed), 0);
        assert_eq!(stats.spilled_frames.load(Ordering::Relaxed), 2996);
        assert_eq!(stats.spill_bytes.load(Ordering::Relaxed), 0);
    }

    /// A spill that is full drops the newest, counted: the gap comes after the
    /// frames it kept.
    #[tokio::test(start_paused = true)]
    async fn past_the_spill_the_newest_are_dropped_and_one_gap_follows_what_was_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (outbox, mut rx, stats) = outbox(2);
        // Room for 3 frames of 1 byte on disk (24 bytes of header each).
        let mut outbox = outbox.with_spill(Spill::new(dir.path(), 3 * 25));
        for n in 0..8 {
            outbox.offer_frame(numbered(n));
            outbox.send_batch();
        }
        assert_eq!(stats.dropped_queue_full.load(Ordering::Relaxed), 3);
        let mut seen = Vec::new();
        for _ in 0..100 {
            outbox.unspill();
            seen.extend(take_all(&mut rx, &stats));
        }
        assert_eq!(seen, ["0", "1", "2", "3", "4", "gap 3"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_drops_counts_and_delivers_one_gap_when_there_is_room() {
        let (mut outbox, mut rx, stats) = outbox(2);
        for _ in 0..5 {
            offer(&mut outbox);
        }
        assert_eq!(stats.dropped_queue_full.load(Ordering::Relaxed), 3);
        assert!(is_frames(take(&mut rx, &stats), 1));
        assert!(is_frames(take(&mut rx, &stats), 1));
        assert!(offer(&mut outbox));
        match take(&mut rx, &stats) {
            Some(BusMessage::Gap(gap)) => {
                assert_eq!(gap.reason, GapReason::QueueFull);
                assert_eq!(gap.dropped_frames, 3);
            }
            other => panic!("expected the gap first, got {other:?}"),
        }
        assert!(is_frames(take(&mut rx, &stats), 1));
        assert!(take(&mut rx, &stats).is_none());
    }

    /// The frames of one read go as one message, as far as the queue has room
    /// for them in frames; the rest are dropped and become one gap.
    #[tokio::test(start_paused = true)]
    async fn a_read_goes_as_one_message_within_the_frame_bound() {
        let (mut outbox, mut rx, stats) = outbox(3);
        for _ in 0..5 {
            outbox.offer_frame(frame());
        }
        assert!(outbox.send_batch());
        assert!(is_frames(take(&mut rx, &stats), 3));
        assert_eq!(stats.dropped_queue_full.load(Ordering::Relaxed), 2);
        assert_eq!(stats.queued_frames.load(Ordering::Relaxed), 0);
        assert!(offer(&mut outbox));
        match take(&mut rx, &stats) {
            Some(BusMessage::Gap(gap)) => assert_eq!(gap.dropped_frames, 2),
            other => panic!("expected the gap, got {other:?}"),
        }
        assert!(is_frames(take(&mut rx, &stats), 1));
    }

    /// A control message goes after the frames read before it.
    #[tokio::test(start_paused = true)]
    async fn a_control_message_follows_the_frames_read_before_it() {
        let (mut outbox, mut rx, stats) = outbox(8);
        outbox.offer_frame(frame());
        outbox.offer_frame(frame());
        let now = SystemTime::now();
        outbox.control(BusMessage::Disconnected {
            at: now,
            reason: GapReason::Disconnected,
        });
        outbox.flush_held();
        assert!(is_frames(take(&mut rx, &stats), 2));
        assert!(matches!(
            take(&mut rx, &stats),
            Some(BusMessage::Disconnected { .. })
        ));
    }

    /// A consumer that takes one message per frame offered keeps the queue full:
    /// gaps must not crowd out frames (the held gap waits for room for itself and
    /// a frame).
    #[tokio::test(start_paused = true)]
    async fn sustained_overload_delivers_frames_and_at_most_a_gap_a_second() {
        let (mut outbox, mut rx, stats) = outbox(4);
        let (mut frames, mut gaps, mut dropped_in_gaps) = (0u64, 0u64, 0u64);
        let mut count = |msg: Option<BusMessage>| match msg {
            Some(BusMessage::Frames(f)) => frames += f.len() as u64,
            Some(BusMessage::Gap(g)) => {
                gaps += 1;
                dropped_in_gaps += g.dropped_frames;
            }
            _ => {}
        };
        for i in 0..1000 {
            if i % 100 == 0 {
                tokio::time::advance(Duration::from_millis(500)).await;
            }
            offer(&mut outbox);
            offer(&mut outbox);
            count(take(&mut rx, &stats));
        }
        while let Some(msg) = take(&mut rx, &stats) {
            count(Some(msg));
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
        let (mut outbox, mut rx, stats) = outbox(3);
        for _ in 0..4 {
            offer(&mut outbox); // the fourth is dropped: a queue_full gap is held
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
            assert!(is_frames(take(&mut rx, &stats), 1));
        }
        // A held Connected: data waits behind it, in order.
        assert!(offer(&mut outbox));
        match take(&mut rx, &stats) {
            Some(BusMessage::Gap(gap)) => assert_eq!(
                (gap.reason, gap.dropped_frames),
                (GapReason::Disconnected, 1)
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            take(&mut rx, &stats),
            Some(BusMessage::Connected { .. })
        ));
        assert!(is_frames(take(&mut rx, &stats), 1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_byte_budget_drops_what_would_exceed_it_until_consumed() {
        let (tx, mut rx) = mpsc::channel(100);
        let stats = Arc::new(ReaderStats::default());
        let mut outbox = Outbox::new(tx, stats.clone(), 2, 100);
        assert!(offer(&mut outbox));
        assert!(offer(&mut outbox));
        assert!(!offer(&mut outbox), "over the 2-byte budget");
        assert!(is_frames(take(&mut rx, &stats), 1));
        assert!(offer(&mut outbox));
        assert_eq!(stats.dropped_queue_full.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_queue_is_not_counted_as_drops() {
        let (mut outbox, rx, stats) = outbox(1);
        drop(rx);
        assert!(!offer(&mut outbox));
        assert_eq!(stats.dropped_queue_full.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_handled_batch_gives_its_vector_back_for_a_later_read() {
        let (mut outbox, mut rx, stats) = outbox(2_000);
        let mut send = |outbox: &mut Outbox, n: usize| {
            for _ in 0..n {
                outbox.offer_frame(frame());
            }
            assert!(outbox.send_batch());
            match take(&mut rx, &stats) {
                Some(BusMessage::Frames(batch)) if batch.len() == n => batch,
                other => panic!("not a batch of {n}: {other:?}"),
            }
        };
        let a = send(&mut outbox, 3);
        let a_storage = a.as_ptr();
        drop(a);
        assert_eq!(outbox.spares.len(), 1, "kept when the consumer is done");
        // The next read's vector was taken when `a` went; the one after
        // gets `a`'s.
        let b = send(&mut outbox, 2);
        assert_ne!(b.as_ptr(), a_storage);
        let c = send(&mut outbox, 3);
        assert_eq!(c.as_ptr(), a_storage, "the handled batch's vector, again");
        assert!(c.iter().all(|f| &f.bytes[..] == b"x"));
        // While batches are held, none comes back; a very large one is freed.
        let held = [b, c];
        let large = send(&mut outbox, 1_500);
        drop(large);
        assert_eq!(outbox.spares.len(), 0, "room for 1,500 frames is not kept");
        drop(held);
        assert_eq!(outbox.spares.len(), 2);
    }
}
