//! salt-exporter's series on made events: its e2e expectations, its label
//! rules, its switches, the bounds.

use serde_json::json;

use super::*;
use crate::config::metrics::LabelChoice;
use crate::config::salt_exporter::{SaltExporterSection, resolve};
use crate::event::{decode, encode_frame};

struct Exporter {
    registry: Registry,
    metrics: SaltExporterMetrics,
    functions: LabelValues,
    refused_functions: Counter,
    refused_states: Counter,
}

impl Exporter {
    fn new(section: SaltExporterSection, functions: LabelChoice) -> Self {
        let mut errors = Vec::new();
        let config = resolve(&section, None, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let mut registry = Registry::default();
        let refused_states = Counter::default();
        let refused_functions = Counter::default();
        let metrics = SaltExporterMetrics::register(
            &mut registry,
            config,
            100,
            Counter::default(),
            refused_states.clone(),
        );
        Exporter {
            registry,
            metrics,
            functions: LabelValues::new(&functions, refused_functions.clone()),
            refused_functions,
            refused_states,
        }
    }

    fn learned() -> Self {
        let functions = LabelChoice::Learned {
            seed: Vec::new(),
            max: 200,
        };
        Exporter::new(SaltExporterSection::default(), functions)
    }

    fn event(&mut self, tag: &str, data: serde_json::Value) {
        let frame = encode_frame(tag, &rmp_serde::to_vec_named(&data).unwrap(), false);
        let event = decode(&frame).expect("decode");
        self.metrics.event(&event, &mut self.functions);
    }

    fn job(&mut self, jid: &str, fun: &str, arg: serde_json::Value, ret: serde_json::Value) {
        let fun_args = arg.clone();
        self.event(
            &format!("salt/job/{jid}/new"),
            json!({"jid": jid, "fun": fun, "arg": arg, "minions": ["foo"], "tgt": "foo", "tgt_type": "glob", "_stamp": "2026-11-26T01:00:00.000000"}),
        );
        let mut data = json!({"jid": jid, "id": "foo", "fun": fun, "fun_args": fun_args, "_stamp": "2026-11-26T01:00:01.000000"});
        let object = data.as_object_mut().unwrap();
        for (k, v) in ret.as_object().unwrap() {
            object.insert(k.clone(), v.clone());
        }
        self.event(&format!("salt/job/{jid}/ret/foo"), data);
    }

    /// The value of the first series named `name` whose labels include `labels`
    /// (salt-exporter's e2e matching).
    fn sample(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find(|line| {
                (line.starts_with(&format!("{name}{{")) || line.starts_with(&format!("{name} ")))
                    && labels
                        .iter()
                        .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
            })
            .and_then(|line| line.rsplit(' ').next()?.parse().ok())
    }
}

fn state_ret(id: &str, result: bool, duration: f64) -> serde_json::Value {
    json!({
        "retcode": if result { 0 } else { 2 },
        "success": true,
        "return": {format!("test_|-{id}_|-{id}_|-succeed_with_changes"): {"result": result, "changes": {"a": 1}, "duration": duration}},
    })
}

/// salt-exporter's e2e expectations (e2e_test/e2e_test.go, MIT, Copyright (c)
/// 2022 Kevin Petremann), on events shaped as Salt 3008 fires them; the live
/// test runs the same commands on a real master.
#[test]
fn salt_exporters_e2e_expectations_hold_without_listing_functions() {
    let mut exporter = Exporter::learned();
    exporter.job(
        "1",
        "test.true",
        json!([]),
        json!({"retcode": 0, "success": true, "return": true}),
    );
    exporter.job(
        "2",
        "test.exception",
        json!([]),
        json!({"retcode": 1, "success": false, "return": "Traceback"}),
    );
    exporter.job(
        "3",
        "state.single",
        json!(["test.succeed_with_changes", {"__kwarg__": true, "name": "succeed"}]),
        state_ret("succeed", true, 1.0),
    );
    exporter.job(
        "4",
        "state.single",
        json!(["test.fail_with_changes", {"__kwarg__": true, "name": "fails"}]),
        state_ret("fails", false, 1.0),
    );
    exporter.job(
        "5",
        "state.sls",
        json!(["test.succeed"]),
        state_ret("succeed", true, 2.5),
    );
    exporter.job(
        "6",
        "state.sls",
        json!(["test.fail"]),
        state_ret("fail", false, 3.0),
    );
    let expect = |name: &str, labels: &[(&str, &str)], value: f64| {
        assert_eq!(
            exporter.sample(name, labels),
            Some(value),
            "{name} {labels:?}"
        );
    };
    expect(
        "salt_responses_total",
        &[("minion", "foo"), ("success", "false")],
        3.0,
    );
    expect(
        "salt_responses_total",
        &[("minion", "foo"), ("success", "true")],
        3.0,
    );
    for (function, state, success) in [
        ("test.true", "", "true"),
        ("test.exception", "", "false"),
        ("state.single", "test.succeed_with_changes", "true"),
        ("state.single", "test.fail_with_changes", "false"),
        ("state.sls", "test.succeed", "true"),
        ("state.sls", "test.fail", "false"),
    ] {
        let labels = [("function", function), ("state", state)];
        expect("salt_new_job_total", &labels, 1.0);
        expect("salt_expected_responses_total", &labels, 1.0);
        let with_success = [labels[0], labels[1], ("success", success)];
        expect("salt_function_responses_total", &with_success, 1.0);
    }
    // Seconds, not Salt's milliseconds; the last job's.
    expect(
        "salt_job_duration_seconds",
        &[("function", "state.sls"), ("state", "test.fail")],
        0.003,
    );
    expect(
        "salt_responses_last_received_response",
        &[("minion", "foo")],
        {
            let now = now_unix() as f64;
            exporter
                .sample(
                    "salt_responses_last_received_response",
                    &[("minion", "foo")],
                )
                .filter(|t| (now - t).abs() < 60.0)
                .unwrap_or(-1.0)
        },
    );
    assert_eq!(exporter.refused_functions.get(), 0);
}

#[test]
fn state_labels_follow_salt_exporters_rules() {
    let label = |fun: &str, arg: serde_json::Value| {
        let raw = rmp_serde::to_vec_named(&arg).unwrap();
        state_label(fun, Some(Raw(&raw)))
    };
    assert_eq!(label("state.apply", json!([])), "highstate");
    assert_eq!(label("state.apply", json!(["web,db"])), "web,db");
    assert_eq!(
        label("state.sls", json!([{"__kwarg__": true, "mods": "web"}])),
        "web"
    );
    // salt-exporter's reading: a first argument that is a map without `mods`
    // (`state.apply test=True`) is no SLS, not a highstate.
    assert_eq!(
        label("state.apply", json!([{"__kwarg__": true, "test": true}])),
        ""
    );
    assert_eq!(label("state.sls", json!([])), "");
    assert_eq!(
        label(
            "state.single",
            json!([{"__kwarg__": true, "fun": "pkg.installed"}])
        ),
        "pkg.installed"
    );
    assert_eq!(label("state.highstate", json!([])), "highstate");
    assert_eq!(label("cmd.run", json!(["ls"])), "");
    assert_eq!(state_label("state.apply", None), "highstate");
}

#[test]
fn functions_and_states_past_their_bounds_are_other_and_counted() {
    let functions = LabelChoice::Learned {
        seed: Vec::new(),
        max: 2,
    };
    let mut exporter = Exporter::new(SaltExporterSection::default(), functions);
    for (i, fun) in ["a.one", "b.two", "c.three", "d.four", "c.three"]
        .iter()
        .enumerate()
    {
        exporter.job(
            &i.to_string(),
            fun,
            json!([]),
            json!({"retcode": 0, "return": true}),
        );
    }
    assert_eq!(
        exporter.sample("salt_new_job_total", &[("function", "b.two")]),
        Some(1.0)
    );
    assert_eq!(
        exporter.sample("salt_new_job_total", &[("function", "other")]),
        Some(3.0)
    );
    assert_eq!(
        exporter.refused_functions.get(),
        2,
        "c.three and d.four, once each"
    );
    for i in 0..MAX_STATES + 5 {
        exporter.job(
            "9",
            "state.sls",
            json!([format!("sls{i}")]),
            state_ret("x", true, 1.0),
        );
    }
    assert_eq!(
        exporter.sample(
            "salt_new_job_total",
            &[("function", "other"), ("state", "other")]
        ),
        Some(6.0),
        "the last 6 SLS, past the seeded highstate and 499 learned"
    );
    assert_eq!(exporter.refused_states.get(), 6);
}

#[test]
fn salt_exporters_switches_change_what_is_counted() {
    let section = SaltExporterSection {
        minion_label: Some(true),
        ignore_test: Some(true),
        status_functions: Some(vec!["state.*".into()]),
        status_states: Some(vec!["*".into()]),
        disable: Some(vec!["salt_responses_total".into()]),
        ..SaltExporterSection::default()
    };
    let mut exporter = Exporter::new(section, LabelChoice::Listed(vec!["state.sls".into()]));
    exporter.job("1", "state.sls", json!(["web"]), state_ret("w", false, 1.0));
    exporter.job(
        "2",
        "state.sls",
        json!(["web", {"__kwarg__": true, "test": true}]),
        state_ret("w", true, 1.0),
    );
    let labels = [
        ("minion", "foo"),
        ("function", "state.sls"),
        ("state", "web"),
        ("success", "false"),
    ];
    assert_eq!(
        exporter.sample("salt_function_responses_total", &labels),
        Some(1.0)
    );
    assert_eq!(
        exporter.sample("salt_function_responses_total", &[("success", "true")]),
        None,
        "the test=True job is ignored"
    );
    assert_eq!(
        exporter.sample(
            "salt_function_status",
            &[("minion", "foo"), ("state", "web")]
        ),
        Some(0.0)
    );
    assert_eq!(
        exporter.sample("salt_responses_total", &[]),
        None,
        "disabled"
    );
    assert_eq!(
        exporter.refused_functions.get(),
        0,
        "a listed set refuses nothing"
    );
}

#[test]
fn status_beacons_and_accepted_keys_are_heartbeats() {
    let pki = tempfile::tempdir().unwrap();
    let minions = pki.path().join("minions");
    std::fs::create_dir(&minions).unwrap();
    std::fs::write(minions.join("web1"), "key").unwrap();
    std::fs::write(minions.join(".key_cache"), "").unwrap();
    let section = SaltExporterSection {
        minion_keys: Some(minions.clone()),
        ..SaltExporterSection::default()
    };
    let mut exporter = Exporter::new(section, LabelChoice::Listed(Vec::new()));
    assert_eq!(exporter.sample("salt_health_minions_total", &[]), Some(1.0));
    assert!(
        exporter
            .sample("salt_health_last_heartbeat", &[("minion", "web1")])
            .is_some()
    );
    exporter.event(
        "salt/beacon/db1/status/2026-11-26T01:00:00",
        json!({"id": "db1", "loadavg": {}}),
    );
    assert!(
        exporter
            .sample("salt_health_last_heartbeat", &[("minion", "db1")])
            .is_some()
    );
    assert!(
        exporter
            .sample(
                "salt_responses_last_received_response",
                &[("minion", "db1")]
            )
            .is_some()
    );
    // A key deleted (`salt-key -d web1` fires salt/key): web1's series go.
    std::fs::remove_file(minions.join("web1")).unwrap();
    std::fs::write(minions.join("web2"), "key").unwrap();
    exporter.event(
        "salt/key",
        json!({"id": "web1", "act": "delete", "result": true}),
    );
    assert_eq!(exporter.sample("salt_health_minions_total", &[]), Some(1.0));
    assert_eq!(
        exporter.sample("salt_health_last_heartbeat", &[("minion", "web1")]),
        None
    );
    assert!(
        exporter
            .sample("salt_health_last_heartbeat", &[("minion", "web2")])
            .is_some()
    );
}

#[test]
fn runner_events_are_the_masters() {
    let mut exporter = Exporter::learned();
    exporter.event("salt/run/20261126010000000000/new", json!({"jid": "20261126010000000000", "fun": "runner.jobs.list_jobs", "fun_args": [], "user": "root"}));
    exporter.event("salt/run/20261126010000000000/ret", json!({"jid": "20261126010000000000", "fun": "runner.jobs.list_jobs", "fun_args": [], "success": true, "return": {}}));
    let labels = [("function", "runner.jobs.list_jobs"), ("state", "")];
    assert_eq!(exporter.sample("salt_new_job_total", &labels), Some(1.0));
    assert_eq!(
        exporter.sample("salt_expected_responses_total", &labels),
        Some(0.0)
    );
    assert_eq!(
        exporter.sample(
            "salt_responses_total",
            &[("minion", "master"), ("success", "true")]
        ),
        Some(1.0)
    );
}
