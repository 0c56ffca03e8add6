//! saltsight and Salt's Reactor on a real 3008.3 master (issue 33), with the
//! Reactor configured from the shipped `packaging/reactor/` files:
//!
//! - a minion SIGSTOPped during `state.apply`: saltsight fires
//!   `saltsight/job/<jid>/missing`, the Reactor runs the state again on that
//!   minion only, and the retry is recorded with run kind `reactor`; continued,
//!   the minion answers both;
//! - the same minion stopped again and left stopped: the retry goes missing
//!   too, and saltsight fires nothing more (the loop is cut, counted);
//! - a real Alertmanager posting to saltsight's `/alerts`: the alert is on the
//!   bus as `saltsight/alert/<alertname>`, and the Reactor applies the remedy
//!   state it names;
//! - the endpoint refuses a wrong password, a malformed body and an oversized
//!   one, and fires nothing for them.
//!
//! A `saltsight tail` beside it is the bus's witness.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use saltsight::lab::{Lab, LabOptions};

use crate::support::prometheus::alertmanager;
use crate::support::upstream::{get_as, request};
use crate::support::{Received, Saltsight, lab_lock, metrics_address_once_connected, read_records};

fn shipped(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("packaging/reactor")
        .join(name)
}

/// The shipped master config, with the SLS where this checkout has them.
fn reactor_config() -> String {
    let conf = std::fs::read_to_string(shipped("saltsight-reactor.conf")).expect("shipped conf");
    conf.replace(
        "/usr/share/saltsight/reactor/",
        &format!("{}/", shipped("").display()),
    )
}

/// `POST` to saltsight's `/alerts` as `user:password`: the status and the body.
fn post(addr: std::net::SocketAddr, body: &[u8], credentials: Option<&str>) -> (u16, String) {
    let auth = credentials.map_or(String::new(), |c| {
        format!("Authorization: Basic {}\r\n", base64_encode(c))
    });
    request(addr, "POST", "/alerts", &auth, body).expect("POST /alerts")
}

fn scrape(addr: std::net::SocketAddr) -> String {
    get_as(addr, "/metrics", "alertmanager", "salt")
        .expect("scrape")
        .1
}

fn count(exposition: &str, name: &str) -> u64 {
    exposition
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

fn event<'a>(seen: &'a [Received], tag: &str) -> Option<&'a serde_json::Value> {
    seen.iter()
        .find(|e| e.record["tag"] == tag)
        .map(|e| &e.record["data"])
}

/// The job the Reactor started in answer to `original`, from the records.
fn retry_of<'a>(records: &'a [Received], original: &str) -> Option<&'a serde_json::Value> {
    records
        .iter()
        .map(|r| &r.record)
        .find(|r| r["kind"] == "job_completed" && r["metadata"]["saltsight_retry_of"] == original)
}

