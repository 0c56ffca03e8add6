//! saltsight against a real Salt master (3008.3 from PyPI) with three minions on
//! loopback: what `salt` does must show on the bus as saltsight reads it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use saltsight::lab::{Lab, LabOptions};
use saltsight::time::Stamp;
use serde_json::Value;

use crate::support::{CONNECTED, Saltsight, lab_lock, wait_line};

fn json_lines(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn salt_ok(lab: &Lab, args: &[&str]) -> Value {
    let out = lab.salt(args).expect("run salt");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "salt {args:?}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The jid of the job running `fun`, from its `new` event.
fn jid_of(events: &[Value], fun: &str) -> Option<String> {
    events.iter().find_map(|e| {
        let is_new = e["tag"].as_str()?.ends_with("/new");
        (is_new && e["data"]["fun"] == fun).then(|| e["data"]["jid"].as_str().map(str::to_owned))?
    })
}

fn returns_for<'a>(events: &'a [Value], jid: &str) -> Vec<&'a Value> {
    let prefix = format!("salt/job/{jid}/ret/");
    events
        .iter()
        .filter(|e| e["tag"].as_str().is_some_and(|t| t.starts_with(&prefix)))
        .collect()
}

#[test]
fn tail_and_capture_see_every_event_of_ping_cmd_run_and_a_failing_state_apply() {
    let _lab_lock = lab_lock();
    let lab = Lab::start(LabOptions::default()).expect("start the Salt lab");
    let master_config = lab.master_config();
    let mc = master_config.to_str().expect("utf-8 path");
    let dir = tempfile::tempdir().expect("tempdir");
    let capture_file = dir.path().join("live.capture");
    let cf = capture_file.to_str().expect("utf-8 path");

    let mut tail = Saltsight::spawn_connected(&[
        "--master-config",
        mc,
        "--log-format",
        "json",
        "tail",
        "--json",
    ]);
    let mut capture =
        Saltsight::spawn_connected(&["--master-config", mc, "--log-format", "json", "capture", cf]);

    let ping = salt_ok(&lab, &["*", "test.ping", "--out", "json", "--static"]);
    assert_eq!(ping.as_object().map(|o| o.len()), Some(3), "{ping}");
    salt_ok(
        &lab,
        &[
            "*",
            "cmd.run",
            "echo hello from $(hostname)",
            "--out",
            "json",
            "--static",
        ],
    );
    let apply = salt_ok(
        &lab,
        &["*", "state.apply", "fail", "--out", "json", "--static"],
    );
    assert_eq!(apply.as_object().map(|o| o.len()), Some(3), "{apply}");

    // Read until the state.apply job has all three returns.
    let complete = |lines: &[String]| {
        let events = json_lines(lines);
        jid_of(&events, "state.apply").is_some_and(|jid| returns_for(&events, &jid).len() == 3)
    };
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !complete(&lines) {
        let left = deadline.saturating_duration_since(Instant::now());
        wait_line(&tail.stdout, &mut lines, left, |_| true)
            .expect("all returns of state.apply on the bus");
    }
    let events = json_lines(&lines);

    for (fun, check) in [
        (
            "test.ping",
            &(|r: &Value| r["return"] == true && r["retcode"] == 0) as &dyn Fn(&Value) -> bool,
        ),
        ("cmd.run", &|r: &Value| {
            r["return"]
                .as_str()
                .is_some_and(|s| s.starts_with("hello from"))
                && r["retcode"] == 0
        }),
        ("state.apply", &|r: &Value| {
            r["retcode"] == 2
                && r["success"] == false
                && r["return"].as_object().is_some_and(|states| {
                    states
                        .values()
                        .any(|s| s["__id__"] == "lab_failing_cmd" && s["result"] == false)
                        && states.values().any(|s| {
                            s["__id__"] == "lab_needs_failing"
                                && s["comment"]
                                    .as_str()
                                    .is_some_and(|c| c.starts_with("One or more requisite failed"))
                        })
                })
        }),
    ] {
        let jid = jid_of(&events, fun).unwrap_or_else(|| panic!("no new event for {fun}"));
        let rets = returns_for(&events, &jid);
        let minions: BTreeSet<&str> = rets
            .iter()
            .filter_map(|r| r["data"]["id"].as_str())
            .collect();
        assert_eq!(
            minions,
            BTreeSet::from(["db1", "web1", "web2"]),
            "{fun}: returns from"
        );
        for ret in rets {
            assert!(check(&ret["data"]), "{fun}: unexpected return {ret}");
        }
        let new = events
            .iter()
            .find(|e| e["tag"] == format!("salt/job/{jid}/new"))
            .expect("new event");
        assert_eq!(
            new["data"]["minions"].as_array().map(Vec::len),
            Some(3),
            "{fun}: expected minions"
        );
    }

    // Both stop gracefully on SIGTERM; the capture replays to the same events.
    assert!(
        tail.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success()),
        "tail exits 0 on SIGTERM"
    );
    assert!(
        capture
            .terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success()),
        "capture exits 0 on SIGTERM"
    );
    let replay = std::process::Command::new(crate::support::bin())
        .args(["tail", "--json", "--from", cf])
        .output()
        .expect("replay the capture");
    let replayed = json_lines(
        &String::from_utf8_lossy(&replay.stdout)
            .lines()
            .map(String::from)
            .collect::<Vec<_>>(),
    );
    for event in &events {
        assert!(replayed.contains(event), "the capture lacks {event}");
    }
}

