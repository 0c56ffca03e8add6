//! The fleet store against real servers: two ClickHouse 18.16 servers on
//! loopback as the two shards of the cluster `saltsight`
//! (packaging/clickhouse/legacy/cluster.sql), two real Salt masters whose state
//! trees are the same git checkout, each watched by its own saltsight writing
//! into a different server's Distributed table. The masters are named so that
//! each agent's records belong on the other server's shard. One server is
//! stopped mid-run: the other queues its shard's rows on disk, the agent writing
//! to it keeps them in its spool, and once it is back every record is there
//! exactly once after dedup, each on its master's shard; the fleet queries answer
//! across both masters. The same runs' rows, as the `clickhouse` encoding made
//! them (a second output catches them), go into current ClickHouse (chdb 26.9)
//! with schema.sql, where the views answer the fleet queries the same way.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use saltsight::lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::clickhouse::{Chdb, ClickHouse, packaging, statements};
use crate::support::upstream::{Reply, Upstream};
use crate::support::{
    Received, Saltsight, jid_from, lab_lock, read_records, record_ids, wait_line,
};

/// Each agent's master id, and the shard (0-based) its records belong on:
/// the other agent's server.
const MASTERS: [(&str, u64); 2] = [("edge-b", 1), ("edge-a", 0)];

const WEB_OK: &str =
    "web_conf:\n  file.managed:\n    - name: {{ opts['cachedir'] }}/web.conf\n    - contents: ok\n";
const WEB_BROKEN: &str = "web_conf:\n  file.managed:\n    - name: {{ opts['cachedir'] }}/web.conf\n    - source: salt://files/web.conf\n";

/// Commits `text` as `web.sls` with a fixed author and date, so both masters'
/// checkouts get the same commit ids, as clones of one repository would.
fn commit(states: &Path, text: &str, subject: &str, date: &str) -> String {
    std::fs::write(states.join("web.sls"), text).expect("write sls");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(states)
            .env("GIT_AUTHOR_NAME", "alice")
            .env("GIT_AUTHOR_EMAIL", "alice@example.com")
            .env("GIT_COMMITTER_NAME", "alice")
            .env("GIT_COMMITTER_EMAIL", "alice@example.com")
            .env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    if !states.join(".git").exists() {
        git(&["init", "-q", "-b", "main"]);
    }
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", subject]);
    git(&["rev-parse", "HEAD"])
}

fn config(lab: &Lab, dir: &Path, master: &str, cluster: &str, copy: &str) -> String {
    let config = dir.join("saltsight.toml");
    let http = |name: &str, url: &str| {
        format!(
            "[[output]]\ntype = \"http\"\nname = \"{name}\"\nencoding = \"clickhouse\"\nurl = {url:?}\n\
             batch_max_age = \"200ms\"\nretry_min = \"100ms\"\nretry_max = \"1s\"\n\n"
        )
    };
    std::fs::write(
        &config,
        format!(
            "master_id = {master:?}\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"test.*\" = \"5s\", \"state.*\" = \"60s\" }}\n\
             [rollouts]\nupdate_every = \"1s\"\n\
             [spool]\ndir = {:?}\n\n[[output]]\ntype = \"stdout\"\n\n{}{}",
            lab.master_config().display().to_string(),
            dir.join("spool").display().to_string(),
            http("cluster", cluster),
            http("copy", copy),
        ),
    )
    .expect("write config");
    config.display().to_string()
}

fn has(seen: &[Received], kind: &str, jid: &str) -> bool {
    seen.iter()
        .any(|r| r.record["kind"] == kind && r.record["jid"] == jid)
}

fn row_with<'a>(rows: &'a [Value], field: &str, value: &str) -> &'a Value {
    rows.iter()
        .find(|r| r[field] == value)
        .unwrap_or_else(|| panic!("no row with {field} = {value}: {rows:?}"))
}

/// Files the Distributed table of `server` holds for a shard it could not reach.
fn queued(server: &ClickHouse) -> usize {
    let table = server.data_dir().join("data/saltsight/records");
    let Ok(entries) = std::fs::read_dir(&table) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten())
        .filter_map(Result::ok)
        .filter(|f| f.path().extension().is_some_and(|e| e == "bin"))
        .count()
}

