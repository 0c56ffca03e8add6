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

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SegmentError {
    #[error("not a spool segment (no SSPOOL01 header)")]
    BadHeader,
    #[error("unknown encoding byte {0} in the segment header")]
    UnknownEncoding(u8),
}

/// What a segment holds.
#[derive(Debug, PartialEq, Eq)]
pub struct Segment {
    pub encoding: Encoding,
    /// The records' payloads, concatenated: the request body.
    pub body: Vec<u8>,
    pub records: u32,
    /// Frames whose CRC did not match, or whose length could not be true.
    pub corrupt_records: u32,
    /// Bytes of an unfinished frame at the end.
    pub torn_tail_bytes: usize,
    /// Where the last good frame ends (to cut a torn tail off).
    pub valid_len: usize,
}

pub fn decode(bytes: &[u8]) -> Result<Segment, SegmentError> {
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(SegmentError::BadHeader);
    }
    let encoding = match bytes[8] {
        1 => Encoding::Ndjson,
        2 => Encoding::ClickHouse,
        other => return Err(SegmentError::UnknownEncoding(other)),
    };
    let mut segment = Segment {
        encoding,
        body: Vec::with_capacity(bytes.len()),
        records: 0,
        corrupt_records: 0,
        torn_tail_bytes: 0,
        valid_len: HEADER_LEN,
    };
    let mut at = HEADER_LEN;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < FRAME_OVERHEAD {
            segment.torn_tail_bytes = rest.len();
            break;
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if len > MAX_RECORD_BYTES {
            // The length itself is damaged: nothing after it can be framed.
            segment.corrupt_records += 1;
            break;
        }
        if rest.len() < FRAME_OVERHEAD + len {
            segment.torn_tail_bytes = rest.len();
            break;
        }
        let payload = &rest[FRAME_OVERHEAD..FRAME_OVERHEAD + len];
        at += FRAME_OVERHEAD + len;
        if crc32fast::hash(payload) == crc {
            segment.body.extend_from_slice(payload);
            segment.records += 1;
            segment.valid_len = at;
        } else {
            segment.corrupt_records += 1;
        }
    }
    Ok(segment)
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
        let segment = decode(&bytes).unwrap();
        assert_eq!(segment.body, b"{\"a\":1}\n{\"b\":2}\n");
        assert_eq!(segment.records, 2);
        assert_eq!(segment.corrupt_records, 0);
        assert_eq!(segment.valid_len, bytes.len());
        assert_eq!(segment.encoding, Encoding::Ndjson);
    }

    #[test]
    fn a_flipped_bit_costs_one_record() {
        let mut bytes = segment_of(&[b"first\n", b"second\n", b"third\n"]);
        let second_payload = HEADER_LEN + framed_len(6) + FRAME_OVERHEAD;
        bytes[second_payload] ^= 0x20;
        let segment = decode(&bytes).unwrap();
        assert_eq!(segment.body, b"first\nthird\n");
        assert_eq!(segment.corrupt_records, 1);
        assert_eq!(segment.records, 2);
    }

    #[test]
    fn a_torn_tail_is_measured_not_read() {
        let mut bytes = segment_of(&[b"whole\n", b"torn record\n"]);
        bytes.truncate(bytes.len() - 3);
        let segment = decode(&bytes).unwrap();
        assert_eq!(segment.body, b"whole\n");
        assert_eq!(segment.torn_tail_bytes, framed_len(12) - 3);
        assert_eq!(segment.valid_len, HEADER_LEN + framed_len(6));
        assert_eq!(segment.corrupt_records, 0);
    }

    #[test]
    fn a_damaged_length_stops_the_read() {
        let mut bytes = segment_of(&[b"ok\n", b"next\n"]);
        let second = HEADER_LEN + framed_len(3);
        bytes[second + 3] = 0xff;
        let segment = decode(&bytes).unwrap();
        assert_eq!(segment.body, b"ok\n");
        assert_eq!(segment.corrupt_records, 1);
    }

    #[test]
    fn foreign_files_are_refused() {
        assert_eq!(decode(b"hello"), Err(SegmentError::BadHeader));
        let mut bytes = segment_of(&[]);
        bytes[8] = 9;
        assert_eq!(decode(&bytes), Err(SegmentError::UnknownEncoding(9)));
    }
}
