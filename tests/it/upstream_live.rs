//! Durable delivery against a real Salt master: a real ClickHouse receives a run's
//! records through the `clickhouse` encoding, is stopped mid-run and started
//! again, and still ends with every record exactly once after dedup by id; the
//! shipped schema and fleet queries run against it. And saltsight SIGKILLed while
//! a request is in flight delivers everything after a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use saltsight::lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::clickhouse::{ClickHouse, packaging, statements};
use crate::support::upstream::{Reply, Upstream};
use crate::support::{Received, Saltsight, lab_lock, read_records, record_ids, wait_line};

fn write_config(lab: &Lab, dir: &Path, output: &str) -> String {
    let config = dir.join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"test.*\" = \"5s\", \"state.*\" = \"60s\", \"cmd.*\" = \"30s\" }}\n[spool]\ndir = {:?}\n\n[[output]]\ntype = \"stdout\"\n\n[[output]]\n{output}batch_max_age = \"200ms\"\nretry_min = \"100ms\"\nretry_max = \"1s\"\n",
            lab.master_config().display().to_string(),
            dir.join("spool").display().to_string(),
        ),
    )
    .expect("write config");
    config.display().to_string()
}

fn completed(seen: &[Received], fun: &str) -> usize {
    seen.iter()
        .filter(|r| r.record["kind"] == "job_completed" && r.record["fun"] == fun)
        .count()
}

