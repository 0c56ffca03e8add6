//! The checks run on one input by both the libFuzzer targets
//! (`fuzz/fuzz_targets/`, by hand: `scripts/fuzz`) and the bounded mutation
//! suite (`tests/it/mutations.rs`, in every `cargo test`). Written once and
//! compiled into the test suite, so an API they use that changes breaks
//! `cargo test`'s build, not the next fuzz run. Nothing may panic, and each
//! stays within its bounds.
#![allow(dead_code)] // each fuzz target uses one of them

use bytes::{Bytes, BytesMut};
use saltsight::bus::framing::{FrameSplitter, SKIPPED_HEAD_BYTES, Split};
use saltsight::event::{self, json::to_json};
use saltsight::sink::encode::Encoding;
use saltsight::sink::segment;
use saltsight::triage::category::{FailureText, classify};
use saltsight::triage::failures::{
    MAX_DECODED_FAILURES, OUTPUT_MAX, RootScratch, root_causes, walk,
};
use saltsight::triage::render::render_errors;

/// The frames a stream splits into when read `chunk` bytes at a time with a
/// frame cap of `cap` (stopping at a desync, as the reader does before it
/// reconnects). No frame over the cap, no skipped head over its bound, and the
/// splitter never holds more than the cap plus one read.
pub fn split(stream: &[u8], chunk: usize, cap: usize) -> Vec<Bytes> {
    let chunk = chunk.max(1);
    let mut splitter = FrameSplitter::new(cap);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    for piece in stream.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match splitter.next(&mut buf) {
                Ok(Some(Split::Frame(frame))) => {
                    assert!(frame.len() <= cap, "a frame over the cap");
                    frames.push(frame);
                }
                Ok(Some(Split::Skipped { head, .. })) => {
                    assert!(head.len() <= SKIPPED_HEAD_BYTES);
                }
                Ok(None) => break,
                Err(_) => return frames,
            }
        }
        assert!(
            buf.len() <= cap + chunk + 16,
            "the splitter holds {} bytes",
            buf.len()
        );
    }
    frames
}

/// A bus stream split, each frame decoded and its data rendered as JSON, its
/// tag read from its head.
pub fn split_and_decode(stream: &[u8], chunk: usize, cap: usize) {
    for frame in split(stream, chunk, cap) {
        if let Ok(event) = event::decode(&frame) {
            let _ = to_json(event.data);
        }
        let _ = event::tag_of_head(&frame[..frame.len().min(1024)]);
    }
}

/// A minion's return walked as triage walks it: the failed states' bounded
/// decode, their categories, root causes; render errors and theirs.
pub fn walk_return(raw: &[u8]) {
    if let Some(mut run) = walk(raw, true) {
        assert!(run.failed.len() <= MAX_DECODED_FAILURES);
        for state in &run.failed {
            for output in [&state.stdout, &state.stderr] {
                assert!(output.as_ref().is_none_or(|s| s.len() <= OUTPUT_MAX + 4));
            }
            let _ = classify(&FailureText {
                function: &state.function,
                comment: &state.comment,
                stderr: state.stderr.as_deref(),
                stdout: state.stdout.as_deref(),
                exit_code: state.exit_code,
            });
        }
        let _ = root_causes(&mut run.failed, &mut RootScratch::default());
    }
    if let Some(errors) = render_errors(raw, Some(1)) {
        for error in errors {
            let _ = classify(&FailureText::comment(&error.message));
        }
    }
}

/// A spool file read back: never more than the file held, and every record
/// given back a whole line.
pub fn read_spool(bytes: &[u8]) {
    let decoded = segment::decode(bytes, Encoding::Ndjson);
    assert!(decoded.body.len() <= bytes.len());
    assert!(decoded.valid_len <= bytes.len());
    assert!(decoded.torn_tail_bytes <= bytes.len());
    for line in decoded.body.split_inclusive(|b| *b == b'\n') {
        assert!(line.ends_with(b"\n"));
    }
}
