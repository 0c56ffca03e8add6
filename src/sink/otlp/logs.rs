//! Records as OTLP log records (docs/opentelemetry.md):
//!
//! - the record's kind is the event name (and `salt.record.kind`);
//! - the severity follows the outcome: a failure or an open incident ERROR, a
//!   missing return, a gap, drift, pressure or a stalled rollout WARN, the rest
//!   INFO;
//! - the body is the record's readable line (`record::text`);
//! - every field of the record is an attribute `salt.<field>` (maps and lists
//!   as OTLP maps and arrays), the record's id as `salt.record.id` for
//!   deduplication; `trace_id`/`span_id` link the log record to its job's trace;
//! - the resource says who sent it: `service.name` saltsight,
//!   `service.version`, `host.name`, `salt.master`.
//!
//! In the spool each record is one JSON line `{"line": ..., "record": ...}`
//! (made on the consumer task, where the typed record is); a batch becomes one
//! `ExportLogsServiceRequest` when it leaves the spool, on the sender's task.

use serde_json::Value;

use super::proto::opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest;
use super::proto::opentelemetry::proto::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList, any_value,
};
use super::proto::opentelemetry::proto::logs::v1::{
    LogRecord, ResourceLogs, ScopeLogs, SeverityNumber,
};
use super::proto::opentelemetry::proto::resource::v1::Resource;
use crate::record::Record;
use crate::time::Stamp;

/// Nesting kept in attributes; deeper values become their JSON text.
const MAX_DEPTH: usize = 8;

/// A record as the `otlp` output spools it: its readable line and its JSON.
pub fn spooled(record: &Record, json: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"line\":");
    // A string into memory cannot fail to serialise.
    let _ = serde_json::to_writer(&mut *out, &crate::record::text::line(record));
    out.extend_from_slice(b",\"record\":");
    out.extend_from_slice(json.strip_suffix(b"\n").unwrap_or(json));
    out.extend_from_slice(b"}\n");
}

/// Who sends: saltsight on this host, for the master its records name.
#[derive(Debug, Clone)]
pub struct Sender {
    pub host: String,
}

/// One request for a batch of spooled lines. Lines that are not a spooled
/// record (damage the spool's CRC did not catch) are skipped, and counted in
/// the second value.
pub fn request(batch: &[u8], sender: &Sender, observed: Stamp) -> (ExportLogsServiceRequest, u64) {
    let mut records = Vec::new();
    let mut skipped = 0;
    let mut master = None;
    for line in batch.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(Value::Object(mut spooled)) = serde_json::from_slice::<Value>(line) else {
            skipped += 1;
            continue;
        };
        let (Some(Value::String(text)), Some(Value::Object(record))) =
            (spooled.remove("line"), spooled.remove("record"))
        else {
            skipped += 1;
            continue;
        };
        if master.is_none() {
            master = record
                .get("master")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        records.push(log_record(text, record, observed));
    }
    let resource = Resource {
        attributes: resource(sender, master.as_deref().unwrap_or_default()),
        ..Resource::default()
    };
    let request = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope {
                    name: "saltsight".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..InstrumentationScope::default()
                }),
                log_records: records,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    };
    (request, skipped)
}

/// Who sent it: saltsight on this host, for `master`.
pub fn resource(sender: &Sender, master: &str) -> Vec<KeyValue> {
    vec![
        string("service.name", "saltsight"),
        string("service.version", env!("CARGO_PKG_VERSION")),
        string("host.name", &sender.host),
        string("salt.master", master),
    ]
}

fn log_record(
    text: String,
    mut record: serde_json::Map<String, Value>,
    observed: Stamp,
) -> LogRecord {
    let kind = record
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let severity = severity(&kind, &record);
    let at = record
        .get("at")
        .and_then(Value::as_str)
        .and_then(Stamp::parse)
        .unwrap_or(observed);
    let trace_id = record
        .get("trace_id")
        .and_then(Value::as_str)
        .and_then(|t| hex(t, 16))
        .unwrap_or_default();
    let span_id = record
        .get("span_id")
        .and_then(Value::as_str)
        .and_then(|s| hex(s, 8))
        .unwrap_or_default();
    let mut attributes = Vec::with_capacity(record.len() + 1);
    if let Some(Value::String(id)) = record.remove("id") {
        attributes.push(string("salt.record.id", &id));
    }
    if let Some(Value::String(kind)) = record.remove("kind") {
        attributes.push(string("salt.record.kind", &kind));
    }
    for (key, value) in record {
        if let Some(value) = any(value, 0) {
            attributes.push(KeyValue {
                key: format!("salt.{key}"),
                value: Some(value),
            });
        }
    }
    LogRecord {
        time_unix_nano: nanos(at),
        observed_time_unix_nano: nanos(observed),
        severity_number: severity as i32,
        severity_text: severity_text(severity).into(),
        body: Some(AnyValue {
            value: Some(any_value::Value::StringValue(text)),
        }),
        attributes,
        trace_id,
        span_id,
        event_name: kind,
        ..LogRecord::default()
    }
}