#[test]
fn a_master_restart_is_a_gap_and_the_reader_is_back_within_2s_of_the_socket() {
    let _lab_lock = lab_lock();
    let mut lab = Lab::start(LabOptions::default()).expect("start the Salt lab");
    let master_config = lab.master_config();
    let mc = master_config.to_str().expect("utf-8 path");
    let mut run = Saltsight::spawn_connected(&[
        "--master-config",
        mc,
        "--log-format",
        "json",
        "run",
        "--output",
        "stdout",
    ]);
    let mut log = Vec::new();
    salt_ok(&lab, &["web1", "test.ping", "--out", "json", "--static"]);

    // A master stopping closes its subscribers while its socket may still accept for
    // a moment: saltsight may reconnect to the dying master and lose it again. What
    // counts is the reconnect after the master was fully down, and a gap covering it.
    lab.stop_master();
    let (down, down_wall) = (Instant::now(), SystemTime::now());
    lab.start_master().expect("restart the master");
    let socket_back = lab
        .wait_bus_up(Duration::from_secs(60))
        .expect("the bus comes back");
    let reconnected = loop {
        let at = wait_line(&run.stderr, &mut log, Duration::from_secs(10), |l| {
            l.contains(CONNECTED)
        })
        .expect("reconnects");
        if at > down {
            break at;
        }
    };
    let lag = reconnected.saturating_duration_since(socket_back);
    eprintln!("reconnected {lag:?} after the socket came back");
    assert!(
        lag < Duration::from_secs(2),
        "reconnected {lag:?} after the socket came back"
    );

    let down_stamp = Stamp::from_system_time(down_wall);
    let mut records = Vec::new();
    let covering = loop {
        wait_line(&run.stdout, &mut records, Duration::from_secs(5), |l| {
            l.contains("\"bus_gap\"")
        })
        .expect("a bus_gap record");
        let gap: Value =
            serde_json::from_str(records.last().expect("record")).expect("json record");
        let stamp = |key: &str| gap[key].as_str().and_then(Stamp::parse).expect("stamp");
        if stamp("started_at") <= down_stamp && stamp("ended_at") >= down_stamp {
            break gap;
        }
    };
    assert_eq!(covering["reason"], "disconnected", "{covering}");
    assert!(!log.iter().any(|l| l.contains("panicked")), "{log:?}");

    lab.wait_ready(Duration::from_secs(60))
        .expect("minions reconnect to the restarted master");
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success()),
        "run exits 0 on SIGTERM"
    );
}

#[test]
fn a_master_with_ipc_mode_tcp_is_read_over_loopback_tcp() {
    let _lab_lock = lab_lock();
    let lab = Lab::start(LabOptions {
        ipc_mode_tcp: true,
        ..LabOptions::default()
    })
    .expect("start the Salt lab");
    let master_config = lab.master_config();
    let mc = master_config.to_str().expect("utf-8 path");
    let check = std::process::Command::new(crate::support::bin())
        .args(["--master-config", mc, "check-config"])
        .output()
        .expect("check-config");
    let endpoint = lab.endpoint().to_string();
    assert!(endpoint.starts_with("tcp:127.0.0.1:"), "{endpoint}");
    assert!(String::from_utf8_lossy(&check.stdout).contains(&format!("bus endpoint: {endpoint}")));

    let mut tail = Saltsight::spawn_connected(&[
        "--master-config",
        mc,
        "--log-format",
        "json",
        "tail",
        "--json",
        "--tag",
        "salt/job/*/ret/*",
        "--count",
        "3",
    ]);
    salt_ok(&lab, &["*", "test.ping", "--out", "json", "--static"]);
    let mut lines = Vec::new();
    for _ in 0..3 {
        wait_line(&tail.stdout, &mut lines, Duration::from_secs(20), |_| true).expect("a return");
    }
    let minions: BTreeSet<String> = json_lines(&lines)
        .iter()
        .filter_map(|e| e["data"]["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(minions.len(), 3, "{lines:?}");
    // --count 3 ends tail by itself.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut exited = None;
    while Instant::now() < deadline && exited.is_none() {
        exited = tail.try_exit();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        exited.is_some_and(|s| s.success()),
        "tail --count 3 exits 0 by itself"
    );
}
