//! Rollouts against a real Salt master whose state tree is a git checkout:
//! commit A, a highstate everywhere → A complete 3/3 with its delay; commit B
//! breaks a state on db1 only (a grain condition) → a test=True highstate
//! changes nothing, then a highstate gives B applied 2, failed 1 with its root
//! cause; commit C fixes it → C complete, B superseded with its numbers;
//! commit D with db1 stopped → D pending on db1, stalled after
//! `rollouts.stall_after`. `rollout` explains each from the history: B's failed
//! minion with its root cause, D's pending one with why, C's pull request.

use std::path::Path;
use std::time::Duration;

use saltsight::lab::{Lab, LabOptions};
use serde_json::Value;

use crate::alerts::{NEED_A_WATCHED_STATE_TREE, sample_names};
use crate::support::upstream::get;
use crate::support::{
    Received, Saltsight, ask, git, json, lab_lock, metrics_address_once_connected, read_records,
};

fn commit(states: &Path, web: &str, subject: &str) -> String {
    std::fs::write(states.join("web.sls"), web).expect("write web.sls");
    git(states, &["add", "-A"]);
    git(states, &["commit", "-q", "-m", subject]);
    git(states, &["rev-parse", "HEAD"])
}

const TOP: &str = "base:\n  '*':\n    - web\n";
const OK: &str = "web_ok:\n  test.succeed_without_changes\n";
const BROKEN_ON_DB1: &str = "web_ok:\n  test.succeed_without_changes\n{% if grains['id'] == 'db1' %}\nweb_db1:\n  cmd.run:\n    - name: 'false'\n{% endif %}\n";
const FIXED: &str =
    "web_ok:\n  test.succeed_without_changes\nweb_db1:\n  test.succeed_without_changes\n";
const NEXT: &str = "web_ok:\n  test.succeed_without_changes\nweb_db1:\n  test.succeed_without_changes\nweb_next:\n  test.succeed_without_changes\n";

/// The last `rollout` record of `commit`.
fn rollout<'a>(seen: &'a [Received], commit: &str) -> Option<&'a Value> {
    seen.iter()
        .map(|r| &r.record)
        .rfind(|r| r["kind"] == "rollout" && r["commit"] == commit)
}

