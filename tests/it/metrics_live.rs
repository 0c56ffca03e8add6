//! Metrics end to end against a real Salt master: saltsight serves /metrics, a
//! real Prometheus (Debian's 2.42) scrapes it with the shipped rules loaded, and a
//! real Alertmanager (0.25) delivers the missing-returns alert to a local webhook
//! once a minion SIGKILLed mid-job has missed three jobs (the rule wants a share
//! of expected returns and at least 3). Every metric the rules and the dashboard
//! name appears in the live output.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use saltsight::lab::{Lab, LabOptions};
use serde_json::Value;

use crate::alerts::{
    NEED_A_WATCHED_STATE_TREE, SALT_OWN_METRICS, dashboard_exprs, metric_names, rule_exprs,
    sample_names,
};
use crate::support::prometheus::{alertmanager, packaging, prometheus};
use crate::support::upstream::{Reply, Upstream, get};
use crate::support::{Saltsight, lab_lock, metrics_address_once_connected, read_records, salt_bg};

fn write_config(lab: &Lab, dir: &Path, upstream: &str) -> String {
    let config = dir.join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"test.sleep\" = \"10s\" }}\n[spool]\ndir = {:?}\n[metrics]\nlisten_address = \"127.0.0.1:0\"\nfunctions = [\"test.sleep\", \"test.ping\"]\n\n[[output]]\ntype = \"stdout\"\n\n[[output]]\ntype = \"http\"\nname = \"up\"\nurl = {upstream:?}\nbatch_max_age = \"200ms\"\n",
            lab.master_config().display().to_string(),
            dir.join("spool").display().to_string(),
        ),
    )
    .expect("write config");
    config.display().to_string()
}

