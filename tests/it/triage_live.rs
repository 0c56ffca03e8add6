//! Triage and correlation against a real Salt master whose state tree is a git
//! checkout: commit A passes, commit B breaks one state; `state.apply` on every
//! minion after B gives one `failure_group` of 3 naming the SLS, the state, its
//! category, `introduced_by` = B and the suspect range A..B, with the job's
//! `--metadata`. An unrelated later commit to the same file does not take B's
//! place, nor does one to a state never seen passing take its first commit's. A
//! render error names its SLS and commit, and a minion's scheduled run is
//! `scheduled`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use saltsight::lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::{Received, Saltsight, jid_from, lab_lock, read_records};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "alice")
        .env("GIT_AUTHOR_EMAIL", "alice@example.com")
        .env("GIT_COMMITTER_NAME", "alice")
        .env("GIT_COMMITTER_EMAIL", "alice@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Writes `file` under the state tree, commits it, returns the commit id.
fn commit(states: &Path, file: &str, text: &str, subject: &str) -> String {
    std::fs::write(states.join(file), text).expect("write sls");
    git(states, &["add", "-A"]);
    git(states, &["commit", "-q", "-m", subject]);
    git(states, &["rev-parse", "HEAD"])
}

const WEB_OK: &str = "web_conf:\n  file.managed:\n    - name: {{ opts['cachedir'] }}/web.conf\n    - contents: ok\n\
web_reload:\n  cmd.run:\n    - name: 'true'\n    - require:\n      - file: web_conf\n";
const WEB_BROKEN: &str = "web_conf:\n  file.managed:\n    - name: {{ opts['cachedir'] }}/web.conf\n    - source: salt://files/web.conf\n\
web_reload:\n  cmd.run:\n    - name: 'true'\n    - require:\n      - file: web_conf\n";

fn find<'a>(seen: &'a [Received], kind: &str, jid: &str) -> Vec<&'a Value> {
    seen.iter()
        .map(|r| &r.record)
        .filter(|r| r["kind"] == kind && r["jid"] == jid)
        .collect()
}

/// `state.apply <sls>` on every minion; its jid once its failure group is in.
fn apply_until_group(lab: &Lab, run: &Saltsight, seen: &mut Vec<Received>, sls: &str) -> String {
    let out = lab
        .salt(&["--show-jid", "*", "state.apply", sls])
        .expect("state.apply");
    let jid = jid_from(&out);
    read_records(&run.stdout, seen, Duration::from_secs(60), |s| {
        !find(s, "failure_group", &jid).is_empty()
    })
    .unwrap_or_else(|e| panic!("a failure group for {sls} ({jid}): {e:?}"));
    jid
}

