//! Records → bytes, one line each. `ndjson` is the record as documented
//! (docs/records.md); `clickhouse` is one row of `packaging/clickhouse/schema.sql`
//! for `INSERT ... FORMAT JSONEachRow`: the columns fleet queries filter and group
//! on, plus the whole record as JSON text in `record`.

use serde::Serialize;

use crate::record::{Correlation, JobContext, Record, RecordBody};

/// How records are written into a batch (a spool keeps it in its header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// One JSON record per line (Vector, Logstash, Fluent Bit http inputs).
    Ndjson,
    /// One row per line for `INSERT INTO <table> FORMAT JSONEachRow`.
    ClickHouse,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Ndjson => "ndjson",
            Encoding::ClickHouse => "clickhouse",
        }
    }
}

/// Appends `record` as one JSON line.
pub fn ndjson(record: &Record, out: &mut Vec<u8>) {
    // Serialising a `Record` into memory cannot fail: every map key is a string.
    let _ = serde_json::to_writer(&mut *out, record);
    out.push(b'\n');
}

/// Appends `record` in `encoding`; `json` is its ndjson line when already made.
pub fn encode(encoding: Encoding, record: &Record, json: &[u8], out: &mut Vec<u8>) {
    match encoding {
        Encoding::Ndjson => out.extend_from_slice(json),
        Encoding::ClickHouse => clickhouse_row(record, json, out),
    }
}

/// One row of the `records` table. Empty strings and zeros where a kind has no
/// such field (ClickHouse columns are not Nullable here: cheaper, and `''` reads
/// as plainly as NULL in these queries).
#[derive(Serialize, Default)]
struct Row<'a> {
    id: &'a str,
    kind: &'a str,
    schema_version: u32,
    master: &'a str,
    at_micros: i64,
    jid: &'a str,
    minion: &'a str,
    fun: &'a str,
    run_kind: &'a str,
    reason: &'a str,
    sls: &'a str,
    state_id: &'a str,
    state_function: &'a str,
    category: &'a str,
    fingerprint: &'a str,
    count: u32,
    revision: u32,
    /// The commit that last touched the failing SLS.
    commit: &'a str,
    /// The job's `--metadata` as JSON text.
    metadata: String,
    record: &'a str,
}

fn run_kind(context: &JobContext) -> &'static str {
    use crate::record::RunKind;
    match context.run_kind {
        RunKind::Adhoc => "adhoc",
        RunKind::Scheduled => "scheduled",
        RunKind::Orchestrated => "orchestrated",
        RunKind::Api => "api",
        RunKind::Reactor => "reactor",
        RunKind::Runner => "runner",
        RunKind::Unknown => "unknown",
    }
}

fn metadata(context: &JobContext) -> String {
    context
        .metadata
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default()
}

fn commit(correlation: &Correlation) -> &str {
    correlation
        .introduced_by
        .as_ref()
        .map_or("", |i| i.commit.id.as_str())
}