fn salt(lab: &Lab, args: &[&str]) {
    let out = lab.salt(args).expect("salt runs");
    // A failing state exits non-zero; only a CLI that could not talk fails here.
    assert!(
        out.status.code().is_some(),
        "salt {args:?} was killed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn row_with<'a>(rows: &'a [Value], field: &str, value: &str) -> &'a Value {
    rows.iter()
        .find(|r| r[field] == value)
        .unwrap_or_else(|| panic!("no row with {field} = {value}: {rows:?}"))
}

#[test]
fn clickhouse_gets_every_record_of_a_real_run_across_an_outage() {
    let _lock = lab_lock();
    let mut ch = ClickHouse::start();
    let lab = Lab::start(LabOptions::default()).expect("lab starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        &lab,
        dir.path(),
        &format!(
            "type = \"http\"\nname = \"clickhouse\"\nencoding = \"clickhouse\"\nurl = {:?}\n",
            ch.url()
        ),
    );
    let mut run = Saltsight::spawn_connected(&["--config", &config, "run"]);
    let mut seen = Vec::new();

    // Upstream up: a failing state run with a release id, and a target that
    // does not exist (a missing return).
    salt(
        &lab,
        &[
            "*",
            "state.apply",
            "fail",
            "--metadata",
            r#"{"release": "r7"}"#,
        ],
    );
    salt(&lab, &["-L", "web1,ghost9", "test.ping"]);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        completed(s, "state.apply") == 1
            && s.iter()
                .any(|r| r.record["kind"] == "minion_missing" && r.record["minion"] == "ghost9")
    })
    .expect("the first jobs' records");
    ch.wait_stored(&record_ids(&seen), Duration::from_secs(30));

    // Upstream down: records pile up in the spool while jobs go on.
    ch.stop();
    salt(&lab, &["*", "cmd.run", "echo during the outage"]);
    salt(&lab, &["*", "test.ping"]);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        completed(s, "cmd.run") == 1 && completed(s, "test.ping") == 2
    })
    .expect("the outage jobs' records");
    let mut log = Vec::new();
    wait_line(&run.stderr, &mut log, Duration::from_secs(20), |l| {
        l.contains("Upstream did not take the batch; retrying.")
    })
    .expect("saltsight retries while ClickHouse is down");
    std::thread::sleep(Duration::from_secs(2));

    // Upstream back: everything arrives; after dedup by id, exactly what was emitted.
    ch.resume();
    let emitted = record_ids(&seen);
    ch.wait_stored(&emitted, Duration::from_secs(60));
    let counts =
        ch.rows("SELECT count(DISTINCT id) AS ids, count() AS rows FROM saltsight.records");
    assert_eq!(counts[0]["ids"], emitted.len() as u64);
    let deduped = ch.rows("SELECT count() AS n FROM saltsight.records FINAL");
    assert_eq!(deduped[0]["n"], emitted.len() as u64, "{counts:?}");
    // Each stored record is the one emitted, field for field.
    let stored = ch.rows("SELECT id, record FROM saltsight.records FINAL");
    let by_id: BTreeMap<&str, &Value> = seen
        .iter()
        .map(|r| (r.record["id"].as_str().expect("id"), &r.record))
        .collect();
    for row in &stored {
        let record: Value =
            serde_json::from_str(row["record"].as_str().expect("record text")).expect("json");
        assert_eq!(
            &&record,
            by_id.get(row["id"].as_str().expect("id")).expect("emitted")
        );
    }

    // The shipped fleet queries, on this run.
    let queries = statements(&packaging("legacy/queries.sql"));
    assert_eq!(queries.len(), 4);
    let top = ch.rows(&queries[0]);
    let failing = row_with(&top, "state_id", "lab_failing_cmd");
    assert_eq!(failing["sls"], "fail");
    assert_eq!(failing["category"], "command");
    assert_eq!(failing["state_function"], "cmd.run");
    assert_eq!(failing["minions"], 3);
    assert_eq!(failing["masters"], 1);
    let missing = ch.rows(&queries[1]);
    let ghost = row_with(&missing, "minion", "ghost9");
    assert_eq!(ghost["reason"], "not_connected");
    assert_eq!(ghost["missing"], 1);
    let groups = ch.rows(&queries[2]);
    let group = row_with(&groups, "state_id", "lab_failing_cmd");
    assert_eq!(group["minions"], 3);
    assert_eq!(group["masters"], 1);
    assert_eq!(group["on_masters"], serde_json::json!(["lab"]));
    let releases = ch.rows(&queries[3]);
    let r7 = row_with(&releases, "release", "r7");
    assert_eq!(r7["failed_returns"], 3);

    let status = run
        .terminate(Duration::from_secs(6))
        .expect("exits on SIGTERM");
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_sigkilled_agent_delivers_every_record_after_a_restart() {
    let _lock = lab_lock();
    // Every answer is held: the first batch is in flight when saltsight dies.
    let upstream = Upstream::start(
        Vec::new(),
        Reply::status(200).hold(Duration::from_secs(120)),
    );
    let lab = Lab::start(LabOptions::default()).expect("lab starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        &lab,
        dir.path(),
        &format!(
            "type = \"http\"\nname = \"up\"\nurl = {:?}\n",
            upstream.url()
        ),
    );
    let mut run = Saltsight::spawn_connected(&["--config", &config, "run"]);
    let mut seen = Vec::new();
    salt(&lab, &["*", "state.apply", "fail"]);
    salt(&lab, &["*", "cmd.run", "echo before the kill"]);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        completed(s, "state.apply") == 1 && completed(s, "cmd.run") == 1
    })
    .expect("the jobs' records");
    upstream.wait(Duration::from_secs(10), |r| !r.is_empty());
    // SIGKILL, mid-send; then every line it wrote before dying.
    run.kill();
    while let Ok(line) = run.stdout.recv_timeout(Duration::from_millis(500)) {
        if let Ok(record) = serde_json::from_str(&line.text) {
            seen.push(Received {
                record,
                wall: line.wall,
            });
        }
    }
    let emitted = record_ids(&seen);
    assert!(emitted.len() >= 10, "{} records", emitted.len());

    upstream.set_default(Reply::status(200));
    let mut again = Saltsight::spawn(&["--config", &config, "run"]);
    let mut log = Vec::new();
    wait_line(&again.stderr, &mut log, Duration::from_secs(10), |l| {
        l.contains("Spool holds records of an earlier run")
    })
    .expect("the restart finds the spool");
    let requests = upstream.wait(Duration::from_secs(30), |requests| {
        let got: BTreeSet<String> = requests
            .iter()
            .filter(|r| r.answered == 200)
            .flat_map(|r| r.records())
            .map(|v| v["id"].as_str().expect("id").to_owned())
            .collect();
        emitted.is_subset(&got)
    });
    // Duplicates (the batch in flight at the kill) are the same record.
    let by_id: BTreeMap<&str, &Value> = seen
        .iter()
        .map(|r| (r.record["id"].as_str().expect("id"), &r.record))
        .collect();
    for record in requests.iter().flat_map(|r| r.records()) {
        if let Some(emitted) = by_id.get(record["id"].as_str().expect("id")) {
            assert_eq!(&&record, emitted);
        }
    }
    let status = again.terminate(Duration::from_secs(6)).expect("exits");
    assert!(status.success(), "{status:?}");
}
