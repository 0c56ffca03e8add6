//! The history at the scale of a big master (issue 34): generates 7 days of
//! 10,000 minions with a highstate every 30 minutes, 2% failing (about
//! 3.4 M returns) through the store's own write path, then times the query
//! commands a person runs (`job`, `jobs --since 1d`, `minion`, `failures
//! --since 7d`; the release binary, a process each, median of 5), each
//! answer checked. Prints the file's size against `history.max_bytes`.
//!
//!   cargo bench --bench history
//!   cargo bench --bench history -- --minions 1000 --days 1 --times 3
//!
//! Its figures are in the README; `tests/it/history_scale.rs` runs it small.

mod generate;

use generate::{Scale, ask, generate};

fn main() {
    let mut scale = Scale::BIG;
    let mut times = 5;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).and_then(|v| v.parse::<i64>().ok());
        match args[i].as_str() {
            "--minions" => scale.minions = value().expect("--minions N") as usize,
            "--days" => scale.days = value().expect("--days N"),
            "--every" => scale.every_minutes = value().expect("--every MINUTES"),
            "--times" => times = value().expect("--times N") as usize,
            // cargo bench passes --bench.
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("history.db");
    let start = std::time::Instant::now();
    let generated = generate(root, &path, scale);
    let took = start.elapsed();
    let bytes = std::fs::metadata(&path).map_or(0, |m| m.len())
        + std::fs::metadata(dir.path().join("history.db-wal")).map_or(0, |m| m.len());
    println!(
        "{} jobs of {} minions: {} returns ({} failed), {} missing; written in {:.1} s",
        generated.jobs.len(),
        scale.minions,
        generated.returns,
        generated.failed,
        generated.missing,
        took.as_secs_f64()
    );
    println!(
        "history: {:.1} MiB ({:.1} bytes a return; history.max_bytes by default: 1024 MiB)",
        bytes as f64 / (1 << 20) as f64,
        bytes as f64 / generated.returns.max(1) as f64
    );
    let saltsight = std::path::Path::new(env!("CARGO_BIN_EXE_saltsight"));
    println!("\n| question | median of {times} | target |\n|---|---|---|");
    for t in ask(saltsight, dir.path(), scale, &generated, times) {
        println!(
            "| `{}` | {:.0} ms | ≤ {:.0} ms |",
            t.question, t.median_ms, t.target_ms
        );
    }
}
