//! The history's rows read back typed: each row decoded into the record type
//! that wrote it ([`Stored`]), so a renamed record field is renamed in the
//! answers too, and a field the writer no longer gives fails the round-trip
//! test (`pipeline::keys_agree`) rather than an answer.

use std::collections::BTreeMap;
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use rusqlite::params_from_iter;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::verdicts::{self, Answer, FailedState, Verdict};
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
        // A record written twice (a replay, a restart) is read once.
        let mut seen = HashSet::new();
        for row in rows.take(MAX_ROWS) {
            let (kind, json) = row.map_err(sql_error)?;
            if !seen.insert(json.clone()) {
                continue;
            }
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

/// A job as the history keeps it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct JobRow {
    pub id: i64,
    pub at: Stamp,
    pub fun: Option<String>,
    /// Records of it the history could not take.
    pub lost: u64,
}

/// A verdict read back with its job.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct JobVerdict {
    pub jid: String,
    pub fun: String,
    pub verdict: Verdict,
}

/// A root-cause failure read back with its job.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct JobFailure {
    pub jid: String,
    pub minion: String,
    pub at: Stamp,
    pub failed: FailedState,
}

/// Verdicts one query reads at most.
pub const MAX_VERDICTS: usize = 5_000_000;

/// Which jobs' failures a query reads.
enum Failures {
    Job(i64),
    Since(i64),
    All,
}

/// Which chunks a verdict query reads.
enum Chunks<'a> {
    Job(i64),
    Since(i64),
    Minion(&'a str),
}

impl Store {
    /// The job `jid`, when the history has it.
    pub(super) fn job_row(&self, jid: &str) -> Result<Option<JobRow>, HistoryError> {
        use rusqlite::OptionalExtension;
        self.conn()
            .query_row(
                "SELECT id, at, fun, lost FROM jobs WHERE jid = ?1",
                [jid],
                |r| {
                    Ok(JobRow {
                        id: r.get(0)?,
                        at: Stamp(r.get(1)?),
                        fun: r.get(2)?,
                        lost: r.get::<_, i64>(3)?.max(0) as u64,
                    })
                },
            )
            .optional()
            .map_err(|source| HistoryError::Sql {
                path: self.path.clone(),
                source,
            })
    }

    /// The batch whose later sub-batch Salt published under `jid` (before
    /// 3008.2), from the batch's `job_completed` within a day of the jid's
    /// time (the index on kind and time bounds the search).
    pub(super) fn batch_of_sub_jid(&self, jid: &str) -> Result<Option<String>, HistoryError> {
        let Some(at) = Stamp::of_jid(jid) else {
            return Ok(None);
        };
        let day = std::time::Duration::from_secs(86_400);
        let quoted = format!("\"{jid}\"");
        let rows = self.rows(
            "SELECT kind, record FROM records WHERE kind = 'job_completed' AND at >= ?1 AND at <= ?2 AND instr(record, ?3) > 0",
            &[&at.minus(day).0, &at.plus(day).0, &quoted],
        )?;
        Ok(rows
            .of::<crate::record::JobCompleted>(crate::record::RecordKind::JobCompleted)
            .into_iter()
            .find(|c| {
                c.body
                    .batch
                    .as_ref()
                    .is_some_and(|b| b.sub_jids.iter().any(|s| s == jid))
            })
            .map(|c| c.body.jid))
    }

    /// The verdicts of job number `job`, in the order written.
    pub(super) fn verdicts_of_job(&self, job: i64) -> Result<Vec<JobVerdict>, HistoryError> {
        self.verdicts(Chunks::Job(job))
    }

    /// The verdicts of the jobs first seen at or after `since`, oldest job
    /// first.
    pub(super) fn verdicts_since(&self, since: i64) -> Result<Vec<JobVerdict>, HistoryError> {
        self.verdicts(Chunks::Since(since))
    }

