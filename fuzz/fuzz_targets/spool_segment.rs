//! Arbitrary bytes as a spool file: the decoder keeps only frames that check
//! out, never panics, and never gives back more than the file held.
#![no_main]

use libfuzzer_sys::fuzz_target;
use saltsight::sink::encode::Encoding;
use saltsight::sink::segment::decode;

fuzz_target!(|data: &[u8]| {
    let segment = decode(data, Encoding::Ndjson);
    assert!(segment.body.len() <= data.len());
    assert!(segment.valid_len <= data.len());
    assert!(segment.torn_tail_bytes <= data.len());
});
