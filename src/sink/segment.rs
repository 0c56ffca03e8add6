//! The spool's file format. A segment holds one batch: a 16-byte header, then one
//! frame per record, each with its own CRC, so a damaged file gives up only the
//! records that are damaged.
//!
//! ```text
//! header  "SSPOOL01" (8 bytes) | encoding (1: ndjson, 2: clickhouse) | 7 zero bytes
//! record  length (u32 LE) | crc32 of the payload (u32 LE) | payload (one encoded line)
//! ```
//!
//! A segment is written by appending frames (one `write` per event's records),
//! then sealed (fsync, rename); a process killed mid-batch leaves whole frames in
//! the page cache, and a machine that lost power may leave a torn last frame,
//! which recovery cuts off.

use super::encode::Encoding;

pub const HEADER_LEN: usize = 16;
const MAGIC: &[u8; 8] = b"SSPOOL01";
const FRAME_OVERHEAD: usize = 8;

/// Largest record a frame may hold; a length above it is damage, not data.
pub const MAX_RECORD_BYTES: usize = 64 << 20;

pub fn header(encoding: Encoding) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(MAGIC);
    header[8] = match encoding {
        Encoding::Ndjson => 1,
        Encoding::ClickHouse => 2,
        Encoding::Otlp => 3,
        Encoding::OtlpSpans => 4,
    };
    header
}

/// Appends one record's frame to `out`.
pub fn push_frame(payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// The bytes a record takes in a segment.
pub fn framed_len(payload_len: usize) -> usize {
    payload_len + FRAME_OVERHEAD
}

/// What a segment holds.
#[derive(Debug, PartialEq, Eq)]
pub struct Segment {
    pub encoding: Encoding,
    /// The records' payloads, concatenated: the request body.
    pub body: Vec<u8>,
    pub records: u32,
    /// Stretches of damage (a frame whose CRC did not match, or whose length could
    /// not be true), each skipped to the next frame that checks out.
    pub corrupt_records: u32,
    /// The header was damaged: the encoding is the spool's, not the file's.
    pub header_damaged: bool,
    /// Bytes of an unfinished frame at the end.
    pub torn_tail_bytes: usize,
    /// Where the last good frame ends (to cut a torn tail off).
    pub valid_len: usize,
}

impl Segment {
    /// Whether anything in it was damaged (besides a torn tail).
    pub fn damaged(&self) -> bool {
        self.corrupt_records > 0 || self.header_damaged
    }
}

/// The frame at `at`, if one whole frame that checks out starts there: its
/// payload and where it ends. `resync`: looking for a frame past damage, where
/// a record must also look like one (an encoded line ends with a newline).
fn frame_at(bytes: &[u8], at: usize, resync: bool) -> Option<(&[u8], usize)> {
    let rest = bytes.get(at..)?;
    let head = rest.get(..FRAME_OVERHEAD)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if len > MAX_RECORD_BYTES || (resync && len == 0) {
        return None;
    }
    let payload = rest.get(FRAME_OVERHEAD..FRAME_OVERHEAD + len)?;
    if resync && payload.last() != Some(&b'\n') {
        return None;
    }
    (crc32fast::hash(payload) == crc).then_some((payload, at + FRAME_OVERHEAD + len))
}

/// The next offset after `from` where a whole frame checks out.
fn next_frame(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len().saturating_sub(FRAME_OVERHEAD))
        .find(|&at| frame_at(bytes, at, true).is_some())
}

/// Decodes a segment, keeping every frame that checks out. Damage (a length or
/// a CRC that is wrong) costs only the damaged bytes: the read goes on at the
/// next offset where a whole frame checks out. A damaged header costs nothing
/// but the encoding it named: `fallback` (the spool's own) is taken instead. A
/// frame cut by the end of the file with nothing good after it is a torn tail
/// (a power loss mid-write), measured, not counted as damage.
pub fn decode(bytes: &[u8], fallback: Encoding) -> Segment {
    let encoding = match (bytes.get(..8), bytes.get(8)) {
        (Some(magic), Some(1)) if magic == MAGIC => Some(Encoding::Ndjson),
        (Some(magic), Some(2)) if magic == MAGIC => Some(Encoding::ClickHouse),
        (Some(magic), Some(3)) if magic == MAGIC => Some(Encoding::Otlp),
        (Some(magic), Some(4)) if magic == MAGIC => Some(Encoding::OtlpSpans),
        _ => None,
    };
    let mut segment = Segment {
        encoding: encoding.unwrap_or(fallback),
        body: Vec::with_capacity(bytes.len()),
        records: 0,
        corrupt_records: 0,
        header_damaged: encoding.is_none(),
        torn_tail_bytes: 0,
        valid_len: HEADER_LEN.min(bytes.len()),
    };
    // A damaged header: the first frame is looked for from the start.
    let mut at = if encoding.is_some() {
        HEADER_LEN
    } else {
        next_frame(bytes, 0).unwrap_or(bytes.len())
    };
    while at < bytes.len() {
        if let Some((payload, end)) = frame_at(bytes, at, false) {
            segment.body.extend_from_slice(payload);
            segment.records += 1;
            segment.valid_len = end;
            at = end;
            continue;
        }
        match next_frame(bytes, at + 1) {
            Some(next) => {
                segment.corrupt_records += 1;
                at = next;
            }
            None if is_torn_tail(bytes, at) => {
                segment.torn_tail_bytes = bytes.len() - at;
                break;
            }
            None => {
                segment.corrupt_records += 1;
                break;
            }
        }
    }
    segment
}

