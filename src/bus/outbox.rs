//! The reader's side of the queue to the pipeline: it never waits. Frames that
//! do not fit are dropped, counted, and become a `queue_full` gap; control
//! messages (connections, gaps, lost frames) are held, in order, until there is
//! room, with gaps merged.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::time::Instant;

use super::message::{BusGap, BusMessage, GapReason, ReaderStats};

/// The sending side of the queue; never waits.
///
/// Control messages are held, in order, until there is room. A `Connected` must
/// precede the new connection's data, so data never passes one. A held gap may be passed by data: it is sent when two slots
/// are free (one left for data), or after waiting [`GAP_MAX_HOLD`] even into the
/// last slot, so a queue that stays full delivers frames, with at most one gap a
/// second, not a flood of gaps. A gap's meaning is its time span, not its place.
pub(super) struct Outbox {
    pub(super) tx: mpsc::Sender<BusMessage>,
    held: VecDeque<BusMessage>,
    held_since: Option<Instant>,
    stats: Arc<ReaderStats>,
    max_bytes: u64,
}

/// The longest a gap waits for a slot that leaves room for data.
const GAP_MAX_HOLD: Duration = Duration::from_secs(1);

impl Outbox {
    pub(super) fn new(
        tx: mpsc::Sender<BusMessage>,
        stats: Arc<ReaderStats>,
        max_bytes: u64,
    ) -> Self {
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
    pub(super) fn control(&mut self, msg: BusMessage) {
        self.held_since.get_or_insert_with(Instant::now);
        match (self.held.back_mut(), msg) {
            (Some(BusMessage::Gap(held)), BusMessage::Gap(gap)) => merge_gap(held, gap),
            (_, msg) => self.held.push_back(msg),
        }
    }

    /// Sends what is held while there is room; returns whether data may go next
    /// (nothing but gaps is left held).
    pub(super) fn flush_held(&mut self) -> bool {
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
    pub(super) fn offer(&mut self, msg: BusMessage) -> bool {
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
    pub(super) async fn flush(&mut self, grace: Duration) {
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
