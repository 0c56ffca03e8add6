//! Records → bytes, one line each. `ndjson` is the record as documented
//! (docs/records.md); `clickhouse` is one row of `packaging/clickhouse/schema.sql`
//! for `INSERT ... FORMAT JSONEachRow`: the columns fleet queries filter and group
//! on, plus the whole record as JSON text in `record`.
//!
//! Rows must stay insertable into every shipped table, old and new
//! (docs/clickhouse.md): a key is only ever added, never renamed or dropped, and
//! the HTTP output sends `input_format_skip_unknown_fields=1`, so a table that
//! lacks a column skips its key. Time goes twice: `at_micros` (an integer, what
//! ClickHouse 18.16's `at DateTime MATERIALIZED` column is computed from) and
//! `at` (the record's RFC 3339 text with microseconds, which a `DateTime64(6)`
//! column parses; an integer there would be read as seconds).

use serde::Serialize;

use crate::record::Record;
use crate::time::Stamp;

/// How records are written into a batch (a spool keeps it in its header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// One JSON record per line (Vector, Logstash, Fluent Bit http inputs).
    Ndjson,
    /// One row per line for `INSERT INTO <table> FORMAT JSONEachRow`.
    ClickHouse,
    /// One JSON record per line in the spool, sent as OTLP log records
    /// (protobuf) when a batch leaves it (`sink::otlp`).
    Otlp,
    /// One span per line in the spool (`sink::otlp::spans::SpanLine`), sent
    /// as OTLP spans.
    OtlpSpans,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Ndjson => "ndjson",
            Encoding::ClickHouse => "clickhouse",
            Encoding::Otlp => "otlp",
            Encoding::OtlpSpans => "otlp_spans",
        }
    }
}

/// Appends `record` as one JSON line.
pub fn ndjson(record: &Record, out: &mut Vec<u8>) {
    // Writing a `Record` into memory cannot fail: every map key is a string
    // (`record::json`, the bytes serde_json writes).
    let _ = crate::record::json::record(record, out);
    out.push(b'\n');
}

/// Appends `record` in `encoding`; `json` is its ndjson line when already made.
pub fn encode(encoding: Encoding, record: &Record, json: &[u8], out: &mut Vec<u8>) {
    match encoding {
        Encoding::Ndjson | Encoding::Otlp | Encoding::OtlpSpans => out.extend_from_slice(json),
        Encoding::ClickHouse => clickhouse_row(record, json, out),
    }
}

/// One row of the `records` table. Empty strings and zeros where a kind has no
/// such field (ClickHouse columns are not Nullable here: cheaper, and `''` reads
/// as plainly as NULL in these queries).
#[derive(Serialize)]
struct Row<'a> {
    id: &'a str,
    kind: &'a str,
    schema_version: u32,
    master: &'a str,
    at_micros: i64,
    /// The same time as RFC 3339 text, for `DateTime64(6)` columns.
    at: Stamp,
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
    /// That commit's subject line.
    commit_subject: &'a str,
    /// The suspect range (`suspect_commits`): the HEAD of this minion's last
    /// passing run, and of its first failing run.
    suspect_last_ok: &'a str,
    suspect_first_failed: &'a str,
    /// What an external cause names: its host, else its URL, else its package.
    target: &'a str,
    /// The job's `--metadata` as JSON text.
    metadata: String,
    record: &'a str,
}

