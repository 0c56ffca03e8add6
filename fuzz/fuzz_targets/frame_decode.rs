//! Arbitrary bytes as a bus stream: split (in chunks whose size the input picks),
//! decode every frame, render its data as JSON. Nothing may panic, and the splitter
//! must never hold more than the cap plus one read.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use saltsight::bus::framing::{FrameSplitter, Split};
use saltsight::event::{self, json::to_json};

const CAP: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk_seed, stream)) = data.split_first() else { return };
    let chunk = usize::from(chunk_seed).max(1);
    let mut splitter = FrameSplitter::new(CAP);
    let mut buf = BytesMut::new();
    for piece in stream.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match splitter.next(&mut buf) {
                Ok(Some(Split::Frame(frame))) => {
                    assert!(frame.len() <= CAP);
                    if let Ok(event) = event::decode(&frame) {
                        let _ = to_json(event.data);
                    }
                }
                Ok(Some(Split::Skipped { .. })) => {}
                Ok(None) => break,
                Err(_) => return, // live, the reader reconnects
            }
        }
        assert!(buf.len() <= CAP + chunk + 4);
    }
});
