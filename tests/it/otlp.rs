//! The `otlp` output, through the binary and the disk spool: a recording
//! replayed into a scripted collector that answers 503 with Retry-After (down
//! for a while), then a partial success, then a 400, then 200. Bodies are
//! decoded with the OpenTelemetry project's definitions twice: saltsight's
//! generated ones, and Python's `opentelemetry-proto` (the one in the Salt
//! venv), a decoder saltsight had no hand in.

use std::collections::BTreeSet;
use std::process::Command;

use prost::Message;
use saltsight::sink::otlp::proto::opentelemetry::proto::collector::logs::v1::{
    ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use saltsight::sink::otlp::proto::opentelemetry::proto::common::v1::{AnyValue, any_value};
use serde_json::Value;

use crate::support::replay::replay;
use crate::support::upstream::{Reply, Upstream};
use crate::support::{bin, fixture};

const CAPTURE: &str = "captures/3008.3_tcp_ping_and_fail.bin";

fn text(value: Option<&AnyValue>) -> &str {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s,
        _ => "",
    }
}

/// Each log record of a request: (record id, event name, severity, body);
/// none has a trace (the capture's master had no tracing).
fn logs(body: &[u8]) -> Vec<(String, String, i32, String)> {
    let request = ExportLogsServiceRequest::decode(body).expect("an ExportLogsServiceRequest");
    let resource = request.resource_logs[0]
        .resource
        .as_ref()
        .expect("resource");
    let attribute = |key: &str| {
        resource
            .attributes
            .iter()
            .find(|a| a.key == key)
            .map(|a| text(a.value.as_ref()).to_owned())
    };
    assert_eq!(attribute("service.name").as_deref(), Some("saltsight"));
    assert_eq!(attribute("salt.master").as_deref(), Some("lab"));
    assert!(attribute("host.name").is_some_and(|h| !h.is_empty()));
    request.resource_logs[0].scope_logs[0]
        .log_records
        .iter()
        .map(|r| {
            assert!(r.trace_id.is_empty() && r.span_id.is_empty());
            let id = r
                .attributes
                .iter()
                .find(|a| a.key == "salt.record.id")
                .map(|a| text(a.value.as_ref()).to_owned())
                .expect("salt.record.id");
            (
                id,
                r.event_name.clone(),
                r.severity_number,
                text(r.body.as_ref()).to_owned(),
            )
        })
        .collect()
}

#[test]
fn otlp_logs_are_retried_partly_refused_counted_and_dead_lettered() {
    let expected = replay(CAPTURE, "");
    assert_eq!(expected.len(), 14, "the capture's records");
    // A master without tracing: no trace id at all, not an empty one.
    assert!(
        expected
            .iter()
            .all(|r| r.get("trace_id").is_none() && r.get("span_id").is_none()),
        "{expected:?}"
    );
    let partial = ExportLogsServiceResponse {
        partial_success: Some(ExportLogsPartialSuccess {
            rejected_log_records: 2,
            error_message: "too old".into(),
        }),
    }
    .encode_to_vec();
    let upstream = Upstream::start(
        vec![
            Reply::status(503).header("Retry-After", "1"),
            Reply::status(200).body(std::str::from_utf8(&partial).expect("ASCII protobuf")),
            Reply::status(400).body("bad log records"),
        ],
        Reply::status(200),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken\n").expect("token");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[correlate]\ndiscover = false\n[spool]\ndir = {:?}\n[[output]]\ntype = \"otlp\"\nname = \"collector\"\nendpoint = {:?}\nbearer_token_file = {:?}\nbatch_max_records = 5\nretry_min = \"100ms\"\nretry_max = \"400ms\"\n",
            dir.path().join("spool").display().to_string(),
            format!("http://{}/", upstream.addr),
            token.display().to_string(),
        ),
    )
    .expect("config");
    let out = Command::new(bin())
        .args(["--endpoint", "tcp:127.0.0.1:1", "--config"])
        .arg(&config)
        .args(["replay", "--output", "config"])
        .arg(fixture(CAPTURE))
        .output()
        .expect("replay runs");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");

    let requests = upstream.requests();
    let statuses: Vec<u16> = requests.iter().map(|r| r.answered).collect();
    assert_eq!(statuses, [503, 200, 400, 200], "{log}");
    assert_eq!(
        requests[0].body, requests[1].body,
        "retried, not re-batched"
    );
    for request in &requests {
        assert_eq!(request.target, "/v1/logs");
        assert_eq!(
            request.header("content-type"),
            Some("application/x-protobuf")
        );
        assert_eq!(request.header("content-encoding"), Some("gzip"));
        assert_eq!(request.header("authorization"), Some("Bearer t0ken"));
    }
    assert!(
        log.contains("Upstream took the batch but refused some of its records.")
            && log.contains("rejected=2")
            && log.contains("too old"),
        "{log}"
    );

    // Every record of the delivered batches, once, as its own log record.
    let delivered: Vec<_> = [&requests[1], &requests[3]]
        .iter()
        .flat_map(|r| logs(&r.body))
        .collect();
    let want: Vec<&Value> = expected[..5].iter().chain(&expected[10..]).collect();
    assert_eq!(
        delivered.iter().map(|d| d.0.as_str()).collect::<Vec<_>>(),
        want.iter()
            .map(|r| r["id"].as_str().expect("id"))
            .collect::<Vec<_>>()
    );
    for ((_, event, severity, body), record) in delivered.iter().zip(&want) {
        assert_eq!(event, record["kind"].as_str().expect("kind"));
        assert!(!body.is_empty(), "a readable body");
        let failed = record["kind"] == "minion_return" && record["succeeded"] == false;
        if failed || record["kind"] == "state_failure" {
            assert_eq!(*severity, 17, "ERROR for {record}");
        }
        if record["kind"] == "job_published" {
            assert_eq!(*severity, 9, "INFO for {record}");
        }
    }
    let dead = std::fs::read_dir(dir.path().join("spool/collector/dead-letter"))
        .expect("dead letters")
        .count();
    assert_eq!(dead, 2, "one batch and why it was refused");

    // The same body through a decoder saltsight had no hand in.
    let body = dir.path().join("body.pb");
    std::fs::write(&body, &requests[1].body).expect("body");
    let python = saltsight::lab::default_venv().join("bin/python");
    saltsight::lab::ensure_venv(&saltsight::lab::default_venv()).expect("the Salt venv");
    let decoded = Command::new(python)
        .arg("-c")
        .arg(
            "import json, sys\n\
             from google.protobuf.json_format import MessageToDict\n\
             from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest\n\
             r = ExportLogsServiceRequest.FromString(open(sys.argv[1], 'rb').read())\n\
             print(json.dumps(MessageToDict(r)))\n",
        )
        .arg(&body)
        .output()
        .expect("python runs");
    assert!(
        decoded.status.success(),
        "{}",
        String::from_utf8_lossy(&decoded.stderr)
    );
    let decoded: Value = serde_json::from_slice(&decoded.stdout).expect("JSON");
    let records = &decoded["resourceLogs"][0]["scopeLogs"][0]["logRecords"];
    let ids: BTreeSet<&str> = records
        .as_array()
        .expect("log records")
        .iter()
        .filter_map(|r| {
            r["attributes"]
                .as_array()?
                .iter()
                .find(|a| a["key"] == "salt.record.id")?["value"]["stringValue"]
                .as_str()
        })
        .collect();
    assert_eq!(
        ids,
        expected[..5]
            .iter()
            .map(|r| r["id"].as_str().expect("id"))
            .collect()
    );
}
