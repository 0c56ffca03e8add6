//! One mapping per fact, checked: every record the captures replay to is
//! written by the history and by the ClickHouse encoding with the same query
//! columns (jid, minion, function, fingerprint, commit), since both read
//! `Record::keys`; and every kind the history answers from reads back, typed,
//! as the record that wrote it.

use std::collections::BTreeSet;

use super::Stages;
use super::stages::tests::config;
use crate::bus::BusMessage;
use crate::bus::recording::RecordingReader;
use crate::history::Row;
use crate::history::rows::Stored;
use crate::record::{Record, RecordBody};
use crate::sink::encode::{Encoding, encode, ndjson};
use crate::time::Stamp;

/// Every record of every capture, as the stages make them on event time.
fn records_of_every_capture() -> Vec<Record> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/captures");
    let mut captures: Vec<_> = std::fs::read_dir(&dir)
        .expect("captures")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    captures.sort();
    assert!(captures.len() > 10, "{captures:?}");
    let mut records = Vec::new();
    for path in captures {
        let config = config();
        let mut stages = Stages::from_config(&config);
        let file = std::fs::File::open(&path).expect("capture");
        let mut reader = RecordingReader::new(file, 64 << 20).expect("a recording");
        let mut batch = Vec::new();
        let mut now = Stamp(0);
        loop {
            let more = reader.next_batch(&mut batch).unwrap_or(false);
            for message in batch.drain(..) {
                let BusMessage::Frame(frame) = message else {
                    continue;
                };
                let Ok(event) = crate::event::decode_shared(&frame.bytes) else {
                    continue;
                };
                now = event.stamp.unwrap_or(now).max(now);
                stages.on_event(&event, now, &mut records);
                while let Some(more) = stages.more() {
                    records.extend(more);
                }
            }
            if !more {
                break;
            }
        }
        records.extend(stages.finish());
    }
    records
}

#[test]
fn the_history_and_clickhouse_write_the_same_query_columns_for_every_record() {
    let records = records_of_every_capture();
    let mut kinds = BTreeSet::new();
    for record in &records {
        kinds.insert(record.kind.as_str());
        let mut json = Vec::new();
        ndjson(record, &mut json);
        let history = Row::of(record, &json);
        let mut row = Vec::new();
        encode(Encoding::ClickHouse, record, &json, &mut row);
        let clickhouse: serde_json::Value = serde_json::from_slice(&row).expect("a JSON row");
        let column = |name: &str| clickhouse[name].as_str().unwrap_or_default().to_owned();
        let held = |v: &Option<String>| v.clone().unwrap_or_default();
        assert_eq!(
            (
                held(&history.jid),
                held(&history.minion),
                held(&history.fun),
                held(&history.fingerprint),
                held(&history.commit),
            ),
            (
                column("jid"),
                column("minion"),
                column("fun"),
                column("fingerprint"),
                column("commit"),
            ),
            "{} {}",
            record.kind.as_str(),
            record.id
        );
    }
    // The captures hold the job records, failures and their groups.
    for kind in [
        "job_published",
        "minion_return",
        "minion_missing",
        "job_completed",
        "state_failure",
        "render_failure",
        "failure_group",
    ] {
        assert!(kinds.contains(kind), "no {kind} in the captures: {kinds:?}");
    }
}

/// `json` read back as the history reads it, and compared with what wrote it.
fn reads_back<T>(record: &Record, json: &[u8], body: &T)
where
    T: serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let stored: Stored<T> = serde_json::from_slice(json)
        .unwrap_or_else(|e| panic!("{} {} does not read back: {e}", record.kind, record.id));
    assert_eq!(&stored.body, body, "{} {}", record.kind, record.id);
    assert_eq!(
        (stored.kind, &stored.id, stored.at, &stored.redacted),
        (
            record.kind,
            &record.id.to_string(),
            record.at,
            &record.redacted
        )
    );
}

#[test]
fn every_record_the_history_answers_from_reads_back_as_it_was_written() {
    let records = records_of_every_capture();
    let mut read = BTreeSet::new();
    for record in &records {
        let mut json = Vec::new();
        ndjson(record, &mut json);
        match &record.body {
            RecordBody::JobPublished(b) => reads_back(record, &json, b),
            RecordBody::MinionReturn(b) | RecordBody::LateReturn(b) => {
                reads_back(record, &json, b);
            }
            RecordBody::MinionMissing(b) => reads_back(record, &json, b),
            RecordBody::JobCompleted(b) => reads_back(record, &json, b),
            RecordBody::StateFailure(b) => reads_back(record, &json, b),
            RecordBody::RenderFailure(b) => reads_back(record, &json, b),
            RecordBody::FailureGroup(b) => reads_back(record, &json, b),
            RecordBody::ExternalIncident(b) => reads_back(record, &json, b),
            RecordBody::MasterPressure(b) => reads_back(record, &json, b),
            RecordBody::Drift(b) => reads_back(record, &json, b),
            RecordBody::NonIdempotent(b) => reads_back(record, &json, b),
            RecordBody::BusGap(_) | RecordBody::ConfigChange(_) | RecordBody::Rollout(_) => {
                continue;
            }
        }
        read.insert(record.kind);
    }
    assert!(read.len() >= 7, "{read:?}");
}
