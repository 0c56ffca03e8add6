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

use crate::record::{Classification, Correlation, JobContext, Record, RecordBody};
use crate::time::Stamp;

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
    /// The same time as RFC 3339 text, for `DateTime64(6)` columns (always set;
    /// an `Option` only so the row has a `Default`).
    at: Option<Stamp>,
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

fn run_kind(context: &JobContext) -> &'static str {
    context.run_kind.as_str()
}

fn metadata(context: &JobContext) -> String {
    context
        .metadata
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default()
}

/// Fills the commit columns from a failure's correlation.
fn correlate<'a>(row: &mut Row<'a>, correlation: &'a Correlation) {
    if let Some(introduced) = &correlation.introduced_by {
        row.commit = &introduced.commit.id;
        row.commit_subject = &introduced.commit.subject;
    }
    if let Some(suspects) = &correlation.suspect_commits {
        row.suspect_last_ok = &suspects.last_ok;
        row.suspect_first_failed = &suspects.first_failed;
    }
}

fn target(cause: &Classification) -> &str {
    [&cause.host, &cause.url, &cause.package]
        .into_iter()
        .find_map(|t| t.as_deref())
        .unwrap_or("")
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
        at: Some(record.at),
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
            row.target = target(&f.cause);
            correlate(&mut row, &f.correlation);
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
            row.target = target(&f.cause);
            correlate(&mut row, &f.correlation);
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
            row.target = target(&g.cause);
            correlate(&mut row, &g.correlation);
            row.metadata = metadata(&g.context);
        }
        RecordBody::ConfigChange(c) => {
            row.reason = &c.repo;
            row.commit = c.new.as_deref().unwrap_or("");
            row.count = u32::try_from(c.commits.len()).unwrap_or(u32::MAX);
        }
        // An episode's id goes in `fingerprint`: the key its revisions share.
        RecordBody::ExternalIncident(i) => {
            row.reason = i.status.as_str();
            row.category = i.category.as_str();
            row.target = &i.target;
            row.fingerprint = &i.incident;
            row.count = i.minions;
            row.revision = i.revision;
        }
        RecordBody::Rollout(r) => {
            row.reason = r.status.as_str();
            row.commit = &r.commit;
            row.commit_subject = &r.subject;
            row.count = r.applied;
            row.revision = r.revision;
        }
        RecordBody::MasterPressure(p) => {
            row.reason = p.status.as_str();
            row.fingerprint = &p.pressure;
            row.count = p.missing_verdicts;
            row.revision = p.revision;
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
            context: JobContext::default(),
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
            },
        };
        let record =
            RecordFactory::new("m1").make(Stamp(5), &["2026"], RecordBody::FailureGroup(group));
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
