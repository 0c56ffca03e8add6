//! External incidents against a real Salt master: a state whose file source
//! is a loopback HTTP port nobody listens on, and a command that looks up a
//! name that cannot resolve, applied to every minion in two jobs, beside a
//! state broken on its own. One `external_incident` per target with the right
//! minions and jobs; the broken state in neither; the HTTP target's incident
//! closes, recovered, once a server answers there and the state succeeds.
//! The same run's rows, as the `clickhouse` encoding made them, replayed as
//! two masters into current ClickHouse (chdb) answer the fleet query for a
//! target failing on several masters.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use saltsight::lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::clickhouse::{Chdb, free_port, packaging, statements};
use crate::support::upstream::{Reply, Upstream};
use crate::support::{Received, Saltsight, jid_from, lab_lock, read_records, record_ids};

const EXT: &str = "fetch_app:\n  file.managed:\n    - name: {{ opts['cachedir'] }}/app.txt\n    - source: http://127.0.0.1:PORT/app.txt\n    - skip_verify: True\n\
resolve_mirror:\n  cmd.run:\n    - name: curl -sS -o /dev/null http://mirror.saltsight-test.invalid/\n\
broken:\n  cmd.run:\n    - name: 'false'\n";

/// A static file server on `port` (loopback), stopped by pid when dropped.
struct FileServer(Child);

impl FileServer {
    fn start(dir: &std::path::Path, port: u16) -> FileServer {
        let child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the file server did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        FileServer(child)
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn of_kind<'a>(seen: &'a [Received], kind: &str) -> Vec<&'a Value> {
    seen.iter()
        .map(|r| &r.record)
        .filter(|r| r["kind"] == kind)
        .collect()
}

/// `state.apply ext` everywhere; its jid once its `groups` failure groups are in.
fn apply(lab: &Lab, run: &Saltsight, seen: &mut Vec<Received>, groups: usize) -> String {
    let out = lab
        .salt(&["--show-jid", "*", "state.apply", "ext"])
        .expect("state.apply");
    let jid = jid_from(&out);
    // Its groups come after its job_completed, in no set order.
    read_records(&run.stdout, seen, Duration::from_secs(90), |s| {
        s.iter()
            .filter(|r| r.record["kind"] == "failure_group" && r.record["jid"] == jid.as_str())
            .count()
            == groups
    })
    .expect("the job completes, with its failure groups");
    jid
}

