//! `salt -b` against real masters, 3008.3 (one jid, `salt/batch/...` events)
//! and 3006.25 (a jid per sub-batch), with db1 stopped (issue 68): a failing
//! `-b 1` run and a passing `-b 50%` run are each one job with every
//! minion's verdict, db1 named as never sent, and `wait` gives the whole
//! batch's truth only once the batch has ended.

use std::path::Path;
use std::time::Duration;

use saltsight::lab::{Lab, LabOptions, OLDER_SALT_VERSION, older_venv};
use serde_json::Value;

use crate::support::{Received, Saltsight, ask, lab_lock, read_records, salt_bg, wait_line};

/// The state run a batch published: its `job_published` (3006.25 has no
/// batch field yet: its first sub-batch's).
fn batch_published<'a>(seen: &'a [Received], sls: &str) -> Option<&'a Value> {
    seen.iter().map(|r| &r.record).find(|r| {
        r["kind"] == "job_published"
            && r["fun"] == "state.apply"
            && r["arg"]
                .as_array()
                .is_some_and(|a| a.first() == Some(&Value::from(sls)))
    })
}

/// `saltsight wait JID --json`: its exit code and recap.
fn wait(config: &Path, state: &Path, jid: &str) -> (i32, Value) {
    let (code, text) = ask(config, state, &["wait", jid, "--timeout", "120s", "--json"]);
    let start = text.find('{').unwrap_or_else(|| panic!("no recap: {text}"));
    let recap = serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("no recap: {text}"));
    (code, recap)
}

fn batch_run(options: LabOptions, version: &str) {
    let _lock = lab_lock();
    let mut lab = Lab::start(LabOptions {
        // The batch's ping gives up on db1 after these, not 5 s and 10 s.
        extra_master: "gather_job_timeout: 3\n".into(),
        ..options
    })
    .expect("lab starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"state.*\" = \"60s\" }}\n",
            lab.master_config().display().to_string()
        ),
    )
    .expect("write config");
    let run = Saltsight::spawn_with_env(
        &["--config", config.to_str().expect("utf-8"), "run"],
        &[("SALTSIGHT_STATE_DIR", state.to_str().expect("utf-8"))],
    );
    wait_line(&run.stderr, &mut Vec::new(), Duration::from_secs(10), |l| {
        l.contains(crate::support::CONNECTED)
    })
    .expect("connected");
    lab.stop_minion("db1").expect("stop db1");
    let mut seen = Vec::new();

    // A failing state, one minion at a time: web1 and web2 fail, db1 never
    // answered the batch's ping.
    let mut cli = salt_bg(&lab, &["-t", "3", "-b", "1", "*", "state.apply", "fail"]);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        batch_published(s, "fail").is_some()
    })
    .unwrap_or_else(|e| panic!("{version}: the batch's publication: {e}"));
    let jid = batch_published(&seen, "fail").expect("published")["jid"]
        .as_str()
        .expect("jid")
        .to_owned();
    let (code, recap) = wait(&config, &state, &jid);
    assert_eq!(code, 4, "{version}: a state failed: {recap}");
    assert_eq!(recap["expected"], 3, "{version}: {recap}");
    assert_eq!(
        recap["failed"],
        serde_json::json!(["web1", "web2"]),
        "{version}: every sub-batch's return, not the first's: {recap}"
    );
    assert_eq!(recap["missing"][0]["minion"], "db1", "{version}: {recap}");
    assert_eq!(
        recap["missing"][0]["reason"], "not_sent",
        "{version}: {recap}"
    );
    assert_eq!(
        recap["missing"][0]["evidence"], "batch_ping_unanswered",
        "{version}: {recap}"
    );
    assert_eq!(recap["batch"]["sub_batches"], 2, "{version}: {recap}");
    assert_eq!(recap["groups"][0]["count"], 2, "{version}: {recap}");
    let status = cli.wait().expect("salt -b ends");
    assert!(!status.success(), "{version}: salt reports the failure");

    // A passing state, half the answering minions at a time.
    let mut cli = salt_bg(&lab, &["-t", "3", "-b", "50%", "*", "state.apply", "ok"]);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        batch_published(s, "ok").is_some()
    })
    .unwrap_or_else(|e| panic!("{version}: the second batch's publication: {e}"));
    let jid = batch_published(&seen, "ok").expect("published")["jid"]
        .as_str()
        .expect("jid")
        .to_owned();
    let (code, recap) = wait(&config, &state, &jid);
    assert_eq!(code, 5, "{version}: db1 was never sent the job: {recap}");
    assert_eq!(
        recap["succeeded"],
        serde_json::json!(["web1", "web2"]),
        "{version}: {recap}"
    );
    assert_eq!(
        recap["missing"][0]["reason"], "not_sent",
        "{version}: {recap}"
    );
    let _ = cli.wait();
    lab.start_minion("db1").expect("db1 back");
}

#[test]
fn a_batch_is_one_job_and_wait_waits_for_its_end_on_3008() {
    batch_run(LabOptions::default(), saltsight::lab::SALT_VERSION);
}

#[test]
fn a_batch_is_one_job_and_wait_waits_for_its_end_on_3006() {
    batch_run(
        LabOptions {
            venv: older_venv(),
            salt_version: OLDER_SALT_VERSION,
            ..LabOptions::default()
        },
        OLDER_SALT_VERSION,
    );
}
