//! The one way tests replay a capture through the binary: `saltsight replay
//! --output stdout` on event time, with `master_id = "lab"`, git correlation off
//! (the captures' state tree is not on this machine) and whatever TOML a test
//! adds; the records come back parsed, in order.
//!
//! Golden files: `tests/fixtures/captures/<capture>.records.jsonl` holds what a
//! capture replays to with no extra config. `SALTSIGHT_BLESS=1 cargo test
//! golden` rewrites them; review the diff like code.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::{bin, fixture};

/// The config every replay starts from.
pub const BASE: &str =
    "master_id = \"lab\"\n[bus]\nendpoint = \"unix:/unused\"\n[correlate]\ndiscover = false\n";

/// Replays `captures/<capture>.bin` (or a path under tests/fixtures when it
/// names a file) with `extra` TOML appended to the base config.
pub fn replay(capture: &str, extra: &str) -> Vec<Value> {
    let text = replay_text(capture, extra);
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record per line"))
        .collect()
}

/// The records as the binary printed them.
pub fn replay_text(capture: &str, extra: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(&config, format!("{BASE}{extra}\n")).expect("write config");
    let out = Command::new(bin())
        .arg("--config")
        .arg(&config)
        .args(["replay", "--output", "stdout"])
        .arg(capture_path(capture))
        .output()
        .expect("run replay");
    assert!(
        out.status.success(),
        "{capture}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 records")
}

/// `captures/<name>.bin`, or the fixture path itself when it has an extension.
pub fn capture_path(capture: &str) -> PathBuf {
    if capture.contains('.') && capture.ends_with(".bin") {
        fixture(capture)
    } else {
        fixture(&format!("captures/{capture}.bin"))
    }
}

/// The golden records file of a capture.
pub fn golden_path(capture: &str) -> PathBuf {
    fixture(&format!("captures/{capture}.records.jsonl"))
}

/// Whether this run rewrites golden files instead of checking them.
pub fn blessing() -> bool {
    std::env::var_os("SALTSIGHT_BLESS").is_some_and(|v| v == "1")
}

/// The records of `kind`.
pub fn of_kind<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["kind"] == kind).collect()
}
