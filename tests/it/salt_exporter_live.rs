//! saltsight as a drop-in for salt-exporter, on a real Salt master with only
//! `salt_exporter_compat = true` set: salt-exporter's own end-to-end test (its
//! commands, `e2e_test/exec_commands.sh`, and the 20 series its
//! `e2e_test/e2e_test.go` expects) passes, and every query of its shipped
//! Grafana dashboard (`grafana/Saltstack-1682711767600.json`), run by a real
//! Prometheus scraping saltsight, finds the series and labels it uses.
//!
//! The commands, states, expected series and dashboard queries are carried
//! over from salt-exporter v0.13.0 (https://github.com/kpetremann/salt-exporter),
//! MIT License, Copyright (c) 2022 Kevin Petremann.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use saltsight::lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::prometheus::{packaging, prometheus};
use crate::support::upstream::get;
use crate::support::{Saltsight, lab_lock, metrics_address_once_connected};

/// `e2e_test/states`: one state that succeeds with changes, one that fails.
const STATES: [(&str, &str); 2] = [
    (
        "test/succeed.sls",
        "succeed:\n    test.succeed_with_changes:\n        - name: \"Always a success\"\n",
    ),
    (
        "test/fail.sls",
        "---\nfail:\n    test.fail_with_changes:\n        - name: \"It's ok to fail\"\n",
    ),
];

/// `e2e_test/exec_commands.sh`, after `salt foo`.
const COMMANDS: [&[&str]; 6] = [
    &["test.true"],
    &["test.exception"],
    &["state.single", "test.succeed_with_changes", "name=succeed"],
    &["state.single", "test.fail_with_changes", "name=fails"],
    &["state.sls", "test.succeed"],
    &["state.sls", "test.fail"],
];

/// A metric, labels its series must include, and the value.
type Expectation = (&'static str, Vec<(&'static str, &'static str)>, f64);

/// A scraped sample: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// `e2e_test.go`'s expectations.
fn expectations() -> Vec<Expectation> {
    let mut expected = vec![
        (
            "salt_responses_total",
            vec![("minion", "foo"), ("success", "false")],
            3.0,
        ),
        (
            "salt_responses_total",
            vec![("minion", "foo"), ("success", "true")],
            3.0,
        ),
    ];
    for (function, state, success) in [
        ("test.exception", "", "false"),
        ("test.true", "", "true"),
        ("state.single", "test.succeed_with_changes", "true"),
        ("state.single", "test.fail_with_changes", "false"),
        ("state.sls", "test.succeed", "true"),
        ("state.sls", "test.fail", "false"),
    ] {
        for metric in ["salt_new_job_total", "salt_expected_responses_total"] {
            expected.push((metric, vec![("function", function), ("state", state)], 1.0));
        }
        expected.push((
            "salt_function_responses_total",
            vec![
                ("function", function),
                ("state", state),
                ("success", success),
            ],
            1.0,
        ));
    }
    expected
}

/// The dashboard's queries (its two template variables' inner queries, then
/// every panel's), and whether the e2e run gives each a series: it runs no
/// scheduled job.
const DASHBOARD: [(&str, bool); 8] = [
    (
        "salt_scheduled_job_return_total or salt_new_job_total or salt_function_responses_total",
        true,
    ),
    (
        r#"salt_scheduled_job_return_total{function=~"$function"} or salt_new_job_total{function=~"$function"} or salt_function_responses_total{function=~"$function"}"#,
        true,
    ),
    (
        r#"sum by (function, state) (increase(salt_new_job_total{function=~"$function", state=~"$state"}[$__rate_interval]))"#,
        true,
    ),
    (
        r#"sum by (instance, function, state) (increase(salt_expected_responses_total{function=~"$function", state=~"$state"}[$__rate_interval])) - sum by (instance, function, state) (increase(salt_function_responses_total{function=~"$function", state=~"$state"}[$__rate_interval]))"#,
        true,
    ),
    (
        r#"sum by (instance, function, state) (increase(salt_function_responses_total{function=~"$function", state=~"$state",success="true"}[$__rate_interval]))"#,
        true,
    ),
    (
        r#"- sum by (instance, function, state) (increase(salt_function_responses_total{function=~"$function", state=~"$state", success="false"}[$__rate_interval]))"#,
        true,
    ),
    (
        r#"sum by (function, state) (increase(salt_scheduled_job_return_total{function=~"$function", state=~"$state", success="true"}[$__rate_interval]))"#,
        false,
    ),
    (
        r#"- sum by (function, state) (increase(salt_scheduled_job_return_total{function=~"$function", state=~"$state", success="false"}[$__rate_interval]))"#,
        false,
    ),
];

/// Every sample of an exposition: name, labels, value.
fn samples(exposition: &str) -> Vec<Sample> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let value: f64 = value.parse().ok()?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            let labels = labels
                .split("\",")
                .filter(|pair| !pair.is_empty())
                .filter_map(|pair| {
                    let (k, v) = pair.split_once("=\"")?;
                    Some((k.to_owned(), v.trim_end_matches('"').to_owned()))
                })
                .collect();
            Some((name.to_owned(), labels, value))
        })
        .collect()
}

/// e2e_test.go's `getValue`: the first series of `name` whose labels include
/// `labels`, 0 when there is none.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str).unwrap_or("") == *v)
        })
        .map_or(0.0, |(_, _, v)| *v)
}

