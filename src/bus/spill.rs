//! The reader's buffer on disk: where frames go, in order, while the queue to
//! the pipeline is full, so that the reader keeps draining the socket whatever
//! the pipeline is doing. The master drops a subscriber that lets 10,000 of its
//! writes wait (`Publisher discarding slow subscriber`), so a reader that stops
//! reading pushes the cost of being slow onto the master and then loses a
//! stretch of events; one that spills keeps them, in order, and hands them on
//! as the queue takes them.
//!
//! Memory first, then disk: the queue (`bus.queue_frames`, `bus.queue_bytes`)
//! is the memory tier; past it frames are appended here (`bus.spill_max_bytes`
//! at most, in `bus.spill_dir`). Past that bound the newest frames are dropped,
//! counted, and become a `queue_full` gap: what is kept is the oldest stretch,
//! so the events the pipeline sees next are the ones right after what it has.
//!
//! Files are unlinked temporaries (`tempfile_in`): none is shared with another
//! reader, none is left after a crash. They are a buffer, not a store: nothing
//! is synced, and a restart is a gap as it always is. Segments of
//! [`SEGMENT_BYTES`] are written at the back and read at the front; one is
//! closed (its space freed) as soon as it has been read through.

use std::collections::VecDeque;
use std::fs::File;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
#[cfg(test)]
use std::time::SystemTime;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use tokio::time::Instant;

use super::message::Frame;

/// A segment is closed for writing past this many bytes.
pub const SEGMENT_BYTES: u64 = 16 << 20;

/// Frames written are gathered to this many bytes before a write.
const WRITE_BYTES: usize = 256 << 10;

/// A frame's header on disk: its length, whether it has each time, the times.
const HEADER: usize = 4 + 4 + 8 + 8;

/// Where a reader spills, and how much at most (`[bus] spill_dir`,
/// `spill_max_bytes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillConfig {
    pub dir: PathBuf,
    pub max_bytes: u64,
}