    /// The time of the newest verdict written (of the last chunk).
    pub(super) fn newest_verdict(&self) -> Result<Option<Stamp>, HistoryError> {
        use rusqlite::OptionalExtension;
        let chunk: Option<(Vec<u8>, Vec<u8>)> = self
            .conn()
            .query_row(
                "SELECT returns, missing FROM outcomes ORDER BY job DESC, seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|source| HistoryError::Sql {
                path: self.path.clone(),
                source,
            })?;
        Ok(chunk.and_then(|(returns, missing)| {
            let returned = verdicts::returns(&returns).map(|(_, at, _)| at);
            let missed = verdicts::missing(&missing)
                .into_iter()
                .map(|(_, at, _)| Stamp(at));
            returned.chain(missed).max()
        }))
    }

    /// `minion`'s verdicts, newest first.
    pub(super) fn verdicts_of_minion(&self, minion: &str) -> Result<Vec<JobVerdict>, HistoryError> {
        let mut out = self.verdicts(Chunks::Minion(minion))?;
        out.sort_by_key(|v| std::cmp::Reverse(v.verdict.at));
        Ok(out)
    }

    fn verdicts(&self, chunks: Chunks) -> Result<Vec<JobVerdict>, HistoryError> {
        let sql_error = |source| HistoryError::Sql {
            path: self.path.clone(),
            source,
        };
        let conn = self.conn();
        // The one minion asked for, by number (none: it never answered).
        let only = match chunks {
            Chunks::Minion(name) => match self.minion_number(name)? {
                Some(id) => Some(id),
                None => return Ok(Vec::new()),
            },
            _ => None,
        };
        let select = "SELECT o.job, j.jid, coalesce(j.fun, ''), o.returns, o.missing FROM outcomes o JOIN jobs j ON j.id = o.job";
        let (sql, args): (String, Vec<i64>) = match chunks {
            Chunks::Job(id) => (
                format!("{select} WHERE o.job = ?1 ORDER BY o.seq"),
                vec![id],
            ),
            Chunks::Since(at) => (
                format!(
                    "{select} WHERE o.job >= coalesce((SELECT min(id) FROM jobs WHERE at >= ?1), 1 << 62) ORDER BY o.job, o.seq"
                ),
                vec![at],
            ),
            Chunks::Minion(_) => (format!("{select} ORDER BY o.job, o.seq"), vec![]),
        };
        let mut names = Names::new(self);
        let mut statement = conn.prepare(&sql).map_err(sql_error)?;
        let mut rows = statement.query(params_from_iter(args)).map_err(sql_error)?;
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        while let Some(row) = rows.next().map_err(sql_error)? {
            let job: i64 = row.get(0).map_err(sql_error)?;
            let jid: String = row.get(1).map_err(sql_error)?;
            let fun: String = row.get(2).map_err(sql_error)?;
            let returns = row.get_ref(3).map_err(sql_error)?.as_blob().unwrap_or(&[]);
            let missing = row.get_ref(4).map_err(sql_error)?.as_blob().unwrap_or(&[]);
            if only.is_some_and(|id| !verdicts::has_return_of(returns, id)) && missing.is_empty() {
                continue;
            }
            let mut found = Vec::new();
            for (id, at, r) in verdicts::returns(returns) {
                if only.is_none_or(|o| o == id) {
                    found.push((id, at, Answer::Returned(r)));
                }
            }
            for (id, at, m) in verdicts::missing(missing) {
                if only.is_none_or(|o| o == id) {
                    found.push((id, Stamp(at), Answer::Missing(m)));
                }
            }
            for (id, at, answer) in found {
                // A verdict written twice (a replay, a restart) is read once.
                let late = matches!(&answer, Answer::Returned(r) if r.late);
                let returned = matches!(answer, Answer::Returned(_));
                if !seen.insert((job, id, at, returned, late)) {
                    continue;
                }
                let verdict = Verdict {
                    minion: names.get(id)?,
                    at,
                    answer,
                };
                out.push(JobVerdict {
                    jid: jid.clone(),
                    fun: fun.clone(),
                    verdict,
                });
                if out.len() >= MAX_VERDICTS {
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }
}

impl Store {
    /// The failures of job number `job`, in the order written.
    pub(super) fn failures_of_job(&self, job: i64) -> Result<Vec<JobFailure>, HistoryError> {
        self.failures(Some(job), None)
    }

    /// The failures of `minion` in job number `job`.
    pub(super) fn failures_of(
        &self,
        job: i64,
        minion: &str,
    ) -> Result<Vec<JobFailure>, HistoryError> {
        match self.minion_number(minion)? {
            Some(id) => self.failures(Some(job), Some(id)),
            None => Ok(Vec::new()),
        }
    }

    /// The failures of the jobs first seen at or after `since`, oldest job
    /// first.
    pub(super) fn failures_since(&self, since: i64) -> Result<Vec<JobFailure>, HistoryError> {
        self.failures_where(Failures::Since(since), None)
    }

    /// `minion`'s failures, newest first.
    pub(super) fn failures_of_minion(&self, minion: &str) -> Result<Vec<JobFailure>, HistoryError> {
        let Some(id) = self.minion_number(minion)? else {
            return Ok(Vec::new());
        };
        let mut out = self.failures(None, Some(id))?;
        out.sort_by_key(|f| std::cmp::Reverse(f.at));
        Ok(out)
    }

    /// The failures of job number `job` (none: of every job), of minion
    /// number `only` when given. One written twice (a replay, a restart) is
    /// read once.
    fn failures(
        &self,
        job: Option<i64>,
        only: Option<u32>,
    ) -> Result<Vec<JobFailure>, HistoryError> {
        let of = match job {
            Some(job) => Failures::Job(job),
            None => Failures::All,
        };
        self.failures_where(of, only)
    }

    fn failures_where(
        &self,
        of: Failures,
        only: Option<u32>,
    ) -> Result<Vec<JobFailure>, HistoryError> {
        let sql_error = |source| HistoryError::Sql {
            path: self.path.clone(),
            source,
        };
        let select = "SELECT f.job, j.jid, f.causes FROM failures f JOIN jobs j ON j.id = f.job";
        let (sql, args) = match of {
            Failures::Job(job) => (
                format!("{select} WHERE f.job = ?1 ORDER BY f.seq"),
                vec![job],
            ),
            Failures::Since(at) => (
                format!(
                    "{select} WHERE f.job >= coalesce((SELECT min(id) FROM jobs WHERE at >= ?1), 1 << 62) ORDER BY f.job, f.seq"
                ),
                vec![at],
            ),
            Failures::All => (format!("{select} ORDER BY f.job, f.seq"), vec![]),
        };
        let mut statement = self.conn().prepare(&sql).map_err(sql_error)?;
        let mut rows = statement.query(params_from_iter(args)).map_err(sql_error)?;
        let mut names = Names::new(self);
        let (mut out, mut seen) = (Vec::new(), HashSet::new());
        while let Some(row) = rows.next().map_err(sql_error)? {
            let job: i64 = row.get(0).map_err(sql_error)?;
            let jid: String = row.get(1).map_err(sql_error)?;
            let causes = row.get_ref(2).map_err(sql_error)?.as_blob().unwrap_or(&[]);
            let list = verdicts::failures(causes);
            for (id, at, failed) in list.entries() {
                if only.is_some_and(|o| o != id)
                    || !seen.insert((job, id, at, failed.fingerprint.clone()))
                {
                    continue;
                }
                out.push(JobFailure {
                    jid: jid.clone(),
                    minion: names.get(id)?.to_string(),
                    at,
                    failed: failed.clone(),
                });
                if out.len() >= MAX_VERDICTS {
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }

    /// Minion `name`'s number (none: the history never heard of it).
    fn minion_number(&self, name: &str) -> Result<Option<u32>, HistoryError> {
        use rusqlite::OptionalExtension;
        let id: Option<i64> = self.sql(
            self.conn()
                .query_row("SELECT id FROM minions WHERE name = ?1", [name], |r| {
                    r.get(0)
                })
                .optional(),
        )?;
        Ok(id.and_then(|id| u32::try_from(id).ok()))
    }
}

/// Minions' names by number, each looked up once per query.
struct Names<'a> {
    store: &'a Store,
    known: HashMap<u32, Arc<str>>,
}

impl<'a> Names<'a> {
    fn new(store: &'a Store) -> Self {
        Names {
            store,
            known: HashMap::new(),
        }
    }

    fn get(&mut self, id: u32) -> Result<Arc<str>, HistoryError> {
        if let Some(name) = self.known.get(&id) {
            return Ok(Arc::clone(name));
        }
        let name: String = self.store.sql(
            self.store
                .conn()
                .prepare_cached("SELECT name FROM minions WHERE id = ?1")
                .and_then(|mut s| s.query_row([id], |r| r.get(0))),
        )?;
        let name: Arc<str> = name.into();
        self.known.insert(id, Arc::clone(&name));
        Ok(name)
    }
}
