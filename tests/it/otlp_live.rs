//! One trace per job on a real Salt 3008.3 master with its tracing on (issue
//! 31): Salt and saltsight both export to one OTLP/HTTP receiver that decodes
//! with Python's `opentelemetry-proto` (`support/otlp_receiver.py`). A failing
//! `state.apply` with one minion stopped: saltsight's job span is in the trace
//! of Salt's publish span, has a child per minion with the root cause or the
//! missing reason, and each returned minion's span links to a trace Salt
//! exported for its return; saltsight's log records of the job carry the
//! job's trace id.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use saltsight::lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::clickhouse::free_port;
use crate::support::{Saltsight, jid_from, lab_lock, read_records};

/// The receiver, stopped (by pid) when dropped.
struct Receiver(Child);

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every span the receiver got: (service.name, span).
fn spans(out: &Path) -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    let mut spans = Vec::new();
    for line in text.lines() {
        let Ok(line) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if line["path"] != "/v1/traces" {
            continue;
        }
        for resource in line["request"]["resourceSpans"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let service = attribute(&resource["resource"], "service.name").unwrap_or_default();
            for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                for span in scope["spans"].as_array().into_iter().flatten() {
                    spans.push((service.clone(), span.clone()));
                }
            }
        }
    }
    spans
}

/// saltsight's log records the receiver got.
fn logs(out: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["path"] == "/v1/logs")
        .flat_map(|l| {
            let records: Vec<Value> = l["request"]["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            records
        })
        .collect()
}

/// A string or integer attribute of an OTLP message, as MessageToDict writes it.
fn attribute(message: &Value, key: &str) -> Option<String> {
    let value = &message["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)?["value"];
    value["stringValue"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| value["intValue"].as_str().map(str::to_owned))
}

fn wait_for<T>(what: &str, timeout: Duration, mut found: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_jobs_trace_is_stitched_from_salts_own() {
    let _lab_lock = lab_lock();
    let port = free_port();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("received.jsonl");
    let venv = saltsight::lab::default_venv();
    saltsight::lab::ensure_venv(&venv).expect("the Salt venv");
    let _receiver = Receiver(
        Command::new(venv.join("bin/python"))
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/otlp_receiver.py"))
            .arg(port.to_string())
            .arg(&out)
            .stdout(Stdio::null())
            .spawn()
            .expect("the receiver starts"),
    );
    let tracing = format!(
        "tracing:\n  enabled: true\n  exporter: otlp-http\n  endpoint: http://127.0.0.1:{port}/v1/traces\n"
    );
    let mut lab = Lab::start(LabOptions {
        extra_master: tracing.clone(),
        extra_minion: tracing,
        ..LabOptions::default()
    })
    .expect("start the Salt lab");
    lab.stop_minion("db1").expect("stop db1");

    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"state.apply\" = \"8s\" }}\n[correlate]\ndiscover = false\n[spool]\ndir = {:?}\n[[output]]\ntype = \"stdout\"\n[[output]]\ntype = \"otlp\"\nendpoint = \"http://127.0.0.1:{port}\"\ntraces = true\nbatch_max_age = \"1s\"\n",
            lab.master_config().display().to_string(),
            dir.path().join("spool").display().to_string(),
        ),
    )
    .expect("config");
    let mut run = Saltsight::spawn_connected(&[
        "--config",
        config.to_str().expect("utf-8"),
        "run",
        "--allow-root",
    ]);
    let published = lab
        .salt(&["--async", "*", "state.apply", "fail"])
        .expect("salt");
    let jid = jid_from(&published);
    let mut records = Vec::new();
    read_records(&run.stdout, &mut records, Duration::from_secs(40), |s| {
        s.iter()
            .any(|r| r.record["kind"] == "job_completed" && r.record["jid"] == jid.as_str())
    })
    .expect("the job completed");
    let trace_id = records
        .iter()
        .find(|r| r.record["kind"] == "job_published" && r.record["jid"] == jid.as_str())
        .and_then(|r| r.record["trace_id"].as_str())
        .expect("the job's records carry its trace id")
        .to_owned();

    // saltsight's job span, and Salt's own publish span, in one trace.
    let job_span = wait_for("saltsight's job span", Duration::from_secs(30), || {
        spans(&out).into_iter().find_map(|(service, span)| {
            (service == "saltsight" && attribute(&span, "salt.jid").as_deref() == Some(&jid))
                .then_some(span)
                .filter(|s| s["name"] == "salt job state.apply")
        })
    });
    // MessageToDict writes ids as base64; compare bytes.
    let b64 = |v: &Value| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>())
            .unwrap_or_default()
    };
    assert_eq!(b64(&job_span["traceId"]), trace_id);
    let salts_publish = wait_for("Salt's publish span", Duration::from_secs(30), || {
        spans(&out).into_iter().find_map(|(service, span)| {
            (service != "saltsight" && attribute(&span, "salt.pub.jid").as_deref() == Some(&jid))
                .then_some(span)
        })
    });
    assert_eq!(
        b64(&salts_publish["traceId"]),
        trace_id,
        "saltsight's job span is in the trace of Salt's publish span"
    );

    // One child per minion: the root cause, or the missing reason.
    let children: Vec<Value> = spans(&out)
        .into_iter()
        .filter(|(service, span)| {
            service == "saltsight" && span["parentSpanId"] == job_span["spanId"]
        })
        .map(|(_, span)| span)
        .collect();
    let minion = |name: &str| {
        children
            .iter()
            .find(|s| attribute(s, "salt.minion").as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no span for {name}: {children:#?}"))
    };
    assert_eq!(children.len(), 3, "{children:#?}");
    for name in ["web1", "web2"] {
        let span = minion(name);
        assert_eq!(span["status"]["code"], "STATUS_CODE_ERROR");
        let message = span["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("fail:lab_failing_cmd"), "{message}");
    }
    // Its reason: the lab's minions share one address, so presence cannot
    // call it down (presence_live tells down from hung on a fleet of addresses).
    let db1 = minion("db1");
    let reason = attribute(db1, "salt.missing.reason").expect("a reason");
    assert_eq!(
        db1["status"]["message"].as_str().unwrap_or_default(),
        format!(
            "no return: {reason} ({})",
            attribute(db1, "salt.missing.evidence").expect("evidence")
        )
    );
    // Each returned minion's span links to a trace Salt exported for its return.
    let linked: BTreeSet<String> = ["web1", "web2"]
        .iter()
        .map(|m| b64(&minion(m)["links"][0]["traceId"]))
        .collect();
    assert_eq!(linked.len(), 2, "a trace of its own per return: {linked:?}");
    assert!(!linked.contains(&trace_id));
    wait_for(
        "Salt's spans of both returns",
        Duration::from_secs(30),
        || {
            let salt_traces: BTreeSet<String> = spans(&out)
                .into_iter()
                .filter(|(service, _)| service != "saltsight")
                .map(|(_, span)| b64(&span["traceId"]))
                .collect();
            linked.is_subset(&salt_traces).then_some(())
        },
    );

    // saltsight's log records of the job are in its trace.
    let job_logs = wait_for("the job's log records", Duration::from_secs(20), || {
        let of_job: Vec<Value> = logs(&out)
            .into_iter()
            .filter(|r| attribute(r, "salt.jid").as_deref() == Some(&jid))
            .collect();
        (of_job.len() >= 5).then_some(of_job)
    });
    assert!(
        job_logs.iter().all(|r| b64(&r["traceId"]) == trace_id),
        "{job_logs:#?}"
    );
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success()),
        "run exits 0 on SIGTERM"
    );
}
