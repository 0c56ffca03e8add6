//! Missing-return verdicts against a real Salt master: a minion killed and
//! restarted mid-job, minions still running past the deadline (the salt CLI's
//! find_job says so), a hung minion, a target that does not exist, and a master
//! restart during a job. Each verdict names the jid and minion and arrives within
//! 1 s of its deadline.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use saltsight::lab::{Lab, LabOptions};
use saltsight::time::Stamp;

use crate::support::{Received, Saltsight, lab_lock, read_records, salt_bg};

fn start_run(lab: &Lab, dir: &Path, deadlines: &str) -> Saltsight {
    let config = dir.join("saltsight.toml");
    let master_config = lab.master_config();
    std::fs::write(
        &config,
        format!("master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ {deadlines} }}\n", master_config.display().to_string()),
    )
    .expect("write config");
    Saltsight::spawn_connected(&[
        "--config",
        config.to_str().expect("utf-8"),
        "--log-format",
        "json",
        "run",
    ])
}

/// Waits for a CLI started by [`salt_bg`], killing it by pid after `limit`.
fn finish(mut cli: Child, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if matches!(cli.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = cli.kill();
    let _ = cli.wait();
}

fn jid_of(seen: &[Received], fun: &str, tgt_contains: &str) -> Option<String> {
    seen.iter().find_map(|r| {
        let rec = &r.record;
        (rec["kind"] == "job_published"
            && rec["fun"] == fun
            && rec["tgt"].as_array().is_some_and(|t| {
                t.iter()
                    .any(|x| x.as_str().is_some_and(|s| s.contains(tgt_contains)))
            }))
        .then(|| rec["jid"].as_str().map(str::to_owned))?
    })
}

/// minion → (reason, how long after the deadline it was read); a minion judged
/// twice fails the test.
fn verdicts(seen: &[Received], jid: &str) -> BTreeMap<String, (String, Duration)> {
    let judged = seen
        .iter()
        .filter(|r| r.record["kind"] == "minion_missing" && r.record["jid"] == jid)
        .count();
    let verdicts: BTreeMap<String, (String, Duration)> = seen
        .iter()
        .filter(|r| r.record["kind"] == "minion_missing" && r.record["jid"] == jid)
        .map(|r| {
            let deadline = r.record["deadline"]
                .as_str()
                .and_then(Stamp::parse)
                .expect("deadline")
                .to_system_time();
            // A verdict read before its deadline would be an error (not_connected is
            // known at publish, and given then).
            let late = match r.wall.duration_since(deadline) {
                Ok(late) => late,
                Err(_) if r.record["reason"] == "not_connected" => Duration::ZERO,
                Err(early) => panic!(
                    "{} judged {:?} before its deadline",
                    r.record,
                    early.duration()
                ),
            };
            (
                r.record["minion"].as_str().unwrap_or_default().to_owned(),
                (
                    r.record["reason"].as_str().unwrap_or_default().to_owned(),
                    late,
                ),
            )
        })
        .collect();
    assert_eq!(verdicts.len(), judged, "a minion was judged twice in {jid}");
    verdicts
}

fn count(seen: &[Received], kind: &str, jid: &str) -> usize {
    seen.iter()
        .filter(|r| r.record["kind"] == kind && r.record["jid"] == jid)
        .count()
}

fn assert_verdicts(seen: &[Received], jid: &str, want: &[(&str, &str)]) {
    let got = verdicts(seen, jid);
    let reasons: BTreeMap<&str, &str> = got
        .iter()
        .map(|(m, (r, _))| (m.as_str(), r.as_str()))
        .collect();
    assert_eq!(
        reasons,
        want.iter().copied().collect::<BTreeMap<_, _>>(),
        "jid {jid}"
    );
    for (minion, (reason, late)) in &got {
        eprintln!("{jid} {minion}: {reason}, read {late:?} after the deadline");
        if reason != "not_connected" {
            assert!(
                *late < Duration::from_secs(1),
                "{minion}: verdict {late:?} after the deadline"
            );
        }
    }
}

#[test]
fn killed_running_hung_and_unknown_minions_get_the_right_verdicts_on_time() {
    let _lab_lock = lab_lock();
    let mut lab = Lab::start(LabOptions::default()).expect("start the Salt lab");
    let dir = tempfile::tempdir().expect("tempdir");
    // A restarted minion announces itself only after a few seconds (much later
    // while the master is busy with the CLI's find_job jobs): the window is wide.
    let mut run = start_run(
        &lab,
        dir.path(),
        "\"test.sleep\" = \"25s\", \"cmd.run\" = \"8s\", \"test.ping\" = \"10s\"",
    );
    let mut seen = Vec::new();

    // 1. `test.sleep 30`: db1 is SIGKILLed 2 s in and restarted; web1 and web2 answer
    // the CLI's find_job ("running") and are still running at the 25 s deadline.
    let cli = salt_bg(&lab, &["*", "test.sleep", "30"]);
    std::thread::sleep(Duration::from_secs(2));
    lab.signal_minion("db1", Signal::SIGKILL).expect("kill db1");
    lab.stop_minion("db1").expect("reap db1");
    lab.start_minion("db1").expect("restart db1");
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        jid_of(s, "test.sleep", "*").is_some_and(|jid| count(s, "late_return", &jid) == 2)
    })
    .expect("verdicts and late returns for test.sleep 30");
    let jid = jid_of(&seen, "test.sleep", "*").expect("jid");
    assert_verdicts(
        &seen,
        &jid,
        &[
            ("db1", "minion_restarted"),
            ("web1", "running_past_deadline"),
            ("web2", "running_past_deadline"),
        ],
    );
    finish(cli, Duration::from_secs(30));
    lab.wait_ready(Duration::from_secs(60))
        .expect("db1 is back");
    run_hung_minion_and_ghost_target(&mut lab, &mut run);
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success()),
        "run exits 0 on SIGTERM"
    );
}