/// A frame that begins at `at` and is cut by the end of the file: a header
/// that claims more bytes than are left (a write torn by a power loss).
fn is_torn_tail(bytes: &[u8], at: usize) -> bool {
    let rest = &bytes[at..];
    if rest.len() < FRAME_OVERHEAD {
        return true;
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    len <= MAX_RECORD_BYTES && rest.len() < FRAME_OVERHEAD + len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment_of(records: &[&[u8]]) -> Vec<u8> {
        let mut bytes = header(Encoding::Ndjson).to_vec();
        for record in records {
            push_frame(record, &mut bytes);
        }
        bytes
    }

    #[test]
    fn records_come_back_as_one_body() {
        let bytes = segment_of(&[b"{\"a\":1}\n", b"{\"b\":2}\n"]);
        let segment = decode(&bytes, Encoding::ClickHouse);
        assert_eq!(segment.body, b"{\"a\":1}\n{\"b\":2}\n");
        assert_eq!(segment.records, 2);
        assert_eq!(segment.corrupt_records, 0);
        assert_eq!(segment.valid_len, bytes.len());
        assert_eq!(
            segment.encoding,
            Encoding::Ndjson,
            "the header's, not the fallback"
        );
        assert!(!segment.damaged());
    }

    #[test]
    fn a_flipped_bit_costs_one_record() {
        let mut bytes = segment_of(&[b"first\n", b"second\n", b"third\n"]);
        let second_payload = HEADER_LEN + framed_len(6) + FRAME_OVERHEAD;
        bytes[second_payload] ^= 0x20;
        let segment = decode(&bytes, Encoding::Ndjson);
        assert_eq!(segment.body, b"first\nthird\n");
        assert_eq!(segment.corrupt_records, 1);
        assert_eq!(segment.records, 2);
    }

    #[test]
    fn a_torn_tail_is_measured_not_read() {
        let mut bytes = segment_of(&[b"whole\n", b"torn record\n"]);
        bytes.truncate(bytes.len() - 3);
        let segment = decode(&bytes, Encoding::Ndjson);
        assert_eq!(segment.body, b"whole\n");
        assert_eq!(segment.torn_tail_bytes, framed_len(12) - 3);
        assert_eq!(segment.valid_len, HEADER_LEN + framed_len(6));
        assert_eq!(segment.corrupt_records, 0);
    }

    #[test]
    fn a_damaged_length_costs_its_record_and_the_rest_are_found_again() {
        let records: Vec<Vec<u8>> = (0..50)
            .map(|i| format!("record {i}\n").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        for damage in [0xff, 0x01, 0x7f] {
            let mut bytes = segment_of(&refs);
            let third = HEADER_LEN + framed_len(9) * 2;
            bytes[third + 3] = damage;
            let segment = decode(&bytes, Encoding::Ndjson);
            assert_eq!(segment.records, 49, "damage {damage:#x}");
            assert_eq!(segment.corrupt_records, 1, "damage {damage:#x}");
            assert!(!String::from_utf8_lossy(&segment.body).contains("record 2\n"));
            assert!(String::from_utf8_lossy(&segment.body).ends_with("record 49\n"));
        }
    }

    #[test]
    fn a_damaged_header_keeps_every_record_under_the_spools_encoding() {
        let mut bytes = segment_of(&[b"one\n", b"two\n"]);
        bytes[2] = b'X';
        bytes[8] = 9;
        let segment = decode(&bytes, Encoding::ClickHouse);
        assert_eq!(
            (segment.records, segment.encoding, segment.header_damaged),
            (2, Encoding::ClickHouse, true)
        );
        assert_eq!(segment.body, b"one\ntwo\n");
        // A file that is no segment at all holds no record.
        let other = decode(b"hello, this is not a spool file", Encoding::Ndjson);
        assert_eq!(other.records, 0);
        assert!(other.damaged());
    }
}
