//! Splits the publisher's byte stream into frames, with no IO.
//!
//! Salt's event publisher writes one msgpack map `{"head": {}, "body": ...}` per
//! event. Most releases write it bare (`salt.transport.frame.frame_msg`); some
//! (3006.30 here) put a 4-byte big-endian length before it (`frame_msg_ipc`). The
//! form is detected from the first byte of each connection: a bare frame starts
//! with a map marker (`0x82` in practice), a prefixed one with the high byte of its
//! length (`0x00` for any frame under 16 MiB). Nothing is configured.
//!
//! Invariants:
//! - a frame is handed out only when all its bytes are buffered;
//! - no allocation is sized from a length read off the wire before that length is
//!   checked against `max_frame_bytes`;
//! - on the prefixed form a frame under the cap is taken by its length (a bad one
//!   fails to decode, and is counted); a length over the cap is trusted only when
//!   Salt's envelope follows it (`{"head": ..., "body": ...}`, a map whose first
//!   key is `head` or `body`): then the frame is skipped by its length (its first
//!   bytes kept, so the pipeline can name what was lost) and the stream goes on;
//!   anything else (and a zero length) is garbage: a [`FramingError`], and the
//!   reader reconnects;
//! - on the bare form there is no length to trust, so an invalid or oversized
//!   frame is a [`FramingError`] and the reader reconnects.

use bytes::{Buf, Bytes, BytesMut};

use super::msgpack::{ScanError, skip_value};

/// The two wire forms seen on real masters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Bare msgpack maps back to back (3006.25, 3007.17, 3008.3).
    Plain,
    /// Each map behind a 4-byte big-endian length (3006.30).
    LengthPrefixed,
}

impl Framing {
    pub fn as_str(self) -> &'static str {
        match self {
            Framing::Plain => "plain",
            Framing::LengthPrefixed => "length_prefixed",
        }
    }
}

/// What the splitter hands out.
#[derive(Debug, PartialEq, Eq)]
pub enum Split {
    /// One whole frame (the msgpack map, without any length prefix).
    Frame(Bytes),
    /// A prefixed frame over the cap, skipped by its length; its bytes are
    /// discarded as they arrive. `head` is its first bytes (up to
    /// [`SKIPPED_HEAD_BYTES`]), as far as they were buffered: where its tag is.
    Skipped { declared_len: u64, head: Bytes },
}

/// How much of a skipped frame is kept to name it.
pub const SKIPPED_HEAD_BYTES: usize = 1024;

/// The envelope's first key, as Salt writes it: `{"head": {}, "body": ...}`.
const ENVELOPE_STARTS: [&[u8]; 2] = [b"\x82\xa4head", b"\x82\xa4body"];

/// The stream cannot be split any further on this connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error(
        "bare frame does not start with a msgpack map (byte {byte:#04x}); the stream is out of sync"
    )]
    NotAMap { byte: u8 },
    #[error("invalid msgpack in a bare frame at byte {offset} of the frame")]
    InvalidMsgpack { offset: usize },
    #[error(
        "bare frame of at least {declared_end} bytes exceeds the {cap}-byte cap and has no length to skip by"
    )]
    TooLarge { declared_end: u64, cap: usize },
    #[error(
        "length prefix {declared_len} is not followed by an event envelope; the stream is out of sync"
    )]
    BadPrefix { declared_len: u64 },
}

impl FramingError {
    /// A short, bounded label for metrics and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            FramingError::NotAMap { .. } => "not_a_map",
            FramingError::InvalidMsgpack { .. } => "invalid_msgpack",
            FramingError::TooLarge { .. } => "too_large",
            FramingError::BadPrefix { .. } => "bad_prefix",
        }
    }
}

/// Per-connection splitter state. Make a new one for every connection.
#[derive(Debug)]
pub struct FrameSplitter {
    framing: Option<Framing>,
    max_frame_bytes: usize,
    discard_remaining: u64,
}

const PREFIX_LEN: usize = 4;

impl FrameSplitter {
    /// `max_frame_bytes` must stay below 2 GiB so that a length prefix can never be
    /// mistaken for a map marker (config validation enforces it).
    pub fn new(max_frame_bytes: usize) -> Self {
        Self {
            framing: None,
            max_frame_bytes,
            discard_remaining: 0,
        }
    }

    /// The form detected on this connection, once its first byte arrived.
    pub fn framing(&self) -> Option<Framing> {
        self.framing
    }

    /// Takes the next frame off the front of `buf`, if it is all there.
    /// `Ok(None)` means "read more bytes and call again".
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Split>, FramingError> {
        if self.discard_remaining > 0 {
            let n = usize::try_from(self.discard_remaining)
                .unwrap_or(usize::MAX)
                .min(buf.len());
            buf.advance(n);
            self.discard_remaining -= n as u64;
            if self.discard_remaining > 0 {
                return Ok(None);
            }
        }
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        let framing = *self.framing.get_or_insert(if is_map_marker(first) {
            Framing::Plain
        } else {
            Framing::LengthPrefixed
        });
        match framing {
            Framing::Plain => self.next_plain(buf, first),
            Framing::LengthPrefixed => self.next_prefixed(buf),
        }
    }

