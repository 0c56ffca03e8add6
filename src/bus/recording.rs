//! Recordings of the bus: the capture format written by `saltsight capture`, and a
//! reader that takes either it or a raw dump of the socket bytes (what a subscriber
//! reads, like ../shared/captures/*.bin) and turns both into [`BusMessage`]s through
//! the same frame splitter the live reader uses.
//!
//! Capture format, version 1 (all integers big-endian):
//!
//! ```text
//! file    := MAGIC record*
//! MAGIC   := "saltsight-capture v1\n"             (21 bytes)
//! record  := kind:u8 time_us:u64 len:u32 payload[len]
//! kind    := 1  bytes read from the socket, exactly as read
//!          | 2  connected; payload = the endpoint, UTF-8
//!          | 3  disconnected; payload = the reason, UTF-8
//! time_us := receive time, microseconds since the Unix epoch (UTC)
//! ```
//!
//! A file that does not start with `MAGIC` is taken as a raw dump: one connection's
//! bytes with no times.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};

use super::framing::{FrameSplitter, Split};
use super::reader::{BusGap, BusMessage, Frame, GapReason, Lost};

pub const MAGIC: &[u8] = b"saltsight-capture v1\n";
const KIND_BYTES: u8 = 1;
const KIND_CONNECTED: u8 = 2;
const KIND_DISCONNECTED: u8 = 3;
const HEADER_LEN: usize = 1 + 8 + 4;
/// Records longer than this are refused as corrupt (the reader reads at most 256 KiB
/// at a time, so real records are far smaller).
const MAX_RECORD: usize = 64 << 20;

/// Writes the capture format.
pub struct CaptureWriter<W: Write> {
    out: W,
}

impl<W: Write> CaptureWriter<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(MAGIC)?;
        Ok(Self { out })
    }

    pub fn bytes(&mut self, at: SystemTime, bytes: &[u8]) -> io::Result<()> {
        // The reader hands out at most a few hundred KiB per read; split anyway so a
        // record never exceeds what the reader of this format accepts.
        for piece in bytes.chunks(MAX_RECORD) {
            self.record(KIND_BYTES, at, piece)?;
        }
        Ok(())
    }

    pub fn connected(&mut self, at: SystemTime, endpoint: &str) -> io::Result<()> {
        self.record(KIND_CONNECTED, at, endpoint.as_bytes())
    }

    pub fn disconnected(&mut self, at: SystemTime, reason: &str) -> io::Result<()> {
        self.record(KIND_DISCONNECTED, at, reason.as_bytes())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }

    fn record(&mut self, kind: u8, at: SystemTime, payload: &[u8]) -> io::Result<()> {
        let micros = at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let mut header = [0u8; HEADER_LEN];
        header[0] = kind;
        header[1..9].copy_from_slice(&micros.to_be_bytes());
        header[9..13].copy_from_slice(&(payload.len() as u32).to_be_bytes());
        self.out.write_all(&header)?;
        self.out.write_all(payload)
    }
}

/// Reading a recording failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("reading the recording failed")]
    Io(#[from] io::Error),
    #[error("corrupt capture record at byte {offset}: {what}")]
    Corrupt { offset: u64, what: &'static str },
}

/// Which format a recording is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordingFormat {
    Capture,
    RawDump,
}

/// Turns a recording into the messages the live reader would have produced.
pub struct RecordingReader<R: Read> {
    input: BufReader<R>,
    format: RecordingFormat,
    offset: u64,
    splitter: FrameSplitter,
    max_frame_bytes: usize,
    buf: BytesMut,
    disconnected_at: Option<(SystemTime, GapReason)>,
    /// Frames skipped by length, or streams that lost sync: counted for the summary.
    pub skipped_frames: u64,
    /// Bytes set aside after a desync (or a partial frame cut by a reconnect).
    pub discarded_bytes: u64,
    out_of_sync: bool,
    pub desyncs: u64,
    pub trailing_bytes: u64,
    done: bool,
}

const RAW_CHUNK: usize = 1 << 20;

