//! The outbox's rules: order, bounds, gaps, the spill.

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