fn run_hung_minion_and_ghost_target(lab: &mut Lab, run: &mut Saltsight) {
    let mut seen = Vec::new();

    // 2. `cmd.run 'sleep 3'` on web1 and web2, web2 SIGSTOPped 1 s in: nothing from
    // it by the 8 s deadline; SIGCONT after the verdict brings its late return.
    let cli = salt_bg(lab, &["-L", "web1,web2", "cmd.run", "sleep 3", "-t", "3"]);
    std::thread::sleep(Duration::from_secs(1));
    lab.signal_minion("web2", Signal::SIGSTOP)
        .expect("stop web2");
    read_records(&run.stdout, &mut seen, Duration::from_secs(30), |s| {
        jid_of(s, "cmd.run", "web2").is_some_and(|jid| count(s, "minion_missing", &jid) == 1)
    })
    .expect("a verdict for the hung minion");
    lab.signal_minion("web2", Signal::SIGCONT)
        .expect("continue web2");
    let jid = jid_of(&seen, "cmd.run", "web2").expect("jid");
    read_records(&run.stdout, &mut seen, Duration::from_secs(30), |s| {
        s.iter().any(|r| {
            r.record["kind"] == "job_completed"
                && r.record["jid"] == jid.as_str()
                && r.record["revision"] == 1
        })
    })
    .expect("web2's late return and the amended job");
    assert_eq!(count(&seen, "late_return", &jid), 1);
    assert_verdicts(&seen, &jid, &[("web2", "no_response")]);
    let amended = seen
        .iter()
        .rev()
        .find(|r| r.record["kind"] == "job_completed" && r.record["jid"] == jid.as_str())
        .expect("amended job");
    assert_eq!(
        (
            amended.record["revision"].as_u64(),
            amended.record["returned"].as_u64()
        ),
        (Some(1), Some(2))
    );
    finish(cli, Duration::from_secs(30));

    // 3. A target that is not a minion at all: not_connected, at once.
    seen.clear();
    let out = lab.salt(&["-L", "web1,ghost9", "test.ping"]).expect("salt");
    drop(out);
    read_records(&run.stdout, &mut seen, Duration::from_secs(20), |s| {
        jid_of(s, "test.ping", "ghost9").is_some_and(|jid| count(s, "job_completed", &jid) == 1)
    })
    .expect("job_completed for the ghost target");
    let jid = jid_of(&seen, "test.ping", "ghost9").expect("jid");
    assert_verdicts(&seen, &jid, &[("ghost9", "not_connected")]);
}

