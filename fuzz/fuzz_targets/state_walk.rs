//! Arbitrary bytes as a minion's return: the state-run walk, the failed states'
//! bounded decode, root causes, render errors and the category rules. Nothing
//! may panic, and what is decoded stays within its bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use saltsight::triage::category::classify;
use saltsight::triage::failures::{MAX_DECODED_FAILURES, OUTPUT_MAX, root_causes, walk};
use saltsight::triage::render::render_errors;

fuzz_target!(|data: &[u8]| {
    if let Some(run) = walk(data, true) {
        assert!(run.failed.len() <= MAX_DECODED_FAILURES);
        for state in &run.failed {
            assert!(state.stdout.as_ref().is_none_or(|s| s.len() <= OUTPUT_MAX + 4));
            let _ = classify(&[&state.comment], state.exit_code);
        }
        let _ = root_causes(run.failed);
    }
    if let Some(errors) = render_errors(data, Some(1)) {
        for error in errors {
            let _ = classify(&[&error.message], None);
        }
    }
});
