//! The history's scale benchmark (`benches/history`) runs: its generator
//! writes a small fleet's week through the store's own batches, and each
//! question it times is asked of the real binary and its answer checked
//! (every minion of a job accounted for, the day's jobs, a minion's jobs,
//! the root cause). Nothing here is timed: the figures are the benchmark's.

#[path = "../../benches/history/generate.rs"]
mod generate;

use generate::{Scale, ask, generate};

#[test]
fn the_history_benchmark_generates_a_fleet_and_every_question_answers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let scale = Scale {
        minions: 1000,
        days: 2,
        every_minutes: 120,
        ..Scale::BIG
    };
    let generated = generate(root, &dir.path().join("history.db"), scale);
    assert_eq!(generated.jobs.len(), 24);
    assert!(generated.failed > 0 && generated.missing > 0);
    assert_eq!(
        generated.returns + generated.missing,
        24 * 1000,
        "every minion answers or is missing"
    );
    let saltsight = std::path::Path::new(env!("CARGO_BIN_EXE_saltsight"));
    let timings = ask(saltsight, dir.path(), scale, &generated, 1);
    assert_eq!(timings.len(), 4);
    for t in timings {
        // Reported, not judged: a debug build on a shared machine.
        eprintln!(
            "{}: {:.0} ms (the release target: {:.0} ms)",
            t.question, t.median_ms, t.target_ms
        );
    }
}
