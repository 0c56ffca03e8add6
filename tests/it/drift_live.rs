//! Drift against a real Salt master whose state tree is a git checkout: a
//! highstate everywhere (a commit's changes) and another (a command that
//! changes every run is not drift); a hand edit of a managed file on web1 and a
//! managed directory removed on db1 (the lab runs unprivileged: a directory
//! stands in for a package or a service) → corrected drift on exactly those
//! two, with the file's diff, its secret redacted, and the command judged
//! non-idempotent; a hand edit on web2 seen by a test=True highstate →
//! detected drift; a new commit's changes → intentional, not drift.

use std::path::Path;
use std::time::Duration;

use saltsight::lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::{Received, Saltsight, ask, git, json, lab_lock, read_records};

const SECRET: &str = "s3cr3t-hunter2";

/// `web.sls` (the motd, its text `motd`) and `layout.sls` (a directory and a
/// command with no `unless`), each minion's under `managed/<id>/`.
fn commit(states: &Path, managed: &Path, motd: &str, subject: &str) {
    let dir = format!("{}/{{{{ grains['id'] }}}}", managed.display());
    std::fs::write(
        states.join("top.sls"),
        "base:\n  '*':\n    - web\n    - layout\n",
    )
    .expect("top");
    std::fs::write(
        states.join("web.sls"),
        format!("motd:\n  file.managed:\n    - name: {dir}/motd\n    - contents: \"{motd}\"\n    - makedirs: True\n"),
    )
    .expect("web.sls");
    std::fs::write(
        states.join("layout.sls"),
        format!(
            "cache_dir:\n  file.directory:\n    - name: {dir}/cache\n    - makedirs: True\n\
             stamp:\n  cmd.run:\n    - name: date +%s%N > {dir}/stamp\n"
        ),
    )
    .expect("layout.sls");
    git(states, &["add", "-A"]);
    git(states, &["commit", "-q", "-m", subject]);
}

fn of_kind<'a>(seen: &'a [Received], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    seen.iter()
        .map(|r| &r.record)
        .filter(move |r| r["kind"] == kind)
}

fn highstates_completed(seen: &[Received]) -> usize {
    of_kind(seen, "job_completed")
        .filter(|r| r["fun"] == "state.highstate")
        .count()
}