fn clickhouse_row(record: &Record, json: &[u8], out: &mut Vec<u8>) {
    let text = std::str::from_utf8(json)
        .unwrap_or("")
        .trim_end_matches('\n');
    let keys = record.keys();
    let row = Row {
        id: &record.id,
        kind: record.kind.as_str(),
        schema_version: record.schema_version,
        master: &record.master,
        at_micros: record.at.0,
        at: record.at,
        jid: keys.jid,
        minion: keys.minion,
        fun: keys.fun,
        run_kind: keys.run_kind,
        reason: keys.reason,
        sls: keys.sls,
        state_id: keys.state_id,
        state_function: keys.state_function,
        category: keys.category,
        fingerprint: keys.fingerprint,
        count: keys.count,
        revision: keys.revision,
        commit: keys.commit,
        commit_subject: keys.commit_subject,
        suspect_last_ok: keys.suspect_last_ok,
        suspect_first_failed: keys.suspect_first_failed,
        target: keys.target,
        metadata: keys
            .context
            .and_then(|c| c.metadata.as_ref())
            .map(|m| m.to_string())
            .unwrap_or_default(),
        record: text,
    };
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
    use crate::record::{
        Classification, Correlation, JobContext, MinionMissing, MissingReason, RecordBody,
        RecordFactory,
    };
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
                evidence: crate::record::MissingEvidence::Nothing,
                disconnected_at: None,
                address: None,
                missing_since: None,
                published_at: Stamp(1_763_769_500_000_000),
                deadline: Stamp(1_763_769_600_000_000),
                streak: 1,
                during_master_pressure: None,
                context: JobContext {
                    metadata: Some(serde_json::json!({"release": "r42"})),
                    ..JobContext::default()
                }
                .into(),
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
        // Both times: the integer old tables compute `at` from, and the text a
        // DateTime64(6) column parses with its microseconds.
        assert_eq!(row["at"], "2025-11-22T00:00:00.123456Z");
        assert_eq!(row["commit"], "");
        let inner: serde_json::Value =
            serde_json::from_str(row["record"].as_str().unwrap()).unwrap();
        assert_eq!(inner, serde_json::to_value(&record).unwrap());
    }

    fn commit(id: &str, subject: &str) -> crate::record::Commit {
        crate::record::Commit {
            id: id.into(),
            author: "alice".into(),
            time: "2026-11-21T10:00:00+00:00".into(),
            subject: subject.into(),
            pull_request: None,
        }
    }

    #[test]
    fn a_failure_row_has_its_commit_subject_suspect_range_and_target() {
        use crate::record::{Category, FailureGroup, IntroducedBy, SuspectCommits};
        let group = FailureGroup {
            jid: "2026".into(),
            fingerprint: "f00d".into(),
            sls: Some("web".into()),
            pillar: false,
            state_id: Some("mirror".into()),
            function: Some("pkg.installed".into()),
            cause: Classification {
                category: Category::DependencyPackage,
                rule: "apt".into(),
                evidence: None,
                host: None,
                url: Some("http://mirror.example/debian".into()),
                package: Some("nginx".into()),
            },
            comment: String::new(),
            comment_len: 0,
            normalised: String::new(),
            output: Default::default(),
            count: 3,
            minions: vec!["web1".into()],
            first_seen_jid: "2026".into(),
            first_seen_at: Stamp(0),
            revision: 1,
            incident: None,
            context: Default::default(),
            correlation: Correlation {
                commits: Default::default(),
                introduced_by: Some(IntroducedBy {
                    repo: "states".into(),
                    path: "web.sls".into(),
                    commit: commit("c3", "web: pin the mirror"),
                    basis: crate::record::IntroducedBasis::SinceLastPass,
                }),
                suspect_commits: Some(SuspectCommits {
                    repo: "states".into(),
                    last_ok: "c1".into(),
                    first_failed: "c3".into(),
                    commits: vec![commit("c3", "web: pin the mirror"), commit("c2", "x")],
                    truncated: false,
                }),
            }
            .into(),
        };
        let record = RecordFactory::new("m1").make(
            Stamp(5),
            &["2026"],
            RecordBody::FailureGroup(Box::new(group)),
        );
        let mut json = Vec::new();
        ndjson(&record, &mut json);
        let mut line = Vec::new();
        encode(Encoding::ClickHouse, &record, &json, &mut line);
        let row: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(row["commit"], "c3");
        assert_eq!(row["commit_subject"], "web: pin the mirror");
        assert_eq!(row["suspect_last_ok"], "c1");
        assert_eq!(row["suspect_first_failed"], "c3");
        // The URL before the package: the mirror is what to look at.
        assert_eq!(row["target"], "http://mirror.example/debian");
        assert_eq!(row["category"], "dependency.package");
        assert_eq!(row["count"], 3);
        assert_eq!(row["revision"], 1);
    }
}