impl<R: Read> RecordingReader<R> {
    pub fn new(input: R, max_frame_bytes: usize) -> io::Result<Self> {
        let mut input = BufReader::with_capacity(RAW_CHUNK, input);
        let mut head = Vec::with_capacity(MAGIC.len());
        (&mut input)
            .take(MAGIC.len() as u64)
            .read_to_end(&mut head)?;
        let format = if head == MAGIC {
            RecordingFormat::Capture
        } else {
            RecordingFormat::RawDump
        };
        let mut buf = BytesMut::new();
        let mut offset = head.len() as u64;
        if format == RecordingFormat::RawDump {
            buf.extend_from_slice(&head);
            offset = 0;
        }
        Ok(Self {
            input,
            format,
            offset,
            splitter: FrameSplitter::new(max_frame_bytes),
            max_frame_bytes,
            buf,
            disconnected_at: None,
            skipped_frames: 0,
            discarded_bytes: 0,
            out_of_sync: false,
            desyncs: 0,
            trailing_bytes: 0,
            done: false,
        })
    }

    pub fn format(&self) -> RecordingFormat {
        self.format
    }

    /// Bytes of the recording consumed so far (for progress).
    pub fn position(&self) -> u64 {
        self.offset
    }

    /// Reads on until it has messages to hand out; pushes them into `out`.
    /// Returns `Ok(false)` at the end of the recording.
    pub fn next_batch(&mut self, out: &mut Vec<BusMessage>) -> Result<bool, RecordingError> {
        if self.done {
            return Ok(false);
        }
        let more = match self.format {
            RecordingFormat::RawDump => self.next_raw(out)?,
            RecordingFormat::Capture => self.next_record(out)?,
        };
        if !more {
            self.done = true;
            self.trailing_bytes = self.buf.len() as u64;
            // Stopped while disconnected: the loss runs to the end of the recording.
            if let Some((at, reason)) = self.disconnected_at.take() {
                out.push(BusMessage::Gap(BusGap {
                    started_at: at,
                    ended_at: at,
                    reason,
                    dropped_frames: 0,
                }));
            }
        }
        Ok(more)
    }

    fn next_raw(&mut self, out: &mut Vec<BusMessage>) -> Result<bool, RecordingError> {
        // One read, taken from the input's own buffer (not into a zeroed chunk first).
        let chunk = self.input.fill_buf()?;
        let n = chunk.len();
        if n == 0 && self.buf.is_empty() {
            return Ok(false);
        }
        self.buf.extend_from_slice(chunk);
        self.input.consume(n);
        self.offset += n as u64;
        self.split(None, out);
        Ok(n > 0)
    }

    fn next_record(&mut self, out: &mut Vec<BusMessage>) -> Result<bool, RecordingError> {
        let record_start = self.offset;
        let mut header = [0u8; HEADER_LEN];
        match read_exact_or_eof(&mut self.input, &mut header)? {
            0 => return Ok(false),
            n if n < HEADER_LEN => {
                return Err(RecordingError::Corrupt {
                    offset: self.offset,
                    what: "truncated record header",
                });
            }
            _ => {}
        }
        let kind = header[0];
        let micros = u64::from_be_bytes(header[1..9].try_into().unwrap_or_default());
        let at = UNIX_EPOCH + Duration::from_micros(micros);
        let len = u32::from_be_bytes(header[9..13].try_into().unwrap_or_default()) as usize;
        if len > MAX_RECORD {
            return Err(RecordingError::Corrupt {
                offset: self.offset,
                what: "record longer than 64 MiB",
            });
        }
        // Read straight into its own buffer (not zeroed first), which becomes the
        // frames' when nothing is left over from the record before.
        let mut payload = Vec::with_capacity(len);
        if (&mut self.input)
            .take(len as u64)
            .read_to_end(&mut payload)?
            < len
        {
            return Err(RecordingError::Corrupt {
                offset: self.offset,
                what: "truncated record payload",
            });
        }
        self.offset += (HEADER_LEN + len) as u64;
        match kind {
            KIND_BYTES => {
                if self.buf.is_empty() {
                    self.buf = BytesMut::from(Bytes::from(payload));
                } else {
                    self.buf.extend_from_slice(&payload);
                }
                self.split(Some(at), out);
            }
            KIND_CONNECTED => {
                if let Some((started_at, reason)) = self.disconnected_at.take() {
                    out.push(BusMessage::Gap(BusGap {
                        started_at,
                        ended_at: at,
                        reason,
                        dropped_frames: 0,
                    }));
                }
                // A new connection starts a new stream: fresh framing detection.
                self.discarded_bytes += self.buf.len() as u64;
                self.buf.clear();
                self.splitter = FrameSplitter::new(self.max_frame_bytes);
                self.out_of_sync = false;
            }
            KIND_DISCONNECTED => {
                let reason = match &payload[..] {
                    b"desync" => GapReason::Desync,
                    b"read_error" => GapReason::ReadError,
                    b"queue_full" => GapReason::QueueFull,
                    b"shutdown" => GapReason::Shutdown,
                    _ => GapReason::Disconnected,
                };
                self.disconnected_at = Some((at, reason));
            }
            _ => {
                return Err(RecordingError::Corrupt {
                    offset: record_start,
                    what: "unknown record kind",
                });
            }
        }
        Ok(true)
    }