#[test]
fn a_master_restart_during_a_job_gives_unknown_gap_never_a_false_missing() {
    let _lab_lock = lab_lock();
    let mut lab = Lab::start(LabOptions::default()).expect("start the Salt lab");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut run = start_run(&lab, dir.path(), "\"test.sleep\" = \"15s\"");
    let mut seen = Vec::new();
    // db1 is stopped through the job: it cannot return, so it must be judged, and
    // the judgement must be unknown_gap, not no_response.
    lab.signal_minion("db1", Signal::SIGSTOP).expect("stop db1");
    let out = lab
        .salt(&["--async", "*", "test.sleep", "4"])
        .expect("salt --async");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    read_records(&run.stdout, &mut seen, Duration::from_secs(10), |s| {
        jid_of(s, "test.sleep", "*").is_some()
    })
    .expect("the job is published");
    lab.stop_master();
    lab.start_master().expect("restart the master");
    let jid = jid_of(&seen, "test.sleep", "*").expect("jid");
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        count(s, "job_completed", &jid) >= 1
    })
    .expect("the job is completed or judged");
    assert!(
        seen.iter().any(|r| r.record["kind"] == "bus_gap"),
        "a bus_gap record"
    );
    let judged = verdicts(&seen, &jid);
    assert!(
        judged.contains_key("db1"),
        "db1 could not return: {judged:?}"
    );
    for (minion, (reason, _)) in judged {
        assert_eq!(
            reason, "unknown_gap",
            "{minion}: a job that overlaps a gap cannot be judged"
        );
    }
    lab.signal_minion("db1", Signal::SIGCONT)
        .expect("continue db1");
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success()),
        "run exits 0 on SIGTERM"
    );
}