/// Why a frame could not be spilled or read back.
#[derive(Debug, thiserror::Error)]
pub enum SpillError {
    #[error("the spill is full ({held} bytes held, bus.spill_max_bytes {max})")]
    Full { held: u64, max: u64 },
    #[error("cannot write the bus spill in {dir}: {source}")]
    Write {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read back the bus spill in {dir}: {source}")]
    Read {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

struct Segment {
    file: File,
    /// Bytes in the file (written), and where the next frame is read.
    written: u64,
    read_at: u64,
    /// Frames written to it, and read back from it.
    frames: u64,
    frames_read: u64,
}

/// Frames on disk, in order: appended at the back, taken from the front.
pub struct Spill {
    dir: PathBuf,
    max_bytes: u64,
    segments: VecDeque<Segment>,
    /// Frames appended and not yet written to the back segment.
    pending: Vec<u8>,
    /// The front frame, read back and not yet taken.
    front: Option<Frame>,
    /// Bytes and frames held (on disk, pending, or the front).
    held_bytes: u64,
    held_frames: u64,
    /// What the monotonic times on disk count from.
    base: Instant,
}

impl Spill {
    /// A spill in `dir` (made when first needed) of at most `max_bytes`.
    pub fn new(dir: &Path, max_bytes: u64) -> Self {
        Self {
            dir: dir.to_path_buf(),
            max_bytes,
            segments: VecDeque::new(),
            pending: Vec::new(),
            front: None,
            held_bytes: 0,
            held_frames: 0,
            base: Instant::now(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.held_frames == 0
    }

    /// Bytes held: frames and their headers.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    pub fn held_frames(&self) -> u64 {
        self.held_frames
    }

    /// Appends `frame` behind what is held. A frame that would pass the bound,
    /// or that cannot be written, is refused (the caller counts it dropped).
    pub fn push(&mut self, frame: &Frame) -> Result<(), SpillError> {
        let size = (HEADER + frame.bytes.len()) as u64;
        if self.held_bytes + size > self.max_bytes {
            return Err(SpillError::Full {
                held: self.held_bytes,
                max: self.max_bytes,
            });
        }
        let at = frame
            .received_at
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok());
        let mono = frame
            .received_mono
            .map(|t| t.saturating_duration_since(self.base));
        let flags = u32::from(at.is_some()) | (u32::from(mono.is_some()) << 1);
        self.pending
            .extend_from_slice(&(frame.bytes.len() as u32).to_le_bytes());
        self.pending.extend_from_slice(&flags.to_le_bytes());
        self.pending
            .extend_from_slice(&(at.unwrap_or_default().as_nanos() as u64).to_le_bytes());
        self.pending
            .extend_from_slice(&(mono.unwrap_or_default().as_nanos() as u64).to_le_bytes());
        self.pending.extend_from_slice(&frame.bytes);
        self.held_bytes += size;
        self.held_frames += 1;
        if self.pending.len() >= WRITE_BYTES {
            self.write_pending()?;
        }
        Ok(())
    }

    /// Writes what is pending to the back segment (a new one past
    /// [`SEGMENT_BYTES`]). On an error what was pending is lost: taken off the
    /// held counts, and the error says so.
    fn write_pending(&mut self) -> Result<(), SpillError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let write = |spill: &mut Self| -> std::io::Result<()> {
            let needs_new = spill
                .segments
                .back()
                .is_none_or(|s| s.written >= SEGMENT_BYTES);
            if needs_new {
                std::fs::create_dir_all(&spill.dir)?;
                let file = tempfile::tempfile_in(&spill.dir)?;
                spill.segments.push_back(Segment {
                    file,
                    written: 0,
                    read_at: 0,
                    frames: 0,
                    frames_read: 0,
                });
            }
            let back = spill.segments.back_mut().expect("a back segment");
            back.file.write_all_at(&spill.pending, back.written)?;
            back.written += spill.pending.len() as u64;
            back.frames += count_frames(&spill.pending).1;
            Ok(())
        };
        match write(self) {
            Ok(()) => {
                self.pending.clear();
                Ok(())
            }
            Err(source) => {
                let (bytes, frames) = count_frames(&self.pending);
                self.held_bytes -= bytes;
                self.held_frames -= frames;
                self.pending.clear();
                Err(SpillError::Write {
                    dir: self.dir.clone(),
                    source,
                })
            }
        }
    }

    /// The oldest frame held, read back (it stays held until [`Spill::advance`]).
    /// A segment that cannot be read is given up: its frames are lost, taken
    /// off the held counts, and the error says how many.
    pub fn front(&mut self) -> Result<Option<&Frame>, (SpillError, u64)> {
        if self.front.is_none() && !self.is_empty() {
            self.front = self.read_next()?;
        }
        Ok(self.front.as_ref())
    }

    /// Takes the front frame.
    pub fn advance(&mut self) -> Option<Frame> {
        let frame = self.front.take()?;
        self.held_bytes -= (HEADER + frame.bytes.len()) as u64;
        self.held_frames -= 1;
        Some(frame)
    }

    fn read_next(&mut self) -> Result<Option<Frame>, (SpillError, u64)> {
        loop {
            let Some(segment) = self.segments.front_mut() else {
                // Nothing on disk yet: what is pending is read from memory.
                return Ok(self.take_pending());
            };
            if segment.read_at >= segment.written {
                if self.segments.len() == 1 {
                    // The back segment read through: start it again.
                    self.segments.clear();
                    return Ok(self.take_pending());
                }
                self.segments.pop_front();
                continue;
            }
            match read_frame(segment, self.base) {
                Ok(frame) => return Ok(Some(frame)),
                Err(source) => {
                    let lost = self.give_up_front();
                    return Err((
                        SpillError::Read {
                            dir: self.dir.clone(),
                            source,
                        },
                        lost,
                    ));
                }
            }
        }
    }

    /// The first pending frame, taken from memory (never written).
    fn take_pending(&mut self) -> Option<Frame> {
        if self.pending.len() < HEADER {
            return None;
        }
        let frame = first_frame(&self.pending, self.base)?;
        let size = HEADER + frame.bytes.len();
        self.pending.drain(..size);
        Some(frame)
    }

    /// Drops the front segment; how many frames it held unread.
    fn give_up_front(&mut self) -> u64 {
        let Some(segment) = self.segments.pop_front() else {
            return 0;
        };
        let frames = (segment.frames - segment.frames_read).min(self.held_frames);
        self.held_bytes -= (segment.written - segment.read_at).min(self.held_bytes);
        self.held_frames -= frames;
        frames
    }

    /// Nothing is held: every segment closed, what was pending dropped.
    pub fn clear(&mut self) {
        self.segments.clear();
        self.pending.clear();
        self.front = None;
        self.held_bytes = 0;
        self.held_frames = 0;
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Reads the frame at `segment.read_at`, moving past it.
fn read_frame(segment: &mut Segment, base: Instant) -> std::io::Result<Frame> {
    let mut header = [0u8; HEADER];
    segment.file.read_exact_at(&mut header, segment.read_at)?;
    let (len, flags, at, mono) = parse_header(&header);
    if segment.read_at + (HEADER + len) as u64 > segment.written {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes runs past the segment's end"),
        ));
    }
    let mut bytes = vec![0u8; len];
    segment
        .file
        .read_exact_at(&mut bytes, segment.read_at + HEADER as u64)?;
    segment.read_at += (HEADER + len) as u64;
    segment.frames_read += 1;
    Ok(frame_of(Bytes::from(bytes), flags, at, mono, base))
}

fn parse_header(header: &[u8; HEADER]) -> (usize, u32, u64, u64) {
    let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let long = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
    (word(0) as usize, word(4), long(8), long(16))
}

fn frame_of(bytes: Bytes, flags: u32, at: u64, mono: u64, base: Instant) -> Frame {
    Frame {
        bytes,
        received_at: (flags & 1 != 0).then(|| UNIX_EPOCH + Duration::from_nanos(at)),
        received_mono: (flags & 2 != 0).then(|| base + Duration::from_nanos(mono)),
    }
}

/// Frames and their bytes in an encoded run of frames.
fn count_frames(mut encoded: &[u8]) -> (u64, u64) {
    let (mut bytes, mut frames) = (0, 0);
    while encoded.len() >= HEADER {
        let header: &[u8; HEADER] = encoded[..HEADER].try_into().expect("a header");
        let size = (HEADER + parse_header(header).0).min(encoded.len());
        bytes += size as u64;
        frames += 1;
        encoded = &encoded[size..];
    }
    (bytes, frames)
}

/// The first frame of an encoded run of frames (what is pending, in memory).
fn first_frame(encoded: &[u8], base: Instant) -> Option<Frame> {
    let header: &[u8; HEADER] = encoded.get(..HEADER)?.try_into().ok()?;
    let (len, flags, at, mono) = parse_header(header);
    let bytes = encoded.get(HEADER..HEADER + len)?;
    Some(frame_of(
        Bytes::copy_from_slice(bytes),
        flags,
        at,
        mono,
        base,
    ))
}

/// When a frame was received, as the spill keeps it: to the nanosecond.
#[cfg(test)]
fn whole_nanos(t: SystemTime) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize, size: usize) -> Frame {
        Frame {
            bytes: Bytes::from(vec![(n % 251) as u8; size]),
            received_at: Some(whole_nanos(SystemTime::now())),
            received_mono: Some(Instant::now()),
        }
    }

