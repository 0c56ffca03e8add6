//! A bounded mutation suite, run by every `cargo test` (scripts/fuzz runs
//! libFuzzer for longer, by hand): the real captures, their returns and spool
//! files made of their golden records, each mutated (bits flipped, bytes
//! replaced, inserted, deleted, lengths cut, pieces of another input spliced
//! in) and fed to the frame splitter and the decoder, triage's walk of a
//! return, and the spool reader. Nothing may panic, and each stays within its
//! bounds: a splitter buffer within the cap plus a read, frames within the cap,
//! a spool file giving back no more than it holds.

use std::sync::LazyLock;

use proptest::prelude::*;
use saltsight::event::{self, Body};
use saltsight::sink::encode::Encoding;
use saltsight::sink::segment;

use crate::support::fixture;

#[path = "../../fuzz/checks.rs"]
mod checks;

use checks::split;

/// Every capture's bytes (the first 256 KiB: enough frames, bounded work).
static CAPTURES: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    let mut names: Vec<_> = std::fs::read_dir(fixture("captures"))
        .expect("captures")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| {
            let mut bytes = std::fs::read(p).expect("capture");
            bytes.truncate(256 << 10);
            bytes
        })
        .collect()
});

/// The returns in the captures, raw (what triage walks).
static RETURNS: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    let mut returns = Vec::new();
    for capture in CAPTURES.iter() {
        for frame in split(capture, 4096, 64 << 20) {
            if let Ok(event) = event::decode(&frame) {
                if let Body::JobReturn(r) = &event.body {
                    if let Some(raw) = r.ret {
                        returns.push(raw.0.to_vec());
                    }
                }
            }
        }
    }
    assert!(returns.len() > 50, "returns: {}", returns.len());
    returns
});

/// Spool files made of the golden records, in batches of 20.
static SEGMENTS: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    let mut lines = Vec::new();
    for name in [
        "3008.3_ipc_state_apply_fail",
        "3008.3_ipc_highstate",
        "3006.30_ipc_ping_and_fail",
    ] {
        let text = std::fs::read_to_string(fixture(&format!("captures/{name}.records.jsonl")))
            .expect("golden records");
        lines.extend(text.lines().map(|l| format!("{l}\n")));
    }
    lines
        .chunks(20)
        .map(|chunk| {
            let mut bytes = segment::header(Encoding::Ndjson).to_vec();
            for line in chunk {
                segment::push_frame(line.as_bytes(), &mut bytes);
            }
            bytes
        })
        .collect()
});

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, bit: u8 },
    Set { at: usize, byte: u8 },
    Insert { at: usize, bytes: Vec<u8> },
    Delete { at: usize, len: usize },
    Truncate { at: usize },
    Splice { at: usize, from: usize, len: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        (at, 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (
            at,
            prop_oneof![Just(0u8), Just(0xff), Just(0xc1), Just(0x82), any::<u8>()]
        )
            .prop_map(|(at, byte)| Mutation::Set { at, byte }),
        (at, proptest::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (at, 1usize..64).prop_map(|(at, len)| Mutation::Delete { at, len }),
        at.prop_map(|at| Mutation::Truncate { at }),
        (at, any::<usize>(), 1usize..512).prop_map(|(at, from, len)| Mutation::Splice {
            at,
            from,
            len
        }),
    ]
}

fn apply(mut bytes: Vec<u8>, mutations: &[Mutation], donor: &[u8]) -> Vec<u8> {
    for m in mutations {
        if bytes.is_empty() {
            break;
        }
        let n = bytes.len();
        match m {
            Mutation::Flip { at, bit } => bytes[at % n] ^= 1 << bit,
            Mutation::Set { at, byte } => bytes[at % n] = *byte,
            Mutation::Insert { at, bytes: new } => {
                let at = at % n;
                bytes.splice(at..at, new.iter().copied());
            }
            Mutation::Delete { at, len } => {
                let at = at % n;
                bytes.drain(at..(at + len).min(n));
            }
            Mutation::Truncate { at } => bytes.truncate(at % n),
            Mutation::Splice { at, from, len } => {
                if !donor.is_empty() {
                    let from = from % donor.len();
                    let piece = &donor[from..(from + len).min(donor.len())];
                    let at = at % n;
                    bytes.splice(at..at, piece.iter().copied());
                }
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_streams_split_and_decode_within_bounds(
        which in any::<usize>(),
        donor in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..8),
        chunk in 1usize..8192,
        cap_log in 10u32..20,
    ) {
        let captures = &*CAPTURES;
        let stream = apply(
            captures[which % captures.len()].clone(),
            &mutations,
            &captures[donor % captures.len()],
        );
        checks::split_and_decode(&stream, chunk, 1 << cap_log);
    }

    #[test]
    fn mutated_returns_walk_within_bounds(
        which in any::<usize>(),
        donor in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..6),
    ) {
        let returns = &*RETURNS;
        let raw = apply(
            returns[which % returns.len()].clone(),
            &mutations,
            &returns[donor % returns.len()],
        );
        checks::walk_return(&raw);
    }

    #[test]
    fn mutated_spool_files_give_back_no_more_than_they_hold(
        which in any::<usize>(),
        donor in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..6),
    ) {
        let segments = &*SEGMENTS;
        let original = &segments[which % segments.len()];
        let bytes = apply(original.clone(), &mutations, &segments[donor % segments.len()]);
        checks::read_spool(&bytes);
    }
}