#[test]
fn two_masters_write_into_a_two_shard_cluster_and_lose_nothing_while_a_shard_is_down() {
    let _lock = lab_lock();
    let mut servers = ClickHouse::cluster(2);
    for (master, shard) in MASTERS {
        let hash = servers[0].rows(&format!("SELECT cityHash64('{master}') % 2 AS shard"));
        assert_eq!(hash[0]["shard"], shard, "{master}");
    }
    let copy = Upstream::start(Vec::new(), Reply::status(200));
    let options = || LabOptions {
        minions: ["web1", "web2"].map(String::from).to_vec(),
        ..LabOptions::default()
    };
    let labs = [
        Lab::start(options()).expect("lab 1 starts"),
        Lab::start(options()).expect("lab 2 starts"),
    ];
    let a = "2026-11-20T10:00:00+00:00";
    let mut ok = String::new();
    for lab in &labs {
        ok = commit(&lab.root().join("states"), WEB_OK, "web: first config", a);
    }
    let dirs = [
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    ];
    let mut agents: Vec<Saltsight> = (0..2)
        .map(|i| {
            let config = config(
                &labs[i],
                dirs[i].path(),
                MASTERS[i].0,
                &servers[i].url(),
                &copy.url(),
            );
            Saltsight::spawn_connected(&["--config", &config, "run"])
        })
        .collect();
    let mut seen: [Vec<Received>; 2] = [Vec::new(), Vec::new()];
    let apply = |lab: &Lab, extra: &[&str]| {
        let mut args = vec!["--show-jid", "*", "state.apply", "web"];
        args.extend_from_slice(extra);
        jid_from(&lab.salt(&args).expect("state.apply"))
    };

    // Both masters pass under commit A.
    for i in 0..2 {
        let jid = apply(&labs[i], &[]);
        read_records(
            &agents[i].stdout,
            &mut seen[i],
            Duration::from_secs(60),
            |s| has(s, "job_completed", &jid),
        )
        .expect("the passing run completes");
    }

    // The second server stops; commit B breaks web_conf on both masters.
    servers[1].stop();
    let mut broken = String::new();
    for lab in &labs {
        broken = commit(
            &lab.root().join("states"),
            WEB_BROKEN,
            "web: move config to a file",
            "2026-11-21T10:00:00+00:00",
        );
    }
    for i in 0..2 {
        let jid = apply(&labs[i], &["--metadata", r#"{"release": "r9"}"#]);
        let ping = labs[i]
            .salt(&["--show-jid", "-L", "web1,ghost9", "test.ping"])
            .expect("test.ping");
        let ping = jid_from(&ping);
        read_records(
            &agents[i].stdout,
            &mut seen[i],
            Duration::from_secs(60),
            |s| {
                has(s, "failure_group", &jid)
                    && has(s, "job_completed", &ping)
                    && s.iter().any(|r| {
                        r.record["kind"] == "minion_missing" && r.record["minion"] == "ghost9"
                    })
                    && s.iter().any(|r| {
                        r.record["kind"] == "rollout"
                            && r.record["commit"] == broken.as_str()
                            && r.record["failed"] == 2
                    })
            },
        )
        .expect("the broken run's failure group, the ping's verdict, its missing ghost and B's failed rollout");
    }
    // The agent writing to the stopped server retries; the other's server took
    // its rows and keeps those of the stopped shard on its disk.
    let mut log = Vec::new();
    wait_line(&agents[1].stderr, &mut log, Duration::from_secs(20), |l| {
        l.contains("Upstream did not take the batch; retrying.")
    })
    .expect("the agent of the stopped server retries");
    let deadline = Instant::now() + Duration::from_secs(30);
    while queued(&servers[0]) == 0 {
        assert!(
            Instant::now() < deadline,
            "nothing queued for the stopped shard"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Back: every record of both agents, once after dedup, each on its shard.
    servers[1].resume();
    let emitted: std::collections::BTreeSet<String> =
        seen.iter().flat_map(|s| record_ids(s)).collect();
    for server in &servers {
        server.wait_stored(&emitted, Duration::from_secs(90));
    }
    let stored =
        servers[0].rows("SELECT id, kind, master, jid, minion FROM saltsight.records FINAL");
    let extra: Vec<&Value> = stored
        .iter()
        .filter(|r| !emitted.contains(r["id"].as_str().expect("id")))
        .collect();
    let read: Vec<String> = seen
        .iter()
        .flatten()
        .map(|r| {
            format!(
                "{} {} {} {}",
                r.record["master"], r.record["kind"], r.record["jid"], r.record["minion"]
            )
        })
        .collect();
    assert_eq!(
        stored.len(),
        emitted.len(),
        "not emitted: {extra:?}\nread: {read:#?}"
    );
    for (master, shard) in MASTERS {
        let local = servers[shard as usize]
            .rows("SELECT groupUniqArray(master) AS masters FROM saltsight.records_local");
        assert_eq!(local[0]["masters"], serde_json::json!([master]));
    }

    // The fleet queries (18.16: raw rows) across both masters.
    let queries = statements(&packaging("legacy/queries.sql"));
    let top = servers[0].rows(&queries[0]);
    let web = row_with(&top, "state_id", "web_conf");
    assert_eq!(web["masters"], 2);
    assert_eq!(web["failures"], 4);
    assert_eq!(web["commit"], broken.as_str());
    assert_eq!(web["commit_subject"], "web: move config to a file");
    let missing = servers[1].rows(&queries[1]);
    assert_eq!(row_with(&missing, "minion", "ghost9")["missing"], 2);
    let groups = servers[0].rows(&queries[2]);
    let group = row_with(&groups, "state_id", "web_conf");
    assert_eq!(group["masters"], 2);
    assert_eq!(group["minions"], 4);
    assert_eq!(group["on_masters"], serde_json::json!(["edge-a", "edge-b"]));
    let releases = servers[1].rows(&queries[3]);
    assert_eq!(row_with(&releases, "release", "r9")["failed_returns"], 4);
    let suspects = servers[0].rows(
        "SELECT DISTINCT suspect_last_ok, suspect_first_failed FROM saltsight.records WHERE kind = 'failure_group'",
    );
    assert_eq!(
        suspects,
        [serde_json::json!({"suspect_last_ok": ok, "suspect_first_failed": broken})]
    );

    // The same rows in current ClickHouse, through the views.
    let mut ch = Chdb::start();
    ch.apply(&packaging("schema.sql"));
    for request in copy.requests() {
        ch.insert("saltsight.records", &request.body);
    }
    let queries = statements(&packaging("queries.sql"));
    let top = ch.rows(&queries[0]);
    let web = row_with(&top, "state_id", "web_conf");
    assert_eq!(
        (&web["masters"], &web["minions"]),
        (&Value::from(2), &Value::from(2))
    );
    assert_eq!(web["failures"], 4);
    assert_eq!(web["commit_subject"], "web: move config to a file");
    let missing = ch.rows(&queries[1]);
    assert_eq!(row_with(&missing, "minion", "ghost9")["missing"], 2);
    let groups = ch.rows(&queries[2]);
    let group = row_with(&groups, "state_id", "web_conf");
    assert_eq!(
        (&group["masters"], &group["minions"]),
        (&Value::from(2), &Value::from(4))
    );
    assert_eq!(group["jobs"], 2);
    let releases = ch.rows(&queries[3]);
    let r9 = row_with(&releases, "release", "r9");
    assert_eq!(
        (&r9["jobs"], &r9["failed_returns"]),
        (&Value::from(2), &Value::from(4))
    );
    let rollouts = ch.rows(&queries[4]);
    let b = row_with(&rollouts, "commit", &broken);
    assert_eq!(b["masters"], 2);
    assert_eq!(b["subject"], "web: move config to a file");
    assert!(b["delay_to_first_s"].as_i64().expect("a delay") > 0, "{b}");
    // Release delay per commit: A reached every minion of both masters (its
    // delay from the commit's fixed date is days); B failed on all four.
    let delays = ch.rows(&queries[6]);
    let a = row_with(&delays, "commit", &ok);
    assert_eq!(
        (&a["masters"], &a["applied"], &a["statuses"]),
        (
            &Value::from(2),
            &Value::from(4),
            &serde_json::json!(["complete"])
        ),
        "{a}"
    );
    assert!(
        a["to_100_s"].as_f64().expect("a delay to 100%") > 86_400.0,
        "{a}"
    );
    let b = row_with(&delays, "commit", &broken);
    assert_eq!(
        (&b["failed"], &b["applied"]),
        (&Value::from(4), &Value::from(0)),
        "{b}"
    );
    assert!(b["to_100_s"].is_null(), "{b}");
    // The failed rollout's root cause, across both masters.
    let failed = ch.rows(&queries[7]);
    assert_eq!(failed.len(), 1, "{failed:?}");
    let cause = &failed[0];
    assert_eq!(cause["commit"], broken.as_str());
    assert_eq!(
        (
            &cause["state_id"],
            &cause["category"],
            &cause["masters"],
            &cause["minions"],
            &cause["failed"]
        ),
        (
            &Value::from("web_conf"),
            &Value::from("source_missing"),
            &Value::from(2),
            &Value::from(4),
            &Value::from(4)
        ),
        "{cause}"
    );
    let stored = ch.query("SELECT count() FROM saltsight.records FINAL");
    assert_eq!(stored.trim(), emitted.len().to_string());

    for agent in &mut agents {
        let status = agent.terminate(Duration::from_secs(6)).expect("exits");
        assert!(status.success(), "{status:?}");
    }
}