/// The expectations not met, with the healthcheck correction e2e_test.go makes
/// (a minion's `status.ping_master` and the CLI's `saltutil.find_job` returns
/// are responses of `foo` too).
fn unmet(exposition: &str) -> Vec<String> {
    let samples = samples(exposition);
    let responses = |function: &str, success: &str| {
        value(
            &samples,
            "salt_function_responses_total",
            &[("function", function), ("state", ""), ("success", success)],
        )
    };
    expectations()
        .into_iter()
        .filter_map(|(name, labels, want)| {
            let mut got = value(&samples, name, &labels);
            if name == "salt_responses_total" {
                got -= match labels[1].1 {
                    "true" => {
                        responses("status.ping_master", "true")
                            + responses("saltutil.find_job", "true")
                    }
                    _ => responses("status.ping_master", "false"),
                };
            }
            (got != want).then(|| format!("{name}{labels:?} = {got}, expected {want}"))
        })
        .collect()
}

fn query(prometheus: SocketAddr, expr: &str) -> Vec<Value> {
    let encoded: String = url_encode(expr);
    let (status, body) =
        get(prometheus, &format!("/api/v1/query?query={encoded}")).expect("query Prometheus");
    assert_eq!(status, 200, "{expr}: {body}");
    let answer: Value = serde_json::from_str(&body).expect("Prometheus answers JSON");
    answer["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn salt_exporters_e2e_test_and_dashboard_pass_against_saltsight() {
    let _lab_lock = lab_lock();
    let lab = Lab::start(LabOptions {
        minions: vec!["foo".into()],
        ..LabOptions::default()
    })
    .expect("start the Salt lab");
    for (path, text) in STATES {
        let path = lab.root().join("states").join(path);
        std::fs::create_dir_all(path.parent().expect("dir")).expect("states dir");
        std::fs::write(path, text).expect("write state");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "[bus]\nmaster_config = {:?}\n[state]\ndir = {:?}\n[metrics]\nlisten_address = \"127.0.0.1:0\"\nsalt_exporter_compat = true\n",
            lab.master_config().display().to_string(),
            dir.path().join("state").display().to_string(),
        ),
    )
    .expect("write config");
    let config = config.display().to_string();
    let mut run = Saltsight::spawn(&["--config", &config, "--log-format", "json", "run"]);
    let mut log = Vec::new();
    let addr = metrics_address_once_connected(&run, &mut log);
    // Rules loaded only because the helper wants some; alerts go nowhere.
    let prom = prometheus(
        addr,
        &packaging("prometheus/saltsight-rules.yml"),
        SocketAddr::from(([127, 0, 0, 1], 9)),
    );

    for command in COMMANDS {
        let mut args = vec!["foo"];
        args.extend_from_slice(command);
        let out = lab.salt(&args).expect("salt");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("No response"),
            "salt {args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    // The 20 expectations, once saltsight has seen every return.
    let deadline = Instant::now() + Duration::from_secs(60);
    let exposition = loop {
        let (status, body) = get(addr, "/metrics").expect("GET /metrics");
        assert_eq!(status, 200, "{body}");
        let unmet = unmet(&body);
        if unmet.is_empty() {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "salt-exporter's e2e expectations not met:\n{}\n\n{body}",
            unmet.join("\n")
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let other: Vec<String> = samples(&exposition)
        .into_iter()
        .filter(|(name, labels, value)| {
            name.starts_with("salt_")
                && *value > 0.0
                && labels.get("function").is_some_and(|f| f == "other")
        })
        .map(|(name, labels, _)| format!("{name}{labels:?}"))
        .collect();
    assert!(other.is_empty(), "no function needed listing: {other:?}");

    // The dashboard, with its variables at "All" and a rate interval Prometheus
    // has two scrapes in: wait until Prometheus holds the final counts.
    let deadline = Instant::now() + Duration::from_secs(60);
    while query(
        prom.addr,
        "sum(salt_function_responses_total{function=\"state.sls\"})",
    )
    .first()
    .and_then(|r| r["value"][1].as_str()?.parse::<f64>().ok())
        != Some(2.0)
    {
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape the e2e series"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    for (expr, has_series) in DASHBOARD {
        let expr = expr
            .replace("$function", ".*")
            .replace("$state", ".*")
            .replace("$__rate_interval", "5m");
        if !has_series {
            let result = query(prom.addr, &expr);
            assert!(result.is_empty(), "{expr}: {result:?}");
            continue;
        }
        // `increase` needs two samples of a series in its window: when
        // Prometheus first scraped after the last job, the final counts are
        // there one scrape before any increase is.
        let deadline = Instant::now() + Duration::from_secs(30);
        let result = loop {
            let result = query(prom.addr, &expr);
            if !result.is_empty() {
                break result;
            }
            assert!(
                Instant::now() < deadline,
                "the dashboard's query finds nothing: {expr}"
            );
            std::thread::sleep(Duration::from_millis(250));
        };
        for series in &result {
            let labels = &series["metric"];
            assert!(
                labels.get("function").is_some(),
                "{expr}: a series without its function label: {series}"
            );
        }
    }
    let functions: Vec<String> = query(prom.addr, "count by (function) (salt_new_job_total)")
        .iter()
        .filter_map(|r| r["metric"]["function"].as_str().map(String::from))
        .collect();
    for function in ["test.true", "test.exception", "state.single", "state.sls"] {
        assert!(
            functions.iter().any(|f| f == function),
            "{function} in {functions:?}"
        );
    }
    run.terminate(Duration::from_secs(10));
}