    fn split(&mut self, at: Option<SystemTime>, out: &mut Vec<BusMessage>) {
        if self.out_of_sync {
            self.discarded_bytes += self.buf.len() as u64;
            self.buf.clear();
            return;
        }
        loop {
            match self.splitter.next(&mut self.buf) {
                Ok(Some(Split::Frame(bytes))) => out.push(BusMessage::Frame(Frame {
                    bytes,
                    received_at: at,
                    received_mono: None,
                })),
                Ok(Some(Split::Skipped { declared_len, head })) => {
                    self.skipped_frames += 1;
                    out.push(BusMessage::Lost(Lost {
                        head,
                        declared_len,
                        received_at: at.unwrap_or(UNIX_EPOCH),
                    }));
                }
                Ok(None) => return,
                Err(_) => {
                    // As live: bare framing cannot be resynchronised within this
                    // stream. Its remaining bytes are set aside (never guessed at)
                    // until the next connection in a capture, or the end of a dump.
                    self.desyncs += 1;
                    self.out_of_sync = true;
                    self.discarded_bytes += self.buf.len() as u64;
                    self.buf.clear();
                    let at = at.unwrap_or(UNIX_EPOCH);
                    out.push(BusMessage::Gap(BusGap {
                        started_at: at,
                        ended_at: at,
                        reason: GapReason::Desync,
                        dropped_frames: 0,
                    }));
                    return;
                }
            }
        }
    }

    /// Reads everything into one list (tests and small files).
    pub fn read_all(mut self) -> Result<(Vec<BusMessage>, Self), RecordingError> {
        let mut out = Vec::new();
        while self.next_batch(&mut out)? {}
        Ok((out, self))
    }
}

