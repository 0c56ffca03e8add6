//! Every capture in tests/fixtures/captures (recorded from real masters: 3006.25,
//! 3006.30 with length prefixes, 3007.17, 3008.3 on ipc and tcp) replayed through
//! `saltsight tail --from FILE --json` gives exactly the frames its `.jsonl` lists:
//! the same tags in the same order, and data that round-trips to the same JSON;
//! and replays to exactly its golden records (`support::replay`).

use std::process::Command;

use serde_json::Value;

use crate::support::replay::BASE;
use crate::support::{ask, bin, fixture, json, replay};

fn expected(jsonl: &std::path::Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(jsonl)
        .expect("read jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("jsonl line"))
        .filter(|v| v.get("tag").is_some()) // `eof`/`reconnected` markers are not frames
        .map(|v| {
            (
                v["tag"].as_str().expect("tag").to_owned(),
                v["data"].clone(),
            )
        })
        .collect()
}

/// The events as decoded, unredacted: the decoder's fidelity is what is compared.
fn tail_json(bin_path: &std::path::Path) -> Vec<(String, Value)> {
    let out = Command::new(bin())
        .args(["tail", "--json", "--no-redact", "--from"])
        .arg(bin_path)
        .output()
        .expect("run tail");
    assert!(
        out.status.success(),
        "tail --from {} failed: {}",
        bin_path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("json line");
            (
                v["tag"].as_str().expect("tag").to_owned(),
                v["data"].clone(),
            )
        })
        .collect()
}

#[test]
fn every_capture_replays_to_exactly_its_listed_events() {
    let dir = fixture("captures");
    let mut checked = 0;
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("captures dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    names.sort();
    for bin_path in names
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
    {
        let want = expected(&bin_path.with_extension("jsonl"));
        let got = tail_json(bin_path);
        let name = bin_path.file_name().unwrap_or_default().to_string_lossy();
        assert_eq!(got.len(), want.len(), "{name}: event count");
        for (i, ((got_tag, got_data), (want_tag, want_data))) in got.iter().zip(&want).enumerate() {
            assert_eq!(got_tag, want_tag, "{name}: tag of event {i}");
            assert_eq!(
                got_data, want_data,
                "{name}: data of event {i} ({want_tag})"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 37, "captures checked");
}

#[test]
fn the_length_prefixed_and_bare_captures_of_one_scenario_agree() {
    // 3006.30 writes a 4-byte length before each frame; 3006.25 does not. The same
    // scenario gives the same tag shapes either way (minions answer in any order,
    // so the shapes are compared as sorted lists).
    let shapes = |name: &str| -> Vec<String> {
        let mut shapes: Vec<String> = tail_json(&fixture(&format!("captures/{name}")))
            .into_iter()
            .map(|(tag, _)| {
                tag.split('/')
                    .map(|p| {
                        if p.chars().all(|c| c.is_ascii_digit()) {
                            "N"
                        } else {
                            p
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .collect();
        shapes.sort();
        shapes
    };
    let prefixed = shapes("3006.30_ipc_ping_and_fail.bin");
    assert_eq!(prefixed, shapes("3006.25_ipc_ping_and_fail.bin"));
    assert_eq!(prefixed, shapes("3006.30_tcp_ping_and_fail.bin"));
}

#[test]
fn tag_filter_selects_returns_only() {
    let out = Command::new(bin())
        .args(["tail", "--json", "--tag", "salt/job/*/ret/*", "--from"])
        .arg(fixture("captures/3008.3_ipc_state_apply_fail.bin"))
        .output()
        .expect("run tail");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(lines.len(), 3);
    for line in &lines {
        assert_eq!(line["data"]["retcode"], 2);
        assert_eq!(line["data"]["success"], false);
    }
}

#[test]
fn replay_summarises_by_class_and_a_master_restart_dump_has_every_frame() {
    let out = Command::new(bin())
        .args(["replay"])
        .arg(fixture("captures/3008.3_ipc_master_restart.bin"))
        .output()
        .expect("run replay");
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{summary}");
    assert!(
        summary.contains("replayed 20 frames: 20 events"),
        "{summary}"
    );
    assert!(summary.contains("minion_start=6"), "{summary}");
    assert!(summary.contains("decode errors: none"), "{summary}");
}

/// Every capture replays to exactly its golden records
/// (`<capture>.records.jsonl`); `SALTSIGHT_BLESS=1` rewrites them.
#[test]
fn every_capture_replays_to_its_golden_records() {
    let dir = fixture("captures");
    let mut captures: Vec<String> = std::fs::read_dir(&dir)
        .expect("captures")
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".bin").map(str::to_owned)
        })
        .collect();
    captures.sort();
    assert!(captures.len() >= 20, "captures: {captures:?}");
    let mut stale = Vec::new();
    for capture in &captures {
        let records = replay::replay_text(capture, "");
        let golden = replay::golden_path(capture);
        if replay::blessing() {
            std::fs::write(&golden, &records).expect("write golden records");
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        if expected != records {
            let line = expected
                .lines()
                .zip(records.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| expected.lines().count().min(records.lines().count()));
            stale.push(format!(
                "{capture}: differs from line {} (expected {} records, got {}):\n  expected: {}\n  got:      {}",
                line + 1,
                expected.lines().count(),
                records.lines().count(),
                expected.lines().nth(line).unwrap_or("(end)"),
                records.lines().nth(line).unwrap_or("(end)"),
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "golden records differ (SALTSIGHT_BLESS=1 cargo test golden rewrites them; review the diff):\n{}",
        stale.join("\n")
    );
}

/// `replay --history FILE` writes the records into a history as `run` does:
/// the query commands answer from it.
#[test]
fn a_replay_into_a_history_is_asked_like_the_agents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (state, history) = (dir.path().join("state"), dir.path().join("history.db"));
    let config = dir.path().join("saltsight.toml");
    let history_arg = history.display().to_string();
    std::fs::write(
        &config,
        format!("{BASE}[history]\npath = {history_arg:?}\n"),
    )
    .expect("write config");
    let capture = fixture("captures/3006.30_ipc_ping_and_fail.bin");
    let replay = [
        "replay",
        "--history",
        &history_arg,
        capture.to_str().expect("UTF-8 path"),
    ];
    let (code, text) = ask(&config, &state, &replay);
    assert_eq!(code, 0, "{text}");
    let text = json(&config, &state, &["job", "20261121194514344511"]).to_string();
    for minion in ["db1", "web1", "web2"] {
        assert!(text.contains(minion), "{minion} missing: {text}");
    }
    assert!(text.contains("lab_failing_cmd"), "the root cause: {text}");
}