    fn take_all(spill: &mut Spill) -> Vec<Frame> {
        let mut taken = Vec::new();
        while spill.front().expect("reads back").is_some() {
            taken.push(spill.advance().expect("the front"));
        }
        taken
    }

    #[test]
    fn frames_come_back_in_order_with_their_times_across_segments() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spill = Spill::new(dir.path(), 1 << 30);
        // 40 MB: three segments, written in batches, then one still pending.
        let frames: Vec<Frame> = (0..400).map(|n| frame(n, 100_000 + n)).collect();
        for f in &frames {
            spill.push(f).expect("spilled");
        }
        assert_eq!(spill.held_frames(), 400);
        assert!(spill.segments.len() >= 3, "{}", spill.segments.len());
        let back = take_all(&mut spill);
        assert_eq!(back.len(), 400);
        for (sent, got) in frames.iter().zip(&back) {
            assert_eq!(sent.bytes, got.bytes);
            assert_eq!(sent.received_at, got.received_at);
            let mono = |f: &Frame| f.received_mono.expect("a time");
            assert!(
                mono(sent).max(mono(got)) - mono(sent).min(mono(got)) < Duration::from_micros(1)
            );
        }
        assert!(spill.is_empty());
        assert_eq!(spill.held_bytes(), 0);
        assert!(
            spill.segments.is_empty(),
            "read-through segments are closed"
        );
    }

    #[test]
    fn taking_while_appending_keeps_the_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spill = Spill::new(dir.path(), 1 << 30);
        let mut next_in = 0;
        let mut next_out = 0;
        for round in 0..50 {
            for _ in 0..(round % 7) * 30 {
                spill.push(&frame(next_in, 9_000)).expect("spilled");
                next_in += 1;
            }
            for _ in 0..(round % 5) * 40 {
                if spill.front().expect("reads back").is_none() {
                    break;
                }
                let got = spill.advance().expect("the front");
                assert_eq!(got.bytes[0], (next_out % 251) as u8, "frame {next_out}");
                next_out += 1;
            }
        }
        next_out += take_all(&mut spill).len();
        assert_eq!(next_in, next_out);
    }

    #[test]
    fn a_segment_that_cannot_be_read_back_is_given_up_and_counted_the_rest_comes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spill = Spill::new(dir.path(), 1 << 30);
        for n in 0..400 {
            spill.push(&frame(n, 100_000)).expect("spilled");
        }
        let first = spill.segments.front().expect("a segment");
        let in_first = first.frames;
        first.file.set_len(first.written / 2).expect("damaged");
        let mut taken = 0;
        let mut lost = 0;
        loop {
            match spill.front() {
                Ok(Some(_)) => {
                    spill.advance();
                    taken += 1;
                }
                Ok(None) => break,
                Err((error, n)) => {
                    assert!(error.to_string().contains("read back"), "{error}");
                    lost += n;
                }
            }
        }
        assert!(lost > 0 && lost < in_first, "{lost} of {in_first}");
        assert_eq!(taken + lost, 400);
        assert!(spill.is_empty());
        assert_eq!(spill.held_bytes(), 0);
    }

    #[test]
    fn past_its_bound_a_frame_is_refused_and_nothing_held_is_lost() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spill = Spill::new(dir.path(), 10 * (HEADER as u64 + 1000));
        for n in 0..10 {
            spill.push(&frame(n, 1000)).expect("within the bound");
        }
        assert!(matches!(
            spill.push(&frame(10, 1000)),
            Err(SpillError::Full { .. })
        ));
        assert_eq!(take_all(&mut spill).len(), 10);
        spill.push(&frame(11, 1000)).expect("room again");
    }

    #[test]
    fn a_directory_that_cannot_be_written_refuses_with_its_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"x").expect("a file");
        let mut spill = Spill::new(&file.join("spill"), 1 << 30);
        let mut refused = None;
        for n in 0..100 {
            if let Err(e) = spill.push(&frame(n, 10_000)) {
                refused = Some(e);
                break;
            }
        }
        let refused = refused.expect("a write fails");
        assert!(refused.to_string().contains("not-a-dir"), "{refused}");
        // What could not be written is not held.
        assert_eq!(take_all(&mut spill).len() as u64, spill.held_frames());
        assert!(spill.is_empty());
    }
}