    fn next_plain(&mut self, buf: &mut BytesMut, first: u8) -> Result<Option<Split>, FramingError> {
        if !is_map_marker(first) {
            return Err(FramingError::NotAMap { byte: first });
        }
        match skip_value(buf, 0, self.max_frame_bytes) {
            Ok(end) => Ok(Some(Split::Frame(buf.split_to(end).freeze()))),
            Err(ScanError::Incomplete) => Ok(None),
            Err(ScanError::Invalid { offset }) => Err(FramingError::InvalidMsgpack { offset }),
            Err(ScanError::TooLarge { declared_end }) => Err(FramingError::TooLarge {
                declared_end,
                cap: self.max_frame_bytes,
            }),
        }
    }

    fn next_prefixed(&mut self, buf: &mut BytesMut) -> Result<Option<Split>, FramingError> {
        let Some(prefix) = buf.get(..PREFIX_LEN) else {
            return Ok(None);
        };
        let declared_len =
            u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        if declared_len == 0 {
            return Err(FramingError::BadPrefix { declared_len: 0 });
        }
        if declared_len > self.max_frame_bytes {
            // A length this large is trusted, and skipped, only once the envelope's
            // first key is there to see: garbage must not swallow gigabytes.
            let start = ENVELOPE_STARTS[0].len();
            let Some(envelope) = buf.get(PREFIX_LEN..PREFIX_LEN + start) else {
                return Ok(None);
            };
            if !ENVELOPE_STARTS.contains(&envelope) {
                return Err(FramingError::BadPrefix {
                    declared_len: declared_len as u64,
                });
            }
            buf.advance(PREFIX_LEN);
            let kept = buf.len().min(declared_len).min(SKIPPED_HEAD_BYTES);
            let head = Bytes::copy_from_slice(&buf[..kept]);
            self.discard_remaining = declared_len as u64;
            return Ok(Some(Split::Skipped {
                declared_len: declared_len as u64,
                head,
            }));
        }
        let total = PREFIX_LEN + declared_len;
        if buf.len() < total {
            // The length is under the cap: reserving for it is bounded.
            buf.reserve(total - buf.len());
            return Ok(None);
        }
        buf.advance(PREFIX_LEN);
        Ok(Some(Split::Frame(buf.split_to(declared_len).freeze())))
    }

    /// Whether the stream is inside a frame: some of it buffered, or a skipped
    /// frame's bytes still to come. A stream that stays there with nothing
    /// arriving was declared but never sent.
    pub fn mid_frame(&self, buf: &BytesMut) -> bool {
        self.discard_remaining > 0 || !buf.is_empty()
    }
}