/// The value of an unlabelled sample in saltsight's /metrics.
fn metric(addr: std::net::SocketAddr, name: &str) -> Option<f64> {
    let (_, body) = crate::support::upstream::get(addr, "/metrics").ok()?;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Down, hung and slow in one job, told apart: with presence (the TCP
/// transport fires a change for each connect and disconnect), a minion stopped
/// before the job is not_connected; one SIGSTOPped mid-job keeps its connection
/// and is no_response (connected, silent); one still running answers find_job
/// and is running_past_deadline.
#[test]
fn down_hung_and_slow_minions_in_one_job_are_told_apart() {
    let _lab_lock = lab_lock();
    let mut lab = Lab::start(LabOptions {
        extra_master: "transport: tcp\npresence_events: True\n".into(),
        extra_minion: "transport: tcp\n".into(),
        ..LabOptions::default()
    })
    .expect("start the Salt lab");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"test.sleep\" = \"15s\" }}\n[metrics]\nlisten_address = \"127.0.0.1:0\"\n",
            lab.master_config().display().to_string()
        ),
    )
    .expect("write config");
    let mut run = Saltsight::spawn(&[
        "--config",
        config.to_str().expect("utf-8"),
        "--log-format",
        "json",
        "run",
    ]);
    let mut log = Vec::new();
    let addr = crate::support::metrics_address_once_connected(&run, &mut log);

    // db1 stops; the master says so on the bus, and saltsight hears it.
    lab.stop_minion("db1").expect("stop db1");
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(addr, "saltsight_minions_connected") != Some(2.0) {
        assert!(Instant::now() < deadline, "presence never said db1 left");
        std::thread::sleep(Duration::from_millis(100));
    }

    // `test.sleep 30` everywhere; web2 SIGSTOPped a second in.
    let cli = salt_bg(&lab, &["*", "test.sleep", "30"]);
    std::thread::sleep(Duration::from_secs(1));
    lab.signal_minion("web2", Signal::SIGSTOP)
        .expect("stop web2");
    let mut seen = Vec::new();
    read_records(&run.stdout, &mut seen, Duration::from_secs(40), |s| {
        jid_of(s, "test.sleep", "*").is_some_and(|jid| count(s, "job_completed", &jid) == 1)
    })
    .expect("the job's verdicts");
    lab.signal_minion("web2", Signal::SIGCONT)
        .expect("continue web2");
    let jid = jid_of(&seen, "test.sleep", "*").expect("jid");
    assert_verdicts(
        &seen,
        &jid,
        &[
            ("db1", "not_connected"),
            ("web1", "running_past_deadline"),
            ("web2", "no_response"),
        ],
    );
    let evidence: BTreeMap<String, String> = seen
        .iter()
        .filter(|r| r.record["kind"] == "minion_missing" && r.record["jid"] == jid.as_str())
        .map(|r| {
            (
                r.record["minion"].as_str().unwrap_or_default().to_owned(),
                r.record["evidence"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        evidence,
        [
            ("db1", "presence_absent"),
            ("web1", "still_running"),
            ("web2", "connected_silent"),
        ]
        .map(|(m, e)| (m.to_owned(), e.to_owned()))
        .into_iter()
        .collect::<BTreeMap<_, _>>()
    );
    finish(cli, Duration::from_secs(40));
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success()),
        "run exits 0 on SIGTERM"
    );
}

/// A restart of saltsight mid-job (a package upgrade): the job completes after
/// it with its run kind and every return that came after the restart; the
/// restart is a bus_gap (reason restart) and the minion that never answered is
/// unknown_gap, never a false no_response.
#[test]
fn a_job_in_flight_survives_a_restart_of_saltsight() {
    let _lab_lock = lab_lock();
    let lab = Lab::start(LabOptions::default()).expect("start the Salt lab");
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"test.sleep\" = \"20s\" }}\n",
            lab.master_config().display().to_string()
        ),
    )
    .expect("write config");
    let spawn = || {
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
        let mut log = Vec::new();
        crate::support::wait_line(&run.stderr, &mut log, Duration::from_secs(10), |l| {
            l.contains(crate::support::CONNECTED)
        })
        .expect("connected");
        (run, log)
    };
    let (mut first, _) = spawn();
    // db1 will not answer at all; web1 and web2 answer after the restart.
    lab.signal_minion("db1", Signal::SIGSTOP).expect("stop db1");
    let cli = salt_bg(&lab, &["*", "test.sleep", "8"]);
    let mut seen = Vec::new();
    read_records(&first.stdout, &mut seen, Duration::from_secs(20), |s| {
        jid_of(s, "test.sleep", "*").is_some()
    })
    .expect("the job is published");
    let jid = jid_of(&seen, "test.sleep", "*").expect("jid");
    assert!(
        first
            .terminate(Duration::from_secs(10))
            .is_some_and(|s| s.success()),
        "the first run stops cleanly"
    );
    assert!(state.join("checkpoint").is_file(), "a checkpoint at stop");

    let (second, log) = spawn();
    assert!(
        log.iter().any(|l| l.contains("Restored the checkpoint.")),
        "{log:?}"
    );
    let mut after = Vec::new();
    read_records(&second.stdout, &mut after, Duration::from_secs(40), |s| {
        count(s, "job_completed", &jid) == 1
    })
    .expect("the job completes after the restart");
    lab.signal_minion("db1", Signal::SIGCONT)
        .expect("continue db1");
    let gap = after
        .iter()
        .map(|r| &r.record)
        .find(|r| r["kind"] == "bus_gap")
        .expect("a bus_gap for the restart");
    assert_eq!(gap["reason"], "restart", "{gap}");
    let returned: Vec<&str> = after
        .iter()
        .map(|r| &r.record)
        .filter(|r| r["kind"] == "minion_return" && r["jid"] == jid.as_str())
        .filter_map(|r| r["minion"].as_str())
        .collect();
    assert_eq!(
        returned.len(),
        2,
        "web1 and web2 after the restart: {returned:?}"
    );
    let completed = after
        .iter()
        .map(|r| &r.record)
        .find(|r| r["kind"] == "job_completed" && r["jid"] == jid.as_str())
        .expect("job_completed");
    assert_eq!(
        (
            &completed["run_kind"],
            &completed["returned"],
            &completed["missing"]
        ),
        (
            &serde_json::Value::from("adhoc"),
            &serde_json::Value::from(2),
            &serde_json::json!({"unknown_gap": 1})
        ),
        "{completed}"
    );
    assert_verdicts(&after, &jid, &[("db1", "unknown_gap")]);
    finish(cli, Duration::from_secs(30));
    drop(second);
}