#[test]
fn verdicts_and_alerts_reach_the_reactor_and_a_failing_retry_fires_nothing() {
    let _lab_lock = lab_lock();
    let lab = Lab::start(LabOptions {
        minions: vec!["web1".into(), "web2".into()],
        extra_master: reactor_config(),
        ..LabOptions::default()
    })
    .expect("start the Salt lab");
    let states = lab.root().join("states");
    std::fs::write(
        states.join("retried.sls"),
        "retried:\n  test.succeed_with_changes: []\n",
    )
    .expect("retried.sls");
    std::fs::create_dir_all(states.join("remedies")).expect("remedies/");
    std::fs::write(
        states.join("remedies/noted.sls"),
        "remedy noted:\n  test.succeed_without_changes: []\n",
    )
    .expect("remedies/noted.sls");

    let dir = tempfile::tempdir().expect("tempdir");
    // Basic auth on loopback: the endpoint would take loopback without it,
    // but a wrong password must be refused when it is set. Password `salt`.
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!(
            "basic_auth_users:\n  alertmanager: {}\n",
            bcrypt::hash("salt", 4).expect("bcrypt")
        ),
    )
    .expect("web.yml");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"state.apply\" = \"5s\" }}\n\
             [metrics]\nlisten_address = \"127.0.0.1:0\"\nweb_config_file = {:?}\n\
             [reactor]\nenabled = true\nalerts = true\nalerts_max_bytes = 4096\n",
            lab.master_config().display().to_string(),
            web.display().to_string(),
        ),
    )
    .expect("write config");
    let config_arg = config.to_str().expect("utf-8");
    let mut run = Saltsight::spawn(&["--config", config_arg, "--log-format", "json", "run"]);
    let mut log = Vec::new();
    let metrics = metrics_address_once_connected(&run, &mut log);
    let tail = Saltsight::spawn_connected(&[
        "--config",
        config_arg,
        "tail",
        "--json",
        "--tag",
        "saltsight/*",
    ]);
    let (mut records, mut bus) = (Vec::new(), Vec::new());
    let good = Some("alertmanager:salt");

    // 1. web2 hangs during state.apply: its verdict fires, the Reactor retries
    //    on web2 alone, and web2, continued, answers both.
    lab.signal_minion("web2", Signal::SIGSTOP)
        .expect("stop web2");
    let out = lab
        .salt(&["--async", "*", "state.apply", "retried"])
        .expect("salt");
    let first = crate::support::jid_from(&out);
    let tag = format!("saltsight/job/{first}/missing");
    read_records(&tail.stdout, &mut bus, Duration::from_secs(30), |s| {
        event(s, &tag).is_some()
    })
    .expect("saltsight's verdict is on the bus");
    let fired = event(&bus, &tag).expect("fired");
    assert_eq!(fired["minions"], serde_json::json!(["web2"]), "{fired}");
    assert_eq!(fired["fun"], "state.apply");
    assert_eq!(fired["arg"], serde_json::json!(["retried"]));
    assert_eq!(fired["reasons"]["web2"]["reason"], "no_response", "{fired}");
    assert_eq!(fired["retry_of"], first.as_str());
    read_records(&run.stdout, &mut records, Duration::from_secs(30), |s| {
        s.iter().any(|r| {
            r.record["kind"] == "job_published"
                && r.record["fun"] == "state.apply"
                && r.record["jid"] != first.as_str()
        })
    })
    .expect("the Reactor published a retry");
    let retry = records
        .iter()
        .map(|r| &r.record)
        .find(|r| r["kind"] == "job_published" && r["jid"] != first.as_str())
        .expect("retry");
    assert_eq!(
        retry["tgt"],
        serde_json::json!(["web2"]),
        "web2 only: {retry}"
    );
    assert_eq!(retry["expected"], serde_json::json!(["web2"]), "{retry}");
    let retry_jid = retry["jid"].as_str().expect("jid").to_owned();
    lab.signal_minion("web2", Signal::SIGCONT)
        .expect("continue web2");
    read_records(&run.stdout, &mut records, Duration::from_secs(30), |s| {
        retry_of(s, &first).is_some()
    })
    .expect("the retry completed");
    let completed = retry_of(&records, &first).expect("completed");
    assert_eq!(completed["jid"], retry_jid.as_str());
    assert_eq!(completed["run_kind"], "reactor", "{completed}");
    assert_eq!(completed["succeeded"], 1, "web2 ran the retry: {completed}");

    // 2. web2 stopped and left stopped: the retry goes missing too, and
    //    saltsight fires nothing about it.
    lab.signal_minion("web2", Signal::SIGSTOP)
        .expect("stop web2 again");
    let out = lab
        .salt(&["--async", "*", "state.apply", "retried"])
        .expect("salt");
    let second = crate::support::jid_from(&out);
    read_records(&run.stdout, &mut records, Duration::from_secs(40), |s| {
        retry_of(s, &second).is_some()
    })
    .expect("the second retry closed without web2");
    let completed = retry_of(&records, &second).expect("completed");
    assert_eq!(completed["run_kind"], "reactor");
    assert_eq!(completed["missing"]["no_response"], 1, "{completed}");
    // Counted in the same write as that record, just after stdout's.
    let held_back = || count(&scrape(metrics), "saltsight_reactor_loop_suppressed_total");
    let asked = Instant::now();
    while held_back() == 0 {
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "the retry's verdict was not held back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(held_back(), 1);

    // 3. The endpoint refuses what it must, and fires nothing for it.
    let alert = |name: &str| {
        serde_json::json!({
            "version": "4", "status": "firing", "receiver": "hook", "groupKey": "{}:{}",
            "alerts": [{
                "status": "firing",
                "labels": {"alertname": name, "minion": "web1"},
                "annotations": {"salt_state": "remedies.noted"},
                "startsAt": "2026-11-26T04:00:00Z", "fingerprint": "f00d"
            }]
        })
        .to_string()
    };
    let (status, _) = post(metrics, alert("Sentinel").as_bytes(), None);
    assert_eq!(status, 401, "no password");
    let wrong = Some("alertmanager:wrong");
    assert_eq!(post(metrics, alert("Sentinel").as_bytes(), wrong).0, 401);
    let (status, body) = post(metrics, b"{\"version\": \"3\", \"alerts\": []}", good);
    assert_eq!(status, 400, "{body}");
    assert_eq!(post(metrics, b"not json", good).0, 400);
    let (status, body) = post(metrics, &vec![b' '; 8192], good);
    assert_eq!(status, 413, "{body}");
    let refused = count(
        &scrape(metrics),
        "saltsight_reactor_alert_requests_refused_total",
    );
    assert_eq!(refused, 5);
    // A sentinel alert goes through the same writer as the verdicts, in
    // order: once it is on the bus, a verdict about the second retry would
    // have been before it.
    let (status, body) = post(metrics, alert("Sentinel").as_bytes(), good);
    assert_eq!(status, 200, "{body}");
    read_records(&tail.stdout, &mut bus, Duration::from_secs(20), |s| {
        event(s, "saltsight/alert/Sentinel").is_some()
    })
    .expect("the sentinel alert is on the bus");
    let missing: Vec<&str> = bus
        .iter()
        .filter_map(|e| e.record["tag"].as_str())
        .filter(|t| t.starts_with("saltsight/job/") && t.ends_with("/missing"))
        .collect();
    assert_eq!(
        missing,
        [
            format!("saltsight/job/{first}/missing"),
            format!("saltsight/job/{second}/missing")
        ],
        "one verdict per original job, none for a retry"
    );
    let retries = [
        retry_jid.as_str(),
        retry_of(&records, &second)
            .and_then(|r| r["jid"].as_str())
            .expect("jid"),
    ];
    for e in &bus {
        let tag = e.record["tag"].as_str().unwrap_or_default();
        assert!(
            !retries.iter().any(|r| tag.contains(r)),
            "fired about a retry: {}",
            e.record
        );
    }

    // 4. A real Alertmanager: an alert posted to it reaches the bus through
    //    saltsight, and the Reactor applies the remedy it names on web1.
    let hook = format!("http://alertmanager:salt@{metrics}/alerts");
    let manager = alertmanager(&hook);
    let started = Instant::now();
    let alerts = serde_json::json!([{
        "labels": {"alertname": "DiskAlmostFull", "minion": "web1"},
        "annotations": {"salt_state": "remedies.noted"}
    }])
    .to_string();
    let (status, body) = request(
        manager.addr,
        "POST",
        "/api/v2/alerts",
        "Content-Type: application/json\r\n",
        alerts.as_bytes(),
    )
    .expect("POST to Alertmanager");
    assert!((200..300).contains(&status), "{status} {body}");
    read_records(&tail.stdout, &mut bus, Duration::from_secs(30), |s| {
        event(s, "saltsight/alert/DiskAlmostFull").is_some()
    })
    .expect("Alertmanager's alert is on the bus");
    let on_bus = event(&bus, "saltsight/alert/DiskAlmostFull").expect("alert");
    assert_eq!(on_bus["status"], "firing");
    assert_eq!(on_bus["labels"]["minion"], "web1");
    assert_eq!(on_bus["receiver"], "hook");
    read_records(&run.stdout, &mut records, Duration::from_secs(30), |s| {
        s.iter().any(|r| {
            r.record["kind"] == "job_completed"
                && r.record["metadata"]["saltsight_alert"] == "DiskAlmostFull"
                && r.record["succeeded"] == 1
        })
    })
    .expect("the Reactor applied the remedy on web1");
    let remedy = records
        .iter()
        .map(|r| &r.record)
        .find(|r| r["kind"] == "job_published" && r["arg"][0] == "remedies.noted")
        .expect("the remedy's publication");
    assert_eq!(remedy["tgt"], serde_json::json!(["web1"]));
    eprintln!("alert to remedy: {:?}", started.elapsed());

    lab.signal_minion("web2", Signal::SIGCONT)
        .expect("continue web2");
    drop(manager);
    drop(tail);
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success()),
        "run exits 0 on SIGTERM"
    );
}

fn base64_encode(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}