#[test]
fn a_breaking_commit_is_named_across_minions_with_its_suspect_range() {
    let _lock = lab_lock();
    let lab = Lab::start(LabOptions::default()).expect("lab starts");
    let states = lab.root().join("states");
    git(&states, &["init", "-q", "-b", "main"]);
    let a = commit(&states, "web.sls", WEB_OK, "web: first config");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"state.*\" = \"60s\" }}\n",
            lab.master_config().display().to_string()
        ),
    )
    .expect("write config");
    let run = Saltsight::spawn_connected(&["--config", config.to_str().expect("utf-8"), "run"]);
    let mut seen = Vec::new();

    // Commit A passes on every minion.
    let ok = lab
        .salt(&["--show-jid", "*", "state.apply", "web"])
        .expect("apply A");
    let ok_jid = jid_from(&ok);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        !find(s, "job_completed", &ok_jid).is_empty()
    })
    .expect("the passing run completes");
    let published = find(&seen, "job_published", &ok_jid);
    assert_eq!(
        published[0]["commits"]["states"],
        a.as_str(),
        "HEAD at publish"
    );
    assert_eq!(find(&seen, "job_completed", &ok_jid)[0]["succeeded"], 3);

    // Commit B breaks web_conf (its source does not exist).
    let b = commit(&states, "web.sls", WEB_BROKEN, "web: move config to a file");
    let failed = lab
        .salt(&[
            "--show-jid",
            "*",
            "state.apply",
            "web",
            "--metadata",
            r#"{"release": "r42"}"#,
        ])
        .expect("apply B");
    let jid = jid_from(&failed);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        !find(s, "failure_group", &jid).is_empty()
    })
    .expect("a failure group for the broken run");
    let change = seen
        .iter()
        .map(|r| &r.record)
        .find(|r| r["kind"] == "config_change")
        .expect("config_change");
    assert_eq!(
        (change["old"].as_str(), change["new"].as_str()),
        (Some(a.as_str()), Some(b.as_str()))
    );
    let groups = find(&seen, "failure_group", &jid);
    assert_eq!(groups.len(), 1, "{groups:?}");
    let g = groups[0];
    assert_eq!(
        (
            &g["sls"],
            &g["state_id"],
            &g["function"],
            &g["category"],
            &g["count"]
        ),
        (
            &Value::from("web"),
            &Value::from("web_conf"),
            &Value::from("file.managed"),
            &Value::from("source_missing"),
            &Value::from(3)
        ),
        "{g}"
    );
    assert_eq!(g["url"], "salt://files/web.conf");
    assert_eq!(g["minions"], serde_json::json!(["db1", "web1", "web2"]));
    assert_eq!(g["introduced_by"]["id"], b.as_str(), "{g}");
    assert_eq!(g["introduced_by"]["path"], "web.sls");
    assert_eq!(g["introduced_by"]["author"], "alice");
    assert_eq!(g["introduced_by"]["subject"], "web: move config to a file");
    assert_eq!(g["suspect_commits"]["last_ok"], a.as_str(), "{g}");
    assert_eq!(g["suspect_commits"]["first_failed"], b.as_str());
    assert_eq!(g["suspect_commits"]["commits"][0]["id"], b.as_str());
    assert_eq!(
        g["suspect_commits"]["commits"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(g["metadata"], serde_json::json!({"release": "r42"}));
    assert_eq!(g["run_kind"], "adhoc");
    let failures = find(&seen, "state_failure", &jid);
    assert_eq!(failures.len(), 3, "one root cause per minion: {failures:?}");
    for f in &failures {
        assert_eq!(
            (&f["state_id"], &f["fallout"], &f["first_failing"]),
            (
                &Value::from("web_conf"),
                &Value::from(1),
                &Value::from(true)
            ),
            "{f}"
        );
        assert_eq!(f["metadata"], serde_json::json!({"release": "r42"}));
    }
    assert_eq!(g["introduced_by"]["basis"], "since_last_pass", "{g}");

    // An unrelated commit to web.sls after B: the failure is still B's.
    let d = commit(
        &states,
        "web.sls",
        &format!("{WEB_BROKEN}# owner: web team\n"),
        "web: note the owner",
    );
    let again = apply_until_group(&lab, &run, &mut seen, "web");
    let g = find(&seen, "failure_group", &again)[0];
    assert_eq!(g["commits"]["states"], d.as_str(), "ran under D: {g}");
    assert_eq!(g["introduced_by"]["id"], b.as_str(), "{g}");
    assert_eq!(g["suspect_commits"]["first_failed"], b.as_str(), "{g}");

    // A state failing from its first commit (never seen passing) keeps that
    // commit through an unrelated later one to its file.
    const NEVER: &str = "never_conf:\n  file.managed:\n    - name: {{ opts['cachedir'] }}/never.conf\n    - source: salt://files/never.conf\n";
    let n1 = commit(&states, "never.sls", NEVER, "never: add");
    let first = apply_until_group(&lab, &run, &mut seen, "never");
    let g = find(&seen, "failure_group", &first)[0];
    assert_eq!(
        (&g["introduced_by"]["id"], &g["introduced_by"]["basis"]),
        (&Value::from(n1.as_str()), &Value::from("first_seen_head")),
        "{g}"
    );
    commit(
        &states,
        "never.sls",
        &format!("{NEVER}# owner: ops\n"),
        "never: note the owner",
    );
    let second = apply_until_group(&lab, &run, &mut seen, "never");
    let g = find(&seen, "failure_group", &second)[0];
    assert_eq!(g["introduced_by"]["id"], n1.as_str(), "{g}");

    // A render error names its SLS, its line and the commit that brought it.
    let c = commit(
        &states,
        "broken.sls",
        "broken:\n  test.nop:\n    - name: [unclosed\n",
        "add broken",
    );
    let render = lab
        .salt(&["--show-jid", "*", "state.apply", "broken"])
        .expect("apply broken");
    let render_jid = jid_from(&render);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        find(s, "render_failure", &render_jid).len() == 3
    })
    .expect("render failures");
    let r = find(&seen, "render_failure", &render_jid)[0];
    assert_eq!(
        (&r["sls"], &r["category"]),
        (&Value::from("broken"), &Value::from("render")),
        "{r}"
    );
    assert!(r["line"].as_u64().is_some(), "{r}");
    assert_eq!(r["introduced_by"]["id"], c.as_str());

    // A minion's scheduler runs the broken state: `scheduled`.
    lab.salt(&[
        "web1",
        "schedule.add",
        "saltsight_sched",
        "function=state.apply",
        "job_args=[web]",
        "seconds=3600",
    ])
    .expect("schedule.add");
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        s.iter()
            .any(|r| r.record["kind"] == "state_failure" && r.record["run_kind"] == "scheduled")
    })
    .expect("a scheduled failure");
    lab.salt(&["web1", "schedule.delete", "saltsight_sched"])
        .expect("schedule.delete");
    let scheduled = seen
        .iter()
        .map(|r| &r.record)
        .find(|r| r["kind"] == "state_failure" && r["run_kind"] == "scheduled")
        .expect("scheduled");
    assert_eq!(
        (&scheduled["minion"], &scheduled["state_id"]),
        (&Value::from("web1"), &Value::from("web_conf"))
    );
}

/// The README's first command: `saltsight demo` prints the records of its jobs,
/// the failing `state.apply fail` as one group of 3 with the commit it ran under.
#[test]
fn the_demo_names_its_failing_state_once_for_all_minions() {
    let _lock = lab_lock();
    let out = Command::new(crate::support::bin())
        .arg("demo")
        .env_remove("SALTSIGHT_CONFIG")
        .output()
        .expect("run the demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json record"))
        .collect();
    let groups: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "failure_group")
        .collect();
    assert_eq!(groups.len(), 1, "{records:?}");
    let g = groups[0];
    assert_eq!(
        (&g["sls"], &g["state_id"], &g["category"], &g["count"]),
        (
            &Value::from("fail"),
            &Value::from("lab_failing_cmd"),
            &Value::from("command"),
            &Value::from(3)
        )
    );
    assert_eq!(g["introduced_by"]["subject"], "The demo's state tree");
    let completed = records
        .iter()
        .filter(|r| r["kind"] == "job_completed")
        .count();
    assert_eq!(completed, 4, "the demo's four jobs complete");
}