/// How bad the record's news is.
fn severity(kind: &str, record: &serde_json::Map<String, Value>) -> SeverityNumber {
    let field = |name: &str| record.get(name);
    let text = |name: &str| field(name).and_then(Value::as_str).unwrap_or_default();
    let count = |name: &str| field(name).and_then(Value::as_u64).unwrap_or(0);
    match kind {
        "minion_return" | "late_return" if field("succeeded") == Some(&Value::Bool(false)) => {
            SeverityNumber::Error
        }
        "state_failure" | "render_failure" | "failure_group" => SeverityNumber::Error,
        "job_completed" if count("failed") > 0 => SeverityNumber::Error,
        "job_completed"
            if field("missing")
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty()) =>
        {
            SeverityNumber::Warn
        }
        "external_incident" if text("status") == "open" => SeverityNumber::Error,
        "master_pressure" if text("status") == "open" => SeverityNumber::Warn,
        "rollout" if text("status") == "stalled" => SeverityNumber::Warn,
        "minion_missing" | "bus_gap" | "drift" | "non_idempotent" => SeverityNumber::Warn,
        _ => SeverityNumber::Info,
    }
}

fn severity_text(severity: SeverityNumber) -> &'static str {
    match severity {
        SeverityNumber::Error => "ERROR",
        SeverityNumber::Warn => "WARN",
        _ => "INFO",
    }
}

/// A JSON value as an OTLP value; `null` is no attribute at all.
fn any(value: Value, depth: usize) -> Option<AnyValue> {
    use any_value::Value as V;
    let value = match value {
        Value::Null => return None,
        Value::Bool(b) => V::BoolValue(b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => V::IntValue(i),
            (None, Some(f)) => V::DoubleValue(f),
            (None, None) => V::StringValue(n.to_string()),
        },
        Value::String(s) => V::StringValue(s),
        nested if depth >= MAX_DEPTH => V::StringValue(nested.to_string()),
        Value::Array(items) => V::ArrayValue(ArrayValue {
            values: items
                .into_iter()
                .filter_map(|item| any(item, depth + 1))
                .collect(),
        }),
        Value::Object(map) => V::KvlistValue(KeyValueList {
            values: map
                .into_iter()
                .filter_map(|(key, value)| {
                    Some(KeyValue {
                        key,
                        value: Some(any(value, depth + 1)?),
                    })
                })
                .collect(),
        }),
    };
    Some(AnyValue { value: Some(value) })
}

fn string(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
    }
}

/// `len` bytes from lowercase or uppercase hex; anything else (an all-zero
/// id included, which OTLP calls invalid) is none.
pub fn hex(text: &str, len: usize) -> Option<Vec<u8>> {
    if text.len() != len * 2 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..len)
        .map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    bytes.filter(|b| b.iter().any(|x| *x != 0))
}

pub(super) fn nanos(at: Stamp) -> u64 {
    u64::try_from(at.0).unwrap_or(0).saturating_mul(1_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute<'a>(record: &'a LogRecord, key: &str) -> Option<&'a any_value::Value> {
        record
            .attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.as_ref()?.value.as_ref())
    }

    #[test]
    fn records_become_log_records_with_salt_attributes_and_their_trace() {
        let batch = concat!(
            r#"{"line":"web2 did not return","record":{"kind":"minion_missing","id":"r1","master":"m1","at":"2026-11-26T01:00:00.000001Z","jid":"j1","minion":"web2","reason":"no_response","streak":3,"missing_since":null,"evidence":{"seen":["a",null]},"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331"}}"#,
            "\n",
            "not a record\n",
            r#"{"line":"ok","record":{"kind":"job_completed","id":"r2","master":"m1","at":"2026-11-26T01:00:01Z","failed":0,"missing":{}}}"#,
            "\n"
        );
        let sender = Sender {
            host: "salt1".into(),
        };
        let (request, skipped) = request(batch.as_bytes(), &sender, Stamp(5));
        assert_eq!(skipped, 1);
        let resource = request.resource_logs[0].resource.as_ref().unwrap();
        let master = resource
            .attributes
            .iter()
            .find(|a| a.key == "salt.master")
            .unwrap();
        assert_eq!(
            master.value.as_ref().unwrap().value,
            Some(any_value::Value::StringValue("m1".into()))
        );
        let records = &request.resource_logs[0].scope_logs[0].log_records;
        let missing = &records[0];
        assert_eq!(missing.event_name, "minion_missing");
        assert_eq!(missing.severity_number, SeverityNumber::Warn as i32);
        assert_eq!(missing.time_unix_nano, 1_795_654_800_000_001_000);
        assert_eq!(
            missing.trace_id,
            hex("0af7651916cd43dd8448eb211c80319c", 16).unwrap()
        );
        assert_eq!(missing.span_id.len(), 8);
        assert_eq!(
            attribute(missing, "salt.record.id"),
            Some(&any_value::Value::StringValue("r1".into()))
        );
        assert_eq!(
            attribute(missing, "salt.streak"),
            Some(&any_value::Value::IntValue(3))
        );
        assert_eq!(
            attribute(missing, "salt.missing_since"),
            None,
            "null is no attribute"
        );
        let Some(any_value::Value::KvlistValue(evidence)) = attribute(missing, "salt.evidence")
        else {
            panic!("a map stays a map");
        };
        let Some(any_value::Value::ArrayValue(seen)) = evidence.values[0]
            .value
            .as_ref()
            .and_then(|v| v.value.as_ref())
        else {
            panic!("a list stays a list");
        };
        assert_eq!(seen.values.len(), 1, "its null left out");
        let completed = &records[1];
        assert_eq!(completed.severity_number, SeverityNumber::Info as i32);
        assert!(completed.trace_id.is_empty(), "no trace: no trace id");
        assert!(
            hex(&"0".repeat(32), 16).is_none(),
            "an all-zero id is invalid"
        );
        assert!(hex("xyz", 16).is_none());
    }
}