/// The value of the sample whose line starts with `series`.
fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn metrics(addr: SocketAddr) -> String {
    let (status, body) = get(addr, "/metrics").expect("GET /metrics");
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn a_minion_killed_mid_job_reaches_alertmanager_as_a_missing_returns_alert() {
    let _lab_lock = lab_lock();
    let mut lab = Lab::start(LabOptions::default()).expect("start the Salt lab");
    let dir = tempfile::tempdir().expect("tempdir");
    let records_upstream = Upstream::start(Vec::new(), Reply::status(200));
    let config = write_config(&lab, dir.path(), &records_upstream.url());
    let mut run = Saltsight::spawn(&["--config", &config, "--log-format", "json", "run"]);
    let mut log = Vec::new();
    let addr = metrics_address_once_connected(&run, &mut log);
    assert_eq!(get(addr, "/healthz").expect("healthz").0, 200);
    assert_eq!(get(addr, "/readyz").expect("readyz").0, 200);

    let hook = Upstream::start(Vec::new(), Reply::status(200));
    let am = alertmanager(&hook.url());
    let rules = packaging("prometheus/saltsight-rules.yml");
    let prom = prometheus(addr, &rules, am.addr);
    // Scraped at least twice before the job, so counters have their 0 samples.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = get(
            prom.addr,
            "/api/v1/query?query=count_over_time(saltsight_bus_connected%5B1m%5D)",
        )
        .expect("query prometheus");
        let scrapes: Option<f64> = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|v| v["data"]["result"][0]["value"][1].as_str()?.parse().ok());
        if scrapes.is_some_and(|n| n >= 2.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape saltsight: {body}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    // `test.sleep 4` everywhere, db1 SIGKILLed a second in: web1 and web2 return,
    // db1 is judged at the 10 s deadline.
    let mut cli = salt_bg(&lab, &["*", "test.sleep", "4"]);
    std::thread::sleep(Duration::from_secs(1));
    lab.signal_minion("db1", Signal::SIGKILL).expect("kill db1");
    lab.stop_minion("db1").expect("reap db1");
    let mut seen = Vec::new();
    read_records(&run.stdout, &mut seen, Duration::from_secs(40), |s| {
        s.iter().any(|r| r.record["kind"] == "minion_missing")
    })
    .expect("a verdict for db1");
    let missing = seen
        .iter()
        .find(|r| r.record["kind"] == "minion_missing")
        .map(|r| r.record.clone())
        .expect("minion_missing");
    assert_eq!(missing["minion"], "db1", "{missing}");
    let first_jid = missing["jid"].as_str().expect("jid").to_owned();
    let _ = cli.wait();
    // Two more jobs while db1 is down: three of nine expected returns missing.
    let more = [
        salt_bg(&lab, &["*", "test.sleep", "1"]),
        salt_bg(&lab, &["*", "test.sleep", "1"]),
    ];
    read_records(&run.stdout, &mut seen, Duration::from_secs(40), |s| {
        s.iter()
            .filter(|r| r.record["kind"] == "minion_missing")
            .count()
            >= 3
    })
    .expect("verdicts for db1 in three jobs");
    let streaks: Vec<(String, u64)> = seen
        .iter()
        .filter(|r| r.record["kind"] == "minion_missing")
        .map(|r| {
            (
                r.record["minion"].as_str().unwrap_or_default().to_owned(),
                r.record["streak"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        streaks,
        [("db1".into(), 1), ("db1".into(), 2), ("db1".into(), 3)],
        "first job {first_jid}"
    );
    let judged_at = Instant::now();

    // The alert, through Prometheus's rule and Alertmanager's webhook.
    let requests = hook.wait(Duration::from_secs(60), |requests| {
        requests
            .iter()
            .any(|r| String::from_utf8_lossy(&r.body).contains("SaltMinionsMissingReturns"))
    });
    let notification: Value = requests
        .iter()
        .find_map(|r| {
            let body: Value = serde_json::from_slice(&r.body).ok()?;
            (body["groupLabels"]["alertname"] == "SaltMinionsMissingReturns").then_some(body)
        })
        .unwrap_or_else(|| {
            panic!(
                "no missing-returns notification in {} webhook calls",
                requests.len()
            )
        });
    eprintln!(
        "alert delivered {:?} after the verdict: {notification}",
        judged_at.elapsed()
    );
    let alert = &notification["alerts"][0];
    assert_eq!(notification["status"], "firing");
    assert_eq!(alert["labels"]["function"], "test.sleep");
    assert_eq!(alert["labels"]["severity"], "warning");
    assert_eq!(
        alert["annotations"]["summary"],
        "33.33% of test.sleep returns missing"
    );
    assert_eq!(
        alert["annotations"]["runbook_url"],
        "file:///usr/share/doc/saltsight/runbooks.md#saltminionsmissingreturns"
    );

    // saltsight's own figures agree with its records.
    let exposition = metrics(addr);
    let missing_total: f64 = exposition
        .lines()
        .filter(|l| l.starts_with("saltsight_missing_returns_total{function=\"test.sleep\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(missing_total, 3.0);
    assert_eq!(
        sample(
            &exposition,
            "saltsight_expected_returns_total{function=\"test.sleep\"}"
        ),
        Some(9.0)
    );
    assert_eq!(
        sample(&exposition, "saltsight_minions_missing_repeatedly"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &exposition,
            "saltsight_returns_total{function=\"test.sleep\",outcome=\"success\"}"
        ),
        Some(6.0)
    );
    assert_eq!(
        sample(
            &exposition,
            "saltsight_jobs_completed_total{function=\"test.sleep\",outcome=\"incomplete\"}"
        ),
        Some(3.0)
    );
    assert_eq!(sample(&exposition, "saltsight_bus_connected"), Some(1.0));
    assert!(sample(&exposition, "saltsight_minions_seen").is_some_and(|n| n >= 2.0));
    assert!(
        sample(&exposition, "saltsight_events_total{class=\"job_return\"}")
            .is_some_and(|n| n >= 2.0)
    );
    assert!(sample(&exposition, "saltsight_bus_lag_seconds_count").is_some_and(|n| n > 0.0));

    // A scraper that does not ask for OpenMetrics gets the 0.0.4 text, which
    // promtool passes; Prometheus itself asked for (and got) OpenMetrics above.
    let mut promtool = std::process::Command::new(crate::support::prometheus::PROMTOOL)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool");
    std::io::Write::write_all(&mut promtool.stdin.take().unwrap(), exposition.as_bytes())
        .expect("feed promtool");
    let checked = promtool.wait_with_output().expect("promtool");
    assert!(
        checked.status.success() && !exposition.contains("# EOF"),
        "promtool check metrics on a live scrape: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // Every metric the shipped rules and dashboard name is in the live output.
    let live = sample_names(&exposition);
    let referenced = metric_names(&rule_exprs())
        .into_iter()
        .chain(metric_names(&dashboard_exprs()))
        .collect::<BTreeSet<_>>();
    let absent: Vec<&String> = referenced
        .iter()
        .filter(|n| {
            !live.contains(*n)
                && !SALT_OWN_METRICS.contains(&n.as_str())
                && !NEED_A_WATCHED_STATE_TREE.contains(&n.as_str())
        })
        .collect();
    assert!(
        absent.is_empty(),
        "named by rules or dashboard, absent from /metrics: {absent:?}"
    );

    for mut cli in more {
        let _ = cli.wait();
    }
    lab.start_minion("db1").expect("restart db1");
    drop(prom);
    drop(am);
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success()),
        "run exits 0 on SIGTERM"
    );
}