/// The `--json` answer to `args` (whatever its exit code) once `done`
/// holds (the history writes in batches of about a second; 10 s is a
/// bound, not a wait).
fn until(config: &Path, state: &Path, args: &[&str], done: &dyn Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut all = args.to_vec();
        all.push("--json");
        let (_, text) = ask(config, state, &all);
        let start = text.find(['{', '[']).expect("JSON");
        let answer: Value = serde_json::Deserializer::from_str(&text[start..])
            .into_iter()
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("no JSON answer: {text}"));
        if done(&answer) {
            return answer;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{args:?} never gave what was awaited: {answer}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn highstate(lab: &Lab, test: bool) {
    let mut args = vec!["*", "state.highstate"];
    if test {
        args.push("test=True");
    }
    lab.salt(&args).expect("highstate");
}

#[test]
fn a_commit_is_followed_from_its_move_to_every_minion() {
    let _lock = lab_lock();
    let mut lab = Lab::start(LabOptions::default()).expect("lab starts");
    let states = lab.root().join("states");
    git(&states, &["init", "-q", "-b", "main"]);
    std::fs::write(states.join("top.sls"), TOP).expect("top");
    let a = commit(&states, OK, "web: A");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"state.*\" = \"20s\" }}\n\
             [metrics]\nlisten_address = \"127.0.0.1:0\"\n\
             [correlate]\npull_request_url = \"https://git.example/{{repo}}/pull/{{number}}\"\n\
             [rollouts]\nstall_after = \"8s\"\n",
            lab.master_config().display().to_string()
        ),
    )
    .expect("write config");
    let state = dir.path().join("state");
    let run = Saltsight::spawn_with_env(
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "--log-format",
            "json",
            "run",
        ],
        &[("SALTSIGHT_STATE_DIR", state.to_str().expect("utf-8"))],
    );
    let metrics = metrics_address_once_connected(&run, &mut Vec::new());
    let mut seen = Vec::new();
    let wait = |seen: &mut Vec<Received>, what: &str, done: &dyn Fn(&[Received]) -> bool| {
        read_records(&run.stdout, seen, Duration::from_secs(90), |s| done(s))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    };

    // A: everywhere, with its delay.
    highstate(&lab, false);
    wait(&mut seen, "A complete", &|s| {
        rollout(s, &a).is_some_and(|r| r["status"] == "complete")
    });
    let done = rollout(&seen, &a).expect("A").clone();
    assert_eq!(
        (&done["known"], &done["applied"]),
        (&Value::from(3), &Value::from(3)),
        "{done}"
    );
    assert!(
        done["delay_from_commit"]["p100_s"].as_f64().is_some(),
        "{done}"
    );
    assert_eq!(
        done["seen_move"], false,
        "A was HEAD when saltsight first read it"
    );

    // B: test=True counts for nothing; then applied on 2, failed on db1.
    let b = commit(&states, BROKEN_ON_DB1, "web: B breaks db1");
    highstate(&lab, true);
    wait(&mut seen, "B opens", &|s| rollout(s, &b).is_some());
    highstate(&lab, false);
    // The history has it as soon as the highstate's job closed, not at the
    // next `update_every` (30 s), and no pending minion is given a reason
    // its run contradicts (issue 68).
    let head = until(&config, &state, &["rollout", "HEAD"], &|v| {
        v["commit"] == b.as_str() && v["applied"] == 2 && v["failed"] == 1
    });
    assert_eq!(head["pending_minions"], serde_json::json!([]), "{head}");
    wait(&mut seen, "B: 2 applied, 1 failed", &|s| {
        rollout(s, &b).is_some_and(|r| r["applied"] == 2 && r["failed"] == 1)
    });
    let partial = rollout(&seen, &b).expect("B").clone();
    assert_eq!(partial["seen_move"], true);
    assert_eq!(partial["changed_sls"], serde_json::json!(["web"]));
    let failed = &partial["sample_failed"][0];
    assert_eq!(failed["minion"], "db1", "{partial}");
    let fingerprint = failed["fingerprint"].as_str().expect("a root cause");
    assert!(
        seen.iter().any(|r| r.record["kind"] == "state_failure"
            && r.record["fingerprint"] == fingerprint
            && r.record["minion"] == "db1"),
        "the rollout names db1's root cause"
    );

    // C fixes it: complete; B superseded with its numbers.
    let c = commit(&states, FIXED, "web: C fixes db1 (#12)");
    highstate(&lab, false);
    wait(&mut seen, "C complete", &|s| {
        rollout(s, &c).is_some_and(|r| r["status"] == "complete")
    });
    let fixed = rollout(&seen, &c).expect("C");
    assert_eq!(
        fixed["pull_request"],
        serde_json::json!({"number": 12, "url": "https://git.example/states/pull/12"}),
        "{fixed}"
    );
    // Fixed everywhere: `status` has nothing failing now, and exits 0;
    // `failures` still lists B's failure, counted once per minion.
    let now = until(&config, &state, &["status"], &|v| {
        v["failing"].as_array().is_some_and(Vec::is_empty)
    });
    assert!(now["failing_since"].is_string(), "{now}");
    let (code, text) = ask(&config, &state, &["status"]);
    assert_eq!(code, 0, "{text}");
    let listed = json(&config, &state, &["failures", "--since", "1h"]);
    let old = listed
        .as_array()
        .and_then(|l| l.iter().find(|f| f["fingerprint"] == fingerprint))
        .unwrap_or_else(|| panic!("B's failure still listed: {listed}"));
    assert_eq!(old["minions"], 1, "{old}");
    let superseded = rollout(&seen, &b).expect("B").clone();
    assert_eq!(
        (
            &superseded["status"],
            &superseded["applied"],
            &superseded["failed"],
            &superseded["superseded_by"]
        ),
        (
            &Value::from("superseded"),
            &Value::from(2),
            &Value::from(1),
            &Value::from(c.as_str())
        ),
        "{superseded}"
    );

    // D with db1 stopped: pending on db1, then stalled.
    lab.stop_minion("db1").expect("stop db1");
    let d = commit(&states, NEXT, "web: D");
    highstate(&lab, false);
    wait(&mut seen, "D stalled", &|s| {
        rollout(s, &d).is_some_and(|r| r["status"] == "stalled")
    });
    let stalled = rollout(&seen, &d).expect("D").clone();
    assert_eq!(
        (&stalled["applied"], &stalled["pending"]),
        (&Value::from(2), &Value::from(1)),
        "{stalled}"
    );
    assert_eq!(stalled["sample_pending"], serde_json::json!(["db1"]));

    // The series the shipped rule and dashboard read, for this state tree.
    let (_, exposition) = get(metrics, "/metrics").expect("scrape");
    let live = sample_names(&exposition);
    for name in NEED_A_WATCHED_STATE_TREE {
        assert!(live.contains(*name), "{name} absent from /metrics");
    }
    assert!(
        exposition
            .lines()
            .any(|l| l.starts_with("saltsight_rollout_stalled{") && l.ends_with(" 1")),
        "D stalled on /metrics: {exposition}"
    );
    assert!(
        exposition
            .lines()
            .any(|l| l.starts_with("saltsight_release_delay_seconds_count{")
                && l.contains("reach=\"100\"")),
        "A's and C's delays observed"
    );

    // The history answers the same: `rollouts` lists each commit as its last
    // record says, and `status` names the stalled one (the history writes in
    // batches: wait on the answer).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let listed = loop {
        let listed = json(&config, &state, &["rollouts"]);
        let stalled = listed.as_array().is_some_and(|l| {
            l.iter()
                .any(|r| r["commit"] == d.as_str() && r["status"] == "stalled")
        });
        if stalled || std::time::Instant::now() > deadline {
            break listed;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let standing: Vec<(String, String)> = listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|r| {
            (
                r["commit"].as_str().unwrap_or("?").to_owned(),
                r["status"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        standing,
        vec![
            (d.clone(), "stalled".into()),
            (c.clone(), "complete".into()),
            (b.clone(), "superseded".into()),
            (a.clone(), "complete".into()),
        ],
        "newest first"
    );
    let (code, text) = ask(&config, &state, &["status"]);
    assert!(
        code == 1 && text.contains("Rollout stalled") && text.contains(&d[..10]),
        "{code}: {text}"
    );
    let (code, table) = ask(&config, &state, &["rollouts", "--repo", "states"]);
    assert!(
        code == 0 && table.contains("superseded by") && table.contains("#12"),
        "{table}"
    );

    // One commit at a time: B's failure with its root cause, D's pending
    // minion with why (stopped: it did not return), C's pull request.
    let b_view = json(&config, &state, &["rollout", &b[..12]]);
    let failed = &b_view["failed_minions"][0];
    assert_eq!(
        (&failed["minion"], &failed["state"], &failed["category"]),
        (
            &Value::from("db1"),
            &Value::from("web:web_db1"),
            &Value::from("command")
        ),
        "{b_view}"
    );
    // db1's return to D's highstate is awaited until its deadline (20 s),
    // then it did not return.
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    let head = loop {
        let head = json(&config, &state, &["rollout", "HEAD"]);
        assert_eq!(head["commit"], d.as_str(), "{head}");
        let why = head["pending_minions"][0]["why"].clone();
        assert!(
            why == "awaiting_return" || why == "missing_from_jobs",
            "{head}"
        );
        if why == "missing_from_jobs" || std::time::Instant::now() > deadline {
            break head;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let pending = &head["pending_minions"][0];
    assert_eq!(
        (&pending["minion"], &pending["why"]),
        (&Value::from("db1"), &Value::from("missing_from_jobs")),
        "{head}"
    );
    assert!(pending["last_state_run"].is_string(), "db1 ran C: {head}");
    let (code, text) = ask(&config, &state, &["rollout", &c[..10]]);
    assert!(
        code == 0 && text.contains("from #12 https://git.example/states/pull/12"),
        "{text}"
    );
    lab.start_minion("db1").expect("restart db1");
}
