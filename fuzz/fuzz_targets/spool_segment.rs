//! Arbitrary bytes as a spool file: the decoder keeps only frames that check
//! out, never panics, and never gives back more than the file held
//! (`checks::read_spool`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::read_spool(data));