/// Like `read_exact`, but a clean end of input returns how much was read.
fn read_exact_or_eof(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The frame bytes of every frame message (tests, benches).
pub fn frames_of(messages: &[BusMessage]) -> Vec<Bytes> {
    messages
        .iter()
        .flat_map(|m| match m {
            BusMessage::Frame(f) => std::slice::from_ref(f),
            BusMessage::Frames(frames) => frames,
            _ => &[],
        })
        .map(|f| f.bytes.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: &str) -> Vec<u8> {
        let mut body = tag.as_bytes().to_vec();
        body.extend_from_slice(b"\n\n\x80");
        let mut out = vec![
            0x82,
            0xa4,
            b'h',
            b'e',
            b'a',
            b'd',
            0x80,
            0xa4,
            b'b',
            b'o',
            b'd',
            b'y',
            0xc4,
            body.len() as u8,
        ];
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn capture_round_trip_with_a_reconnect_gives_frames_and_a_gap() {
        let t = |s| UNIX_EPOCH + Duration::from_secs(s);
        let mut writer = CaptureWriter::new(Vec::new()).unwrap();
        writer.connected(t(1), "unix:/x").unwrap();
        let two = [frame("a"), frame("b")].concat();
        writer.bytes(t(2), &two[..5]).unwrap();
        writer.bytes(t(3), &two[5..]).unwrap();
        writer.disconnected(t(4), "disconnected").unwrap();
        writer.connected(t(7), "unix:/x").unwrap();
        // The new connection is length-prefixed: detection starts over.
        let mut prefixed = (frame("c").len() as u32).to_be_bytes().to_vec();
        prefixed.extend_from_slice(&frame("c"));
        writer.bytes(t(8), &prefixed).unwrap();
        let file = writer.into_inner();

        let reader = RecordingReader::new(&file[..], 1 << 20).unwrap();
        assert_eq!(reader.format(), RecordingFormat::Capture);
        let (messages, _) = reader.read_all().unwrap();
        assert_eq!(
            frames_of(&messages),
            vec![
                Bytes::from(frame("a")),
                Bytes::from(frame("b")),
                Bytes::from(frame("c"))
            ]
        );
        let gaps: Vec<_> = messages
            .iter()
            .filter_map(|m| {
                if let BusMessage::Gap(g) = m {
                    Some(g)
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(gaps.len(), 1);
        assert_eq!(
            (gaps[0].started_at, gaps[0].ended_at, gaps[0].reason),
            (t(4), t(7), GapReason::Disconnected)
        );
    }

    #[test]
    fn after_a_desync_nothing_is_guessed_until_the_next_connection() {
        let t = |s| UNIX_EPOCH + Duration::from_secs(s);
        // Raw dump: frames, garbage, then more frames. The later frames cannot be
        // trusted to start where they seem to (live, the reader reconnects).
        let mut dump = [frame("a"), vec![0xc1, 0, 0, 0, 9], frame("b")].concat();
        dump.extend(std::iter::repeat_n(frame("c"), 100).flatten());
        let reader = RecordingReader::new(&dump[..], 1 << 20).unwrap();
        let (messages, reader) = reader.read_all().unwrap();
        assert_eq!(frames_of(&messages), vec![Bytes::from(frame("a"))]);
        assert_eq!(reader.desyncs, 1);
        assert_eq!(
            reader.skipped_frames, 0,
            "garbage must not be taken for a length prefix"
        );
        assert!(reader.discarded_bytes > 0);
        // Capture: the next connection starts clean; a disconnect pending at the end
        // is still a gap.
        let mut writer = CaptureWriter::new(Vec::new()).unwrap();
        writer.connected(t(1), "unix:/x").unwrap();
        writer
            .bytes(t(2), &[frame("a"), vec![0xc1, 7, 7]].concat())
            .unwrap();
        writer.bytes(t(3), &frame("lost")).unwrap();
        writer.disconnected(t(4), "desync").unwrap();
        writer.connected(t(5), "unix:/x").unwrap();
        writer.bytes(t(6), &frame("b")).unwrap();
        writer.disconnected(t(7), "shutdown").unwrap();
        let file = writer.into_inner();
        let (messages, _) = RecordingReader::new(&file[..], 1 << 20)
            .unwrap()
            .read_all()
            .unwrap();
        assert_eq!(
            frames_of(&messages),
            vec![Bytes::from(frame("a")), Bytes::from(frame("b"))]
        );
        let gaps: Vec<GapReason> = messages
            .iter()
            .filter_map(|m| {
                if let BusMessage::Gap(g) = m {
                    Some(g.reason)
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(
            gaps,
            vec![GapReason::Desync, GapReason::Desync, GapReason::Shutdown]
        );
    }

    #[test]
    fn an_unknown_record_kind_names_the_record_start() {
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&[9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let err = RecordingReader::new(&file[..], 1 << 20)
            .unwrap()
            .read_all()
            .err()
            .unwrap();
        assert!(
            matches!(
                err,
                RecordingError::Corrupt {
                    offset: 21,
                    what: "unknown record kind"
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_raw_dump_is_one_stream() {
        let dump = [frame("a"), frame("b")].concat();
        let reader = RecordingReader::new(&dump[..], 1 << 20).unwrap();
        assert_eq!(reader.format(), RecordingFormat::RawDump);
        let (messages, _) = reader.read_all().unwrap();
        assert_eq!(frames_of(&messages).len(), 2);
    }

    #[test]
    fn a_truncated_capture_is_an_error_naming_the_offset() {
        let mut writer = CaptureWriter::new(Vec::new()).unwrap();
        writer.bytes(UNIX_EPOCH, &frame("a")).unwrap();
        let mut file = writer.into_inner();
        file.truncate(file.len() - 3);
        let err = RecordingReader::new(&file[..], 1 << 20)
            .unwrap()
            .read_all()
            .err()
            .unwrap();
        assert!(
            matches!(err, RecordingError::Corrupt { offset: 21, .. }),
            "{err}"
        );
    }
}
