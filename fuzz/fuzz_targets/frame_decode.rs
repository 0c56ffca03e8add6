//! Arbitrary bytes as a bus stream: split (in chunks whose size the first byte
//! picks), decode every frame, render its data as JSON (`checks::split_and_decode`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

const CAP: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, stream)) = data.split_first() else {
        return;
    };
    checks::split_and_decode(stream, usize::from(chunk), CAP);
});