#[test]
fn one_unreachable_host_on_every_minion_is_one_incident_that_recovers() {
    let _lock = lab_lock();
    let lab = Lab::start(LabOptions::default()).expect("lab starts");
    let port = free_port();
    std::fs::write(
        lab.root().join("states/ext.sls"),
        EXT.replace("PORT", &port.to_string()),
    )
    .expect("write ext.sls");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    let copy = Upstream::start(Vec::new(), Reply::status(200));
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"state.*\" = \"90s\" }}\n[incidents]\nupdate_every = \"1s\"\n\
             [spool]\ndir = {:?}\n\n[[output]]\ntype = \"stdout\"\n\n[[output]]\ntype = \"http\"\nname = \"copy\"\n\
             encoding = \"clickhouse\"\nurl = {:?}\nbatch_max_age = \"200ms\"\n",
            lab.master_config().display().to_string(),
            dir.path().join("spool").display().to_string(),
            copy.url(),
        ),
    )
    .expect("write config");
    let run = Saltsight::spawn_connected(&["--config", config.to_str().expect("utf-8"), "run"]);
    let mut seen = Vec::new();
    let jobs = [
        apply(&lab, &run, &mut seen, 3),
        apply(&lab, &run, &mut seen, 3),
    ];
    // The second job's failures reach each incident in its next revision.
    read_records(&run.stdout, &mut seen, Duration::from_secs(20), |s| {
        of_kind(s, "external_incident")
            .iter()
            .filter(|i| i["jobs"] == 2)
            .count()
            >= 2
    })
    .expect("both incidents grow to two jobs");

    let incidents = of_kind(&seen, "external_incident");
    let targets: BTreeSet<&str> = incidents
        .iter()
        .filter_map(|i| i["target"].as_str())
        .collect();
    let http = format!("127.0.0.1:{port}");
    assert_eq!(
        targets,
        BTreeSet::from([http.as_str(), "mirror.saltsight-test.invalid"]),
        "{incidents:?}"
    );
    for target in &targets {
        let last = incidents
            .iter()
            .rfind(|i| i["target"] == *target)
            .expect("an incident");
        assert_eq!(last["status"], "open", "{last}");
        assert_eq!(last["minions"], 3, "{last}");
        assert_eq!(last["jobs"], 2, "{last}");
        let sampled: BTreeSet<&str> = last["sample_jobs"]
            .as_array()
            .expect("sample_jobs")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(sampled, jobs.iter().map(String::as_str).collect());
    }
    fleet_query_finds_both_targets_on_two_masters(&copy, &seen, &targets);

    // The broken state is in no incident; the failures in the second job are.
    for f in of_kind(&seen, "state_failure") {
        if f["state_id"] == "broken" {
            assert!(f.get("incident").is_none(), "{f}");
        } else if f["jid"] == jobs[1].as_str() {
            assert!(f["incident"].is_string(), "{f}");
        }
    }
    let groups = of_kind(&seen, "failure_group");
    let brief: Vec<String> = groups
        .iter()
        .map(|g| format!("{} {} {}", g["jid"], g["state_id"], g["incident"]))
        .collect();
    assert!(
        groups.iter().any(|g| g["jid"] == jobs[1].as_str()
            && g["state_id"] == "fetch_app"
            && g["incident"].is_string()),
        "jobs {jobs:?}: {brief:?}"
    );

    // The host comes up: the next run's file.managed succeeds, and its
    // incident closes, recovered; the DNS one stays open.
    let files = tempfile::tempdir().expect("tempdir");
    std::fs::write(files.path().join("app.txt"), "ok\n").expect("write app.txt");
    let _server = FileServer::start(files.path(), port);
    apply(&lab, &run, &mut seen, 2);
    let closed: Vec<&Value> = of_kind(&seen, "external_incident")
        .into_iter()
        .filter(|i| i["status"] == "closed")
        .collect();
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(
        (&closed[0]["target"], &closed[0]["end"]),
        (&Value::from(http.as_str()), &Value::from("recovered"))
    );
}

/// The rows the copy output received (once it holds every record read so
/// far), inserted as they are and again as a second master: the query for a
/// target failing on several masters names both targets, on both.
fn fleet_query_finds_both_targets_on_two_masters(
    copy: &Upstream,
    seen: &[Received],
    targets: &BTreeSet<&str>,
) {
    let want = record_ids(seen);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let rows = loop {
        let rows: Vec<Value> = copy.requests().iter().flat_map(|r| r.records()).collect();
        let got: BTreeSet<String> = rows
            .iter()
            .filter_map(|r| r["id"].as_str().map(str::to_owned))
            .collect();
        if want.is_subset(&got) {
            break rows;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the copy output lacks {:?}",
            want.difference(&got).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut body = Vec::new();
    for master in ["edge-1", "edge-2"] {
        for row in &rows {
            let mut row = row.clone();
            row["master"] = master.into();
            body.extend(format!("{row}\n").into_bytes());
        }
    }
    let mut ch = Chdb::start();
    ch.apply(&packaging("schema.sql"));
    ch.insert("saltsight.records", &body);
    let queries = statements(&packaging("queries.sql"));
    let answered = ch.rows(&queries[5]);
    let found: BTreeSet<&str> = answered
        .iter()
        .filter_map(|r| r["target"].as_str())
        .collect();
    assert_eq!(&found, targets, "{answered:?}");
    for row in &answered {
        assert_eq!(
            (&row["masters"], &row["minions"], &row["open"]),
            (&Value::from(2), &Value::from(6), &Value::from(2)),
            "{row}"
        );
    }
}