fn is_map_marker(byte: u8) -> bool {
    matches!(byte, 0x80..=0x8f | 0xde | 0xdf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: &str) -> Vec<u8> {
        let mut body = tag.as_bytes().to_vec();
        body.extend_from_slice(b"\n\n\x81\xa1a\x01");
        let mut out = vec![0x82, 0xa4];
        out.extend_from_slice(b"head");
        out.push(0x80);
        out.push(0xa4);
        out.extend_from_slice(b"body");
        out.push(0xc4);
        out.push(body.len() as u8);
        out.extend_from_slice(&body);
        out
    }

    fn prefixed(payload: &[u8]) -> Vec<u8> {
        let mut out = (payload.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(payload);
        out
    }

    /// Feeds `stream` in pieces of `chunk` bytes and collects what comes out.
    fn split_all(stream: &[u8], chunk: usize, cap: usize) -> Result<Vec<Split>, FramingError> {
        let mut splitter = FrameSplitter::new(cap);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in stream.chunks(chunk) {
            buf.extend_from_slice(piece);
            while let Some(split) = splitter.next(&mut buf)? {
                out.push(split);
            }
        }
        assert!(buf.is_empty(), "bytes left over: {}", buf.len());
        Ok(out)
    }

    #[test]
    fn plain_and_prefixed_give_the_same_frames_whatever_the_chunking() {
        let frames = [frame("salt/a"), frame("salt/job/1/ret/web1"), frame("x")];
        let plain: Vec<u8> = frames.concat();
        let framed: Vec<u8> = frames.iter().flat_map(|f| prefixed(f)).collect();
        let expected: Vec<Split> = frames
            .iter()
            .map(|f| Split::Frame(Bytes::copy_from_slice(f)))
            .collect();
        for chunk in [1, 2, 3, 7, 64, 4096] {
            assert_eq!(
                split_all(&plain, chunk, 1 << 20).unwrap(),
                expected,
                "plain, chunk {chunk}"
            );
            assert_eq!(
                split_all(&framed, chunk, 1 << 20).unwrap(),
                expected,
                "prefixed, chunk {chunk}"
            );
        }
    }

    #[test]
    fn detection_is_per_splitter() {
        let mut splitter = FrameSplitter::new(1 << 20);
        let mut buf = BytesMut::from(&prefixed(&frame("t"))[..]);
        assert!(matches!(splitter.next(&mut buf), Ok(Some(Split::Frame(_)))));
        assert_eq!(splitter.framing(), Some(Framing::LengthPrefixed));
        let mut fresh = FrameSplitter::new(1 << 20);
        let mut buf = BytesMut::from(&frame("t")[..]);
        assert!(matches!(fresh.next(&mut buf), Ok(Some(Split::Frame(_)))));
        assert_eq!(fresh.framing(), Some(Framing::Plain));
    }

    /// A frame whose body carries `pad` bytes after its tag.
    fn big_frame(tag: &str, pad: usize) -> Vec<u8> {
        let mut body = tag.as_bytes().to_vec();
        body.extend_from_slice(b"\n\n");
        body.extend(std::iter::repeat_n(b'x', pad));
        let mut out = b"\x82\xa4head\x80\xa4body\xc6".to_vec();
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn prefixed_oversize_is_skipped_by_length_with_its_head_and_the_next_frame_survives() {
        let big = big_frame("salt/job/1/ret/web1", 5000);
        let good = frame("after");
        let stream = [prefixed(&big), prefixed(&good)].concat();
        for chunk in [100, 10_000] {
            let out = split_all(&stream, chunk, 1000).unwrap();
            let [Split::Skipped { declared_len, head }, Split::Frame(next)] = &out[..] else {
                panic!("chunk {chunk}: {out:?}")
            };
            assert_eq!(*declared_len, big.len() as u64);
            assert!(big.starts_with(head), "chunk {chunk}");
            assert_eq!(&next[..], &good[..]);
        }
    }

    #[test]
    fn a_prefix_not_followed_by_an_envelope_is_garbage_not_a_length_to_skip() {
        let mut splitter = FrameSplitter::new(1 << 20);
        // The first frame establishes the prefixed form; then 4 GiB - 1 is claimed
        // by bytes that are no event.
        let mut buf = BytesMut::from(
            &[
                prefixed(&frame("t")),
                vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6],
            ]
            .concat()[..],
        );
        assert!(matches!(splitter.next(&mut buf), Ok(Some(Split::Frame(_)))));
        assert_eq!(
            splitter.next(&mut buf),
            Err(FramingError::BadPrefix {
                declared_len: u32::MAX as u64
            })
        );
        assert!(buf.capacity() < 1 << 20, "nothing sized by the claim");
        for garbage in [
            vec![0, 0, 0, 0],
            vec![0, 0x20, 0, 3, 0x82, 0xa4, b'h', b'o', b'x', b'x'],
            vec![0x7f, 0, 1, 0, 0x93, 1, 2, 3, 4, 5],
        ] {
            let mut splitter = FrameSplitter::new(1 << 20);
            let mut buf = BytesMut::from(&[prefixed(&frame("t")), garbage.clone()].concat()[..]);
            assert!(matches!(splitter.next(&mut buf), Ok(Some(Split::Frame(_)))));
            assert!(
                matches!(splitter.next(&mut buf), Err(FramingError::BadPrefix { .. })),
                "{garbage:?}"
            );
        }
    }

    #[test]
    fn a_frame_begun_and_not_finished_is_mid_frame() {
        let mut splitter = FrameSplitter::new(1 << 20);
        let whole = prefixed(&frame("t"));
        let mut buf = BytesMut::from(&whole[..whole.len() - 1]);
        assert_eq!(splitter.next(&mut buf), Ok(None));
        assert!(splitter.mid_frame(&buf));
        buf.extend_from_slice(&whole[whole.len() - 1..]);
        assert!(matches!(splitter.next(&mut buf), Ok(Some(Split::Frame(_)))));
        assert!(!splitter.mid_frame(&buf));
        // A skipped frame whose bytes never come is mid-frame too.
        let mut buf = BytesMut::from(&prefixed(&big_frame("big", 5000))[..100]);
        let mut small = FrameSplitter::new(1000);
        assert!(matches!(
            small.next(&mut buf),
            Ok(Some(Split::Skipped { .. }))
        ));
        assert!(small.mid_frame(&buf));
    }

    #[test]
    fn plain_garbage_is_a_desync_error() {
        let stream = [frame("ok"), vec![0xc1, 0, 0]].concat();
        assert_eq!(
            split_all(&stream, 4096, 1 << 20),
            Err(FramingError::NotAMap { byte: 0xc1 })
        );
        let bad_inside = [0x81, 0xc1];
        assert_eq!(
            split_all(&bad_inside, 4096, 1 << 20),
            Err(FramingError::InvalidMsgpack { offset: 1 })
        );
    }

    #[test]
    fn plain_oversize_is_reported_before_its_bytes_arrive() {
        // A map whose body declares 10 MiB, against a 1 MiB cap; only the header is sent.
        let header = [
            0x81, 0xa4, b'b', b'o', b'd', b'y', 0xc6, 0x00, 0xa0, 0x00, 0x00,
        ];
        let err = split_all(&header, 4096, 1 << 20).unwrap_err();
        assert!(matches!(err, FramingError::TooLarge { .. }), "{err:?}");
    }
}