/// (minion, change, [sls:id]) of every drift record.
fn drifts(seen: &[Received]) -> Vec<(String, String, Vec<String>)> {
    let mut out: Vec<_> = of_kind(seen, "drift")
        .map(|d| {
            let states = d["states"]
                .as_array()
                .map(|s| {
                    s.iter()
                        .map(|s| {
                            format!(
                                "{}:{}",
                                s["sls"].as_str().unwrap_or("?"),
                                s["state_id"].as_str().unwrap_or("?")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            (
                d["minion"].as_str().unwrap_or("?").to_owned(),
                d["change"].as_str().unwrap_or("?").to_owned(),
                states,
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn drift_is_told_from_commits_and_from_a_state_that_never_settles() {
    let _lock = lab_lock();
    let lab = Lab::start(LabOptions::default()).expect("lab starts");
    let states = lab.root().join("states");
    let managed = lab.root().join("managed");
    git(&states, &["init", "-q", "-b", "main"]);
    commit(&states, &managed, "welcome (A)\\n", "A");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"state.*\" = \"20s\" }}\n",
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
    let mut seen = Vec::new();
    let highstate = |seen: &mut Vec<Received>, test: bool| {
        let before = highstates_completed(seen);
        let mut args = vec!["*", "state.highstate"];
        if test {
            args.push("test=True");
        }
        lab.salt(&args).expect("highstate");
        read_records(&run.stdout, seen, Duration::from_secs(90), |s| {
            highstates_completed(s) > before
        })
        .unwrap_or_else(|e| panic!("highstate {}: {e}", before + 1));
    };
    // The subscriber is up once a first job's records come through.
    lab.salt(&["*", "test.ping"]).expect("ping");
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        of_kind(s, "job_completed").count() > 0
    })
    .expect("saltsight follows the bus");

    // A everywhere, then again: its changes are the commit's; the command's
    // second change everywhere is not settled, not drift.
    highstate(&mut seen, false);
    highstate(&mut seen, false);
    assert_eq!(drifts(&seen), vec![], "no drift yet");

    // By hand: web1's motd edited (a secret in it), db1's directory removed.
    std::fs::write(
        managed.join("web1/motd"),
        format!("welcome (A)\ndb_password: {SECRET}\n"),
    )
    .expect("edit motd");
    std::fs::remove_dir(managed.join("db1/cache")).expect("remove db1's directory");
    highstate(&mut seen, false);
    read_records(&run.stdout, &mut seen, Duration::from_secs(30), |s| {
        drifts(s).len() >= 2
    })
    .expect("two drift records");
    assert_eq!(
        drifts(&seen),
        vec![
            (
                "db1".into(),
                "corrected".into(),
                vec!["layout:cache_dir".into()]
            ),
            ("web1".into(), "corrected".into(), vec!["web:motd".into()]),
        ]
    );
    let motd = of_kind(&seen, "drift")
        .find(|d| d["minion"] == "web1")
        .expect("web1's drift");
    let summary = motd["states"][0]["summary"].as_str().expect("a summary");
    assert!(
        summary.contains("db_password"),
        "the diff's lines: {summary}"
    );
    let judged: Vec<&Value> = of_kind(&seen, "non_idempotent").collect();
    assert_eq!(judged.len(), 1, "{judged:?}");
    assert_eq!(
        (&judged[0]["state_id"], &judged[0]["status"]),
        (&Value::from("stamp"), &Value::from("never_settles"))
    );
    assert!(
        judged[0]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("unless")),
        "{}",
        judged[0]
    );

    // By hand on web2, seen by a test=True run: detected, nothing put back.
    std::fs::write(managed.join("web2/motd"), "edited\n").expect("edit web2's motd");
    highstate(&mut seen, true);
    read_records(&run.stdout, &mut seen, Duration::from_secs(30), |s| {
        drifts(s).len() >= 3
    })
    .expect("a detected drift");
    assert!(
        drifts(&seen).contains(&("web2".into(), "detected".into(), vec!["web:motd".into()])),
        "{:?}",
        drifts(&seen)
    );
    // `status` names it (the history writes in batches: wait on the answer).
    let status_until = |done: &dyn Fn(i32, &str) -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (code, text) = ask(&config, &state, &["status"]);
            if done(code, &text) || std::time::Instant::now() > deadline {
                return (code, text);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let (code, text) = status_until(&|_, t| t.contains("web2 web:motd"));
    assert!(
        code == 1 && text.contains("Drift nothing put back: web2 web:motd"),
        "{code}: {text}"
    );

    // B changes the motd: its changes everywhere (web2's edit put back with
    // them) are the commit's, not drift.
    commit(&states, &managed, "welcome (B)\\n", "B");
    highstate(&mut seen, false);
    let (code, text) = status_until(&|code, _| code == 0);
    assert!(
        code == 0 && text.contains("Nothing wrong now."),
        "{code}: {text}"
    );
    assert_eq!(drifts(&seen).len(), 3, "{:?}", drifts(&seen));
    assert_eq!(of_kind(&seen, "non_idempotent").count(), 1);
    let stdout: String = seen.iter().map(|r| r.record.to_string()).collect();
    assert!(
        !stdout.contains(SECRET),
        "the secret in the diff is redacted"
    );
    assert!(
        !stdout.contains("\"state_id\":\"stamp\",\"function\":\"cmd.run\",\"name\""),
        "the command is never drift"
    );

    // The history answers the same: `saltsight drift` (the history writes in
    // batches: wait on the answer), by minion and SLS, and the job's recap.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let answer = loop {
        let answer = json(&config, &state, &["drift"]);
        if answer["drifted"].as_array().is_some_and(|d| d.len() >= 3)
            || std::time::Instant::now() > deadline
        {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let drifted: Vec<(&str, &str, &str)> = answer["drifted"]
        .as_array()
        .expect("drifted")
        .iter()
        .map(|l| {
            (
                l["minion"].as_str().unwrap_or("?"),
                l["change"].as_str().unwrap_or("?"),
                l["state_id"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    // Newest first, by the records' times: web1's and db1's returns of one
    // job come in either order.
    let mut by_time: Vec<(&str, &str, &str, &str)> = of_kind(&seen, "drift")
        .map(|d| {
            (
                d["at"].as_str().unwrap_or("?"),
                d["minion"].as_str().unwrap_or("?"),
                d["change"].as_str().unwrap_or("?"),
                d["states"][0]["state_id"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    by_time.sort_by(|a, b| b.0.cmp(a.0).then(a.1.cmp(b.1)));
    let expected: Vec<(&str, &str, &str)> =
        by_time.iter().map(|(_, m, c, s)| (*m, *c, *s)).collect();
    assert_eq!(
        drifted[0],
        ("web2", "detected", "motd"),
        "the newest, a later job"
    );
    assert_eq!(drifted, expected, "newest first");
    assert_eq!(answer["never_settles"][0]["state_id"], "stamp", "{answer}");
    let web1 = json(
        &config,
        &state,
        &["drift", "--minion", "web1", "--sls", "web"],
    );
    assert_eq!(web1["drifted"].as_array().map(Vec::len), Some(1), "{web1}");
    let jid = of_kind(&seen, "drift")
        .find(|d| d["minion"] == "web1")
        .and_then(|d| d["jid"].as_str())
        .expect("a jid");
    let (code, recap) = ask(&config, &state, &["job", jid]);
    assert_eq!(code, 0, "{recap}");
    assert!(
        recap.contains("2 drift put back") && recap.contains("web:motd"),
        "{recap}"
    );
    assert!(!recap.contains(SECRET), "{recap}");
    let (code, table) = ask(&config, &state, &["drift"]);
    assert!(
        code == 0 && table.contains("never settle") && table.contains("-db_password: [redacted]"),
        "{table}"
    );
}