fn clickhouse_row(record: &Record, json: &[u8], out: &mut Vec<u8>) {
    let text = std::str::from_utf8(json)
        .unwrap_or("")
        .trim_end_matches('\n');
    let mut row = Row {
        id: &record.id,
        kind: record.kind.as_str(),
        schema_version: record.schema_version,
        master: &record.master,
        at_micros: record.at.0,
        record: text,
        ..Row::default()
    };
    match &record.body {
        RecordBody::JobPublished(p) => {
            row.jid = &p.jid;
            row.fun = &p.fun;
            row.run_kind = run_kind(&p.context);
            row.count = u32::try_from(p.expected.len()).unwrap_or(u32::MAX);
            row.metadata = metadata(&p.context);
        }
        RecordBody::MinionReturn(r) | RecordBody::LateReturn(r) => {
            row.jid = &r.jid;
            row.minion = &r.minion;
            row.fun = r.fun.as_deref().unwrap_or("");
            row.run_kind = run_kind(&r.context);
            row.reason = if r.succeeded { "succeeded" } else { "failed" };
            row.count = r.states.as_ref().map_or(0, |s| s.failed);
            row.metadata = metadata(&r.context);
        }
        RecordBody::MinionMissing(m) => {
            row.jid = &m.jid;
            row.minion = &m.minion;
            row.fun = &m.fun;
            row.run_kind = run_kind(&m.context);
            row.reason = m.reason.as_str();
            row.metadata = metadata(&m.context);
        }
        RecordBody::JobCompleted(c) => {
            row.jid = &c.jid;
            row.fun = &c.fun;
            row.run_kind = run_kind(&c.context);
            row.count = c.failed;
            row.revision = c.revision;
            row.metadata = metadata(&c.context);
        }
        RecordBody::BusGap(g) => row.reason = g.reason,
        RecordBody::StateFailure(f) => {
            row.jid = &f.jid;
            row.minion = &f.minion;
            row.fun = &f.fun;
            row.run_kind = run_kind(&f.context);
            row.sls = &f.sls;
            row.state_id = &f.state_id;
            row.state_function = &f.function;
            row.category = f.cause.category.as_str();
            row.fingerprint = &f.fingerprint;
            row.count = f.fallout;
            row.commit = commit(&f.correlation);
            row.metadata = metadata(&f.context);
        }
        RecordBody::RenderFailure(f) => {
            row.jid = &f.jid;
            row.minion = &f.minion;
            row.fun = &f.fun;
            row.run_kind = run_kind(&f.context);
            row.sls = f.sls.as_deref().unwrap_or("");
            row.category = f.cause.category.as_str();
            row.fingerprint = &f.fingerprint;
            row.commit = commit(&f.correlation);
            row.metadata = metadata(&f.context);
        }
        RecordBody::FailureGroup(g) => {
            row.jid = &g.jid;
            row.run_kind = run_kind(&g.context);
            row.sls = g.sls.as_deref().unwrap_or("");
            row.state_id = g.state_id.as_deref().unwrap_or("");
            row.state_function = g.function.as_deref().unwrap_or("");
            row.category = g.cause.category.as_str();
            row.fingerprint = &g.fingerprint;
            row.count = g.count;
            row.revision = g.revision;
            row.commit = commit(&g.correlation);
            row.metadata = metadata(&g.context);
        }
        RecordBody::ConfigChange(c) => {
            row.reason = &c.repo;
            row.commit = c.new.as_deref().unwrap_or("");
            row.count = u32::try_from(c.commits.len()).unwrap_or(u32::MAX);
        }
    }
    let _ = serde_json::to_writer(&mut *out, &row);
    out.push(b'\n');
}

/// The ClickHouse HTTP interface's query string for inserting a batch.
pub fn clickhouse_query(table: &str) -> String {
    format!("INSERT INTO {table} FORMAT JSONEachRow")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{MinionMissing, MissingReason, RecordFactory};
    use crate::time::Stamp;

    fn missing() -> Record {
        RecordFactory::new("m1").make(
            Stamp(1_763_769_600_123_456),
            &["2026", "web1"],
            RecordBody::MinionMissing(MinionMissing {
                jid: "2026".into(),
                minion: "web1".into(),
                fun: "state.apply".into(),
                reason: MissingReason::NoResponse,
                published_at: Stamp(1_763_769_500_000_000),
                deadline: Stamp(1_763_769_600_000_000),
                context: JobContext {
                    metadata: Some(serde_json::json!({"release": "r42"})),
                    ..JobContext::default()
                },
            }),
        )
    }

    #[test]
    fn ndjson_is_the_documented_record() {
        let record = missing();
        let mut line = Vec::new();
        ndjson(&record, &mut line);
        assert_eq!(line.last(), Some(&b'\n'));
        let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value, serde_json::to_value(&record).unwrap());
    }

    #[test]
    fn a_clickhouse_row_carries_its_columns_and_the_whole_record() {
        let record = missing();
        let mut json = Vec::new();
        ndjson(&record, &mut json);
        let mut line = Vec::new();
        encode(Encoding::ClickHouse, &record, &json, &mut line);
        let row: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(row["id"], record.id.as_str());
        assert_eq!(row["kind"], "minion_missing");
        assert_eq!(row["master"], "m1");
        assert_eq!(row["at_micros"], 1_763_769_600_123_456i64);
        assert_eq!(row["jid"], "2026");
        assert_eq!(row["minion"], "web1");
        assert_eq!(row["reason"], "no_response");
        assert_eq!(row["run_kind"], "unknown");
        assert_eq!(row["metadata"], r#"{"release":"r42"}"#);
        let inner: serde_json::Value =
            serde_json::from_str(row["record"].as_str().unwrap()).unwrap();
        assert_eq!(inner, serde_json::to_value(&record).unwrap());
    }
}
