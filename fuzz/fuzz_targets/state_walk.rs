//! Arbitrary bytes as a minion's return: the state-run walk, the failed states'
//! bounded decode, root causes, render errors and the category rules
//! (`checks::walk_return`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::walk_return(data));
