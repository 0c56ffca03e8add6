//! The history on the master against a real Salt master: a failing state run
//! on every minion, a job with a minion stopped, a render error; then
//! `saltsight job`, `jobs`, `failures` and `minion` answer from the history
//! what the records said (tables for a person, `--json` that round-trips to
//! the records); a SIGKILL of the agent loses at most its unflushed batch.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use saltsight::lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::{Received, Saltsight, ask, jid_from, json, lab_lock, read_records};

fn of<'a>(seen: &'a [Received], kind: &str, jid: &str) -> Vec<&'a Value> {
    seen.iter()
        .map(|r| &r.record)
        .filter(|r| r["kind"] == kind && r["jid"] == jid)
        .collect()
}

fn wait_history(config: &Path, state: &Path, jid: &str) -> Value {
    // The history writes in batches of at most a second: wait on the answer.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (code, text) = ask(config, state, &["job", jid, "--json"]);
        if code == 0 {
            if let Ok(v) = serde_json::from_str::<Value>(&text[text.find('{').unwrap_or(0)..]) {
                if v["open"] == false {
                    return v;
                }
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{jid} never reached the history: {text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_history_answers_what_the_records_said() {
    let _lock = lab_lock();
    let mut lab = Lab::start(LabOptions::default()).expect("lab starts");
    std::fs::write(
        lab.root().join("states/broken.sls"),
        "broken:\n  test.nop:\n    - name: [unclosed\n",
    )
    .expect("broken.sls");
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"test.ping\" = \"5s\" }}\n",
            lab.master_config().display().to_string()
        ),
    )
    .expect("write config");
    let run = Saltsight::spawn_with_env(
        &["--config", config.to_str().expect("utf-8"), "run"],
        &[("SALTSIGHT_STATE_DIR", state.to_str().expect("utf-8"))],
    );
    let mut log = Vec::new();
    crate::support::wait_line(&run.stderr, &mut log, Duration::from_secs(10), |l| {
        l.contains(crate::support::CONNECTED)
    })
    .expect("connected");
    let mut seen = Vec::new();

    // A failing state run on every minion.
    let out = lab
        .salt(&["--show-jid", "*", "state.apply", "fail"])
        .expect("apply fail");
    let failing = jid_from(&out);
    // A ping with db1 stopped.
    lab.stop_minion("db1").expect("stop db1");
    let out = lab.salt(&["--show-jid", "*", "test.ping"]).expect("ping");
    let ping = jid_from(&out);
    // A render error on web1.
    let out = lab
        .salt(&["--show-jid", "web1", "state.apply", "broken"])
        .expect("broken");
    let render = jid_from(&out);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        [&failing, &ping, &render]
            .iter()
            .all(|jid| !of(s, "job_completed", jid).is_empty())
    })
    .expect("three jobs completed");

    // `job`: exactly the minions, reasons and root causes the records name.
    let recap = wait_history(&config, &state, &failing);
    assert_eq!(
        recap["failed"],
        serde_json::json!(["db1", "web1", "web2"]),
        "{recap}"
    );
    let groups: Vec<&Value> = of(&seen, "failure_group", &failing);
    assert_eq!(recap["groups"].as_array().map(Vec::len), Some(groups.len()));
    assert_eq!(recap["groups"][0]["fingerprint"], groups[0]["fingerprint"]);
    assert_eq!(recap["groups"][0]["state_id"], "lab_failing_cmd");
    assert_eq!(recap["groups"][0]["count"], 3);
    let recap = wait_history(&config, &state, &ping);
    let missing = of(&seen, "minion_missing", &ping);
    assert_eq!(recap["missing"][0]["minion"], "db1");
    assert_eq!(recap["missing"][0]["reason"], missing[0]["reason"]);
    assert_eq!(recap["succeeded"], serde_json::json!(["web1", "web2"]));
    let recap = wait_history(&config, &state, &render);
    assert_eq!(recap["renders"][0]["sls"], "broken", "{recap}");
    // The table a person reads names the same.
    let (code, table) = ask(&config, &state, &["job", &failing]);
    assert_eq!(code, 0, "{table}");
    for needed in [
        "lab_failing_cmd",
        "3 minions",
        "db1, web1, web2",
        "0 succeeded, 3 failed",
    ] {
        assert!(table.contains(needed), "{needed:?} not in\n{table}");
    }
    let (code, table) = ask(&config, &state, &["job", &ping]);
    assert!(
        code == 0 && table.contains("db1") && table.contains("1 missing"),
        "{table}"
    );
    assert_eq!(
        ask(&config, &state, &["job", "20200101000000000000"]).0,
        2,
        "not found"
    );

    // `jobs`, `failures`, `minion`.
    let listed = json(&config, &state, &["jobs", "--since", "1h"]);
    let jids: BTreeSet<&str> = listed
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|l| l["jid"].as_str())
        .collect();
    for jid in [&failing, &ping, &render] {
        assert!(jids.contains(jid.as_str()), "{jid} in {listed}");
    }
    let failed_only = json(&config, &state, &["jobs", "--failed", "--fun", "test.*"]);
    assert_eq!(
        failed_only.as_array().map(Vec::len),
        Some(1),
        "only the ping missed: {failed_only}"
    );
    let failures = json(&config, &state, &["failures", "--since", "1h"]);
    let top = &failures[0];
    assert_eq!(
        (&top["state_id"], &top["minions"]),
        (&Value::from("lab_failing_cmd"), &Value::from(3)),
        "{failures}"
    );
    let db1 = json(&config, &state, &["minion", "db1"]);
    assert_eq!(db1["streak"], 1, "{db1}");
    assert_eq!(db1["jobs"][0]["jid"], ping.as_str());
    assert!(
        db1["last_success"]["state.apply"].is_null(),
        "db1 only failed state.apply: {db1}"
    );

    // `wait`: the truth of each job as its exit code, for CI.
    let code = |args: &[&str]| ask(&config, &state, args).0;
    assert_eq!(code(&["wait", &failing]), 4, "a state failed");
    assert_eq!(code(&["wait", &render]), 4, "a render failure fails");
    assert_eq!(code(&["wait", &ping]), 5, "db1 did not return");
    assert_eq!(code(&["job", &ping, "--wait"]), 5, "job --wait is wait");
    assert_eq!(
        code(&["wait", "20200101000000000000", "--timeout", "1s"]),
        2,
        "unknown"
    );
    let async_jid = |args: &[&str]| {
        let out = lab.salt(args).expect("salt --async");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .find_map(|l| l.split("job ID: ").nth(1).map(|j| j.trim().to_owned()))
            .unwrap_or_else(|| panic!("no job ID in {text}"))
    };
    // Published now: waited for as its records land.
    let pinged = async_jid(&["--async", "web1", "test.ping"]);
    let (status, recap) = ask(&config, &state, &["wait", &pinged, "--timeout", "60s"]);
    assert!(
        status == 0 && recap.contains("1 succeeded"),
        "{status}: {recap}"
    );
    let sleeping = async_jid(&["--async", "web1", "test.sleep", "30"]);
    let (status, text) = ask(&config, &state, &["wait", &sleeping, "--timeout", "3s"]);
    assert!(
        status == 6 && text.contains("had not finished"),
        "{status}: {text}"
    );

    // SIGKILL: what was written stays; the next run adds to it.
    // Every job is in by now (`wait` saw each of them there).
    let written = json(&config, &state, &["jobs", "--since", "1h"])
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(written, 5, "three jobs, a ping and a sleep");
    kill(run.pid().expect("running"), Signal::SIGKILL).expect("kill");
    drop(run);
    let after = json(&config, &state, &["jobs", "--since", "1h"]);
    assert_eq!(
        after.as_array().map(Vec::len),
        Some(written),
        "the store survived the kill"
    );
    lab.start_minion("db1").expect("restart db1");
}
