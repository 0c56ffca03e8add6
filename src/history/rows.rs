//! The history's rows read back typed: each row decoded into the record type
//! that wrote it ([`Stored`]), so a renamed record field is renamed in the
//! answers too, and a field the writer no longer gives fails the round-trip
//! test (`pipeline::keys_agree`) rather than an answer.

use std::collections::BTreeMap;

use rusqlite::params_from_iter;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{HistoryError, Store};
use crate::record::{ExternalIncident, FailureGroup, JobCompleted, MasterPressure, RecordKind};
use crate::time::Stamp;

/// Records one query reads at most (a job of 100,000 minions has as many).
pub const MAX_ROWS: usize = 2_000_000;

/// A record read back from the history: what every kind carries, and its
/// body as the type that wrote it. Serialises as the record did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stored<T> {
    pub kind: RecordKind,
    pub schema_version: u32,
    pub id: String,
    pub master: String,
    pub at: Stamp,
    #[serde(flatten)]
    pub body: T,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
}

/// The rows of one query, their JSON kept by kind until a kind is decoded.
pub struct Rows(pub(super) Vec<(RecordKind, String)>);

impl Rows {
    /// The rows of `kind`, decoded, in the query's order. A row that does not
    /// decode (written by another version, or damaged) is left out and logged.
    pub(super) fn of<T: DeserializeOwned>(&self, kind: RecordKind) -> Vec<Stored<T>> {
        self.0
            .iter()
            .filter(|(k, _)| *k == kind)
            .filter_map(|(_, json)| decode(kind, json))
            .collect()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// The time of the first row (of any kind).
    pub(super) fn at_of_first(&self) -> Option<Stamp> {
        #[derive(Deserialize)]
        struct At {
            at: Stamp,
        }
        let (_, json) = self.0.first()?;
        serde_json::from_str::<At>(json).ok().map(|r| r.at)
    }
}

pub(super) fn decode<T: DeserializeOwned>(kind: RecordKind, json: &str) -> Option<Stored<T>> {
    serde_json::from_str(json)
        .inspect_err(|error| tracing::warn!(%kind, %error, "history row not read"))
        .ok()
}

impl Store {
    /// The rows `sql` selects (its first two columns: kind, record).
    pub(super) fn rows(
        &self,
        sql: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Rows, HistoryError> {
        let sql_error = |source| HistoryError::Sql {
            path: self.path.clone(),
            source,
        };
        let mut statement = self.conn().prepare(sql).map_err(sql_error)?;
        let rows = statement
            .query_map(params_from_iter(args.iter()), |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(sql_error)?;
        let mut out = Vec::new();
        for row in rows.take(MAX_ROWS) {
            let (kind, json) = row.map_err(sql_error)?;
            match kind.parse::<RecordKind>() {
                Ok(kind) => out.push((kind, json)),
                Err(_) => tracing::warn!(%kind, "history row of an unknown kind not read"),
            }
        }
        Ok(Rows(out))
    }
}

/// A record kind whose later revisions replace the earlier.
pub(super) trait Revised {
    fn revision(&self) -> u32;
}

impl Revised for JobCompleted {
    fn revision(&self) -> u32 {
        self.revision
    }
}
impl Revised for FailureGroup {
    fn revision(&self) -> u32 {
        self.revision
    }
}
impl Revised for ExternalIncident {
    fn revision(&self) -> u32 {
        self.revision
    }
}
impl Revised for MasterPressure {
    fn revision(&self) -> u32 {
        self.revision
    }
}

/// The latest revision of each record `key` names, in key order.
pub(super) fn latest_by<T: Revised, K: Ord>(
    records: Vec<Stored<T>>,
    key: impl Fn(&Stored<T>) -> K,
) -> Vec<Stored<T>> {
    let mut latest: BTreeMap<K, Stored<T>> = BTreeMap::new();
    for r in records {
        let k = key(&r);
        if latest
            .get(&k)
            .is_none_or(|old| r.body.revision() >= old.body.revision())
        {
            latest.insert(k, r);
        }
    }
    latest.into_values().collect()
}
