//! Writing the history ([`Writer`], the agent's only): a batch is one
//! transaction, a row per job it touches (made on its first record), a chunk
//! of verdicts per job, and a row per other record. The numbers of jobs and
//! minions written lately are kept in memory (bounded) so a batch looks each
//! up once. Opening an older store reads it into the current schema: a
//! schema 1 store's rows (a row per record), then a schema 2 store's
//! `state_failure` rows, into their jobs' chunks.

use std::path::Path;
use std::sync::Arc;

use foldhash::HashMap;
use rusqlite::{Connection, OptionalExtension, params};

use super::rows::Stored;
use super::verdicts::{self, Answer, FailedState, MissingFacts, Verdict};
use super::{CACHE_KIB, HistoryError, Row, SCHEMA, Store, TABLES};
use crate::record::{MinionMissing, MinionReturn, Record, RecordKind, StateFailure};
use crate::time::Stamp;

/// Job numbers remembered at most (then forgotten together and looked up).
const MAX_JOB_KEYS: usize = 65_536;
/// Minion numbers remembered at most.
const MAX_MINION_KEYS: usize = 1 << 20;
/// The page cache's room per minion the store knows: its index of names
/// (`minions.name`) is written in no order, a new minion's page anywhere.
const CACHE_BYTES_PER_MINION: usize = 48;
/// The page cache at most (KiB), whatever the fleet (`Store`'s own is the
/// least: the writer's other B-trees are appended at their right edge).
const MAX_CACHE_KIB: usize = 32 * 1024;

/// One job's verdicts in a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct JobVerdicts {
    pub jid: String,
    /// The job's function, as its returns name it.
    pub fun: Option<String>,
    pub verdicts: Vec<Verdict>,
    /// Its root-cause failures: (minion, time, its cause's place in
    /// `causes`).
    pub failures: Vec<(Arc<str>, Stamp, u32)>,
    /// What the answers read of each of its failures, a cause that recurs
    /// kept once (the same failure on many minions).
    pub causes: Vec<FailedState>,
}

/// The causes a job's new failure is looked for among (its latest): a job
/// whose every minion fails differently costs no more than this per failure.
const RECENT_CAUSES: usize = 8;

/// What the agent writes at once.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// Every record but the verdicts, whole.
    pub rows: Vec<Row>,
    /// The verdicts, by job.
    pub verdicts: Vec<JobVerdicts>,
    /// Records of a job the history could not take (its writer behind), by
    /// jid: its answer says it is incomplete by as many.
    pub lost: Vec<(String, u64)>,
    /// Where each job's verdicts are in `verdicts`.
    jobs: HashMap<String, usize>,
    /// Rows, verdicts and failures in the batch.
    records: usize,
    /// The newest record's time.
    newest: Option<Stamp>,
}

impl Batch {
    /// Adds `record` (`json`: its line): a verdict or a failure to its
    /// job's lists, any other record as a row.
    pub fn push(&mut self, record: &Record, json: &[u8]) {
        self.newest = self.newest.max(Some(record.at));
        if let Some((jid, fun, verdict)) = verdicts::of_record(record) {
            self.add(jid, fun, verdict);
        } else if let Some(failure) = verdicts::failure_of_record(record) {
            self.add_failure(record.at, failure);
        } else {
            self.add_row(Row::of(record, json));
        }
    }

    fn add_row(&mut self, row: Row) {
        self.rows.push(row);
        self.records += 1;
    }

    /// Appends `verdict` to job `jid`'s list.
    fn add(&mut self, jid: &str, fun: Option<&str>, verdict: Verdict) {
        self.job(jid, fun).verdicts.push(verdict);
    }

    /// Appends failure `f` at `at` to its job's list: its cause once, if it
    /// is one of the job's latest.
    fn add_failure(&mut self, at: Stamp, f: &StateFailure) {
        let job = self.job(&f.jid, Some(&f.fun));
        let recent = job.causes.len().saturating_sub(RECENT_CAUSES);
        let cause = match job.causes[recent..].iter().rposition(|c| c.is_of(f)) {
            Some(i) => recent + i,
            None => {
                job.causes.push(FailedState::of(f));
                job.causes.len() - 1
            }
        };
        let cause = u32::try_from(cause).unwrap_or(u32::MAX);
        job.failures.push((Arc::clone(&f.minion), at, cause));
    }

    /// Job `jid`'s lists in the batch (made on its first record), one more
    /// record counted.
    fn job(&mut self, jid: &str, fun: Option<&str>) -> &mut JobVerdicts {
        self.records += 1;
        let i = match self.jobs.get(jid) {
            Some(&i) => i,
            None => {
                self.jobs.insert(jid.to_owned(), self.verdicts.len());
                self.verdicts.push(JobVerdicts {
                    jid: jid.to_owned(),
                    fun: fun.map(str::to_owned),
                    verdicts: Vec::new(),
                    failures: Vec::new(),
                    causes: Vec::new(),
                });
                self.verdicts.len() - 1
            }
        };
        &mut self.verdicts[i]
    }

    /// The newest record's time in the batch.
    pub fn newest(&self) -> Option<Stamp> {
        self.newest
    }

    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.lost.is_empty()
    }
}

/// The writer's memory of keys.
#[derive(Debug, Default)]
struct Keys {
    jobs: HashMap<String, (i64, bool)>,
    minions: HashMap<String, u32>,
    /// The next chunk's sequence number.
    seq: i64,
    /// The minions the store knows, and how many the page cache was last
    /// sized for.
    known_minions: usize,
    cache_for: usize,
    /// Forgotten after a write that failed: [`Keys::start`] again first.
    forgotten: bool,
}

impl Keys {
    fn start(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        self.seq = conn.query_row(
            "SELECT max((SELECT coalesce(max(seq), 0) FROM outcomes), (SELECT coalesce(max(seq), 0) FROM failures)) + 1",
            [],
            |r| r.get(0),
        )?;
        let known: i64 = conn.query_row("SELECT count(*) FROM minions", [], |r| r.get(0))?;
        self.known_minions = usize::try_from(known).unwrap_or(0);
        self.forgotten = false;
        self.size_cache(conn)
    }

    /// The page cache made room for the minions' index of names, each time
    /// the fleet known has doubled: a 200,000-minion job's first returns
    /// each read and wrote a page of it from the disk with SQLite's room
    /// (18 µs a new minion, a third of the agent's CPU over that job).
    fn size_cache(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        if self.known_minions < self.cache_for.saturating_mul(2).max(1) {
            return Ok(());
        }
        self.cache_for = self.known_minions;
        let kib = cache_kib(self.known_minions);
        conn.execute_batch(&format!("PRAGMA cache_size = -{kib};"))
    }

    /// After a prune: a job number may be gone.
    fn forget_jobs(&mut self) {
        self.jobs.clear();
    }

    /// After a write rolled back: every number may be gone; read again
    /// what the store holds before the next.
    fn forget_all(&mut self) {
        *self = Keys {
            forgotten: true,
            ..Keys::default()
        };
    }

    /// The number of job `jid` (its row made when new; its function set when
    /// first known).
    fn job(
        &mut self,
        conn: &Connection,
        jid: &str,
        at: i64,
        fun: Option<&str>,
    ) -> rusqlite::Result<i64> {
        if let Some((id, has_fun)) = self.jobs.get(jid)
            && (*has_fun || fun.is_none())
        {
            return Ok(*id);
        }
        let id: i64 = conn.prepare_cached(
            "INSERT INTO jobs (jid, at, fun) VALUES (?1, ?2, ?3)
             ON CONFLICT (jid) DO UPDATE SET fun = coalesce(jobs.fun, excluded.fun), at = min(jobs.at, excluded.at)
             RETURNING id",
        )?
        .query_row(params![jid, at, fun], |r| r.get(0))?;
        if self.jobs.len() >= MAX_JOB_KEYS {
            self.jobs.clear();
        }
        self.jobs.insert(jid.to_owned(), (id, fun.is_some()));
        Ok(id)
    }

    /// The number of minion `name` (given when new).
    fn minion(&mut self, conn: &Connection, name: &str) -> rusqlite::Result<u32> {
        if let Some(id) = self.minions.get(name) {
            return Ok(*id);
        }
        // Every minion the store knows is remembered (a new store, or each
        // looked up since): one that is not is new, no need to ask.
        let known: Option<i64> = if self.minions.len() < self.known_minions {
            conn.prepare_cached("SELECT id FROM minions WHERE name = ?1")?
                .query_row([name], |r| r.get(0))
                .optional()?
        } else {
            None
        };
        let id = match known {
            Some(id) => id,
            None => {
                // Not `RETURNING`: SQLite builds a table for what it returns.
                conn.prepare_cached("INSERT INTO minions (name) VALUES (?1)")?
                    .execute([name])?;
                let id = conn.last_insert_rowid();
                self.known_minions += 1;
                self.size_cache(conn)?;
                id
            }
        };
        let id = u32::try_from(id).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(0, id))?;
        if self.minions.len() >= MAX_MINION_KEYS {
            // Not every one remembered now: looked up again.
            self.minions.clear();
        }
        self.minions.insert(name.to_owned(), id);
        Ok(id)
    }
}

/// The page cache (KiB) for a store that knows `minions`.
fn cache_kib(minions: usize) -> usize {
    (minions.saturating_mul(CACHE_BYTES_PER_MINION) / 1024).clamp(CACHE_KIB, MAX_CACHE_KIB)
}

/// The store as the agent writes it.
pub struct Writer {
    store: Store,
    keys: Keys,
}

impl Writer {
    /// Opens (making it when missing, upgrading an older store) to write;
    /// its files 0640.
    pub fn open(path: &Path) -> Result<Writer, HistoryError> {
        let (store, found) = Store::open_to_write(path)?;
        let mut writer = Writer {
            store,
            keys: Keys::default(),
        };
        if found == 1 {
            writer.upgrade(2, schema_1_to_2)?;
        }
        if found == 1 || found == 2 {
            writer.upgrade(SCHEMA, schema_2_to_3)?;
        }
        let started = writer.keys.start(&writer.store.conn);
        writer.store.sql(started)?;
        writer.store.restrict()?;
        Ok(writer)
    }

    /// Writes `batch` in one transaction. The records written.
    pub fn write(&mut self, batch: &Batch) -> Result<u64, HistoryError> {
        let written = self.write_keeping_keys(batch);
        if written.is_err() {
            // Rolled back: the numbers it made are not in the store.
            self.keys.forget_all();
        }
        written
    }

    fn write_keeping_keys(&mut self, batch: &Batch) -> Result<u64, HistoryError> {
        let tx = self.store.sql(self.store.immediate())?;
        if self.keys.forgotten {
            self.store.sql(self.keys.start(&tx))?;
        }
        let written = put(&tx, &mut self.keys, batch);
        let written = self.store.sql(written)?;
        self.store.sql(tx.commit())?;
        Ok(written)
    }

    /// `Store::prune`, then the job numbers it may have removed forgotten.
    pub fn prune(&mut self, before: Stamp, max_bytes: u64) -> Result<(u64, u64), HistoryError> {
        let pruned = self.store.prune(before, max_bytes);
        self.keys.forget_jobs();
        pruned
    }

    pub fn figures(&self) -> Result<super::Figures, HistoryError> {
        self.store.figures()
    }

    /// Reads the store into schema `to` by `step`, in place and in one
    /// transaction: what the step read is written as the agent writes it,
    /// then the step's own statement runs (what it read is dropped).
    fn upgrade(
        &mut self,
        to: i64,
        step: fn(&Connection) -> rusqlite::Result<Upgrade>,
    ) -> Result<(), HistoryError> {
        let tx = self.store.sql(self.store.immediate())?;
        let upgraded = (|| {
            let upgrade = step(&tx)?;
            self.keys.start(&tx)?;
            put(&tx, &mut self.keys, &upgrade.batch)?;
            tx.execute_batch(&format!("{} PRAGMA user_version = {to};", upgrade.then))?;
            Ok::<_, rusqlite::Error>((upgrade.read, upgrade.unread))
        })();
        let (read, unread) = self.store.sql(upgraded)?;
        self.store.sql(tx.commit())?;
        tracing::info!(read, unread, "History upgraded to schema {to}.");
        Ok(())
    }
}

/// What an upgrade step read: the batch to write, the rows read and those
/// left out (not decoded, counted in the log), and the statement that then
/// drops what it read.
struct Upgrade {
    batch: Batch,
    read: u64,
    unread: u64,
    then: &'static str,
}

/// Schema 1 (a row per record) to 2: each verdict into its job's chunk, the
/// rest as rows (its `state_failure` rows then go the way of a schema 2
/// store's).
fn schema_1_to_2(tx: &Connection) -> rusqlite::Result<Upgrade> {
    tx.execute_batch(
        "DROP INDEX IF EXISTS records_at;
         DROP INDEX IF EXISTS records_kind_at;
         DROP INDEX IF EXISTS records_jid;
         DROP INDEX IF EXISTS records_minion_at;
         DROP INDEX IF EXISTS records_fingerprint;
         DROP INDEX IF EXISTS records_commit;
         ALTER TABLE records RENAME TO records_v1;",
    )?;
    tx.execute_batch(TABLES)?;
    let mut statement = tx.prepare(
        "SELECT kind, at, jid, minion, fingerprint, fun, record FROM records_v1 ORDER BY at, rowid",
    )?;
    let (mut batch, mut unread, mut read) = (Batch::default(), 0u64, 0u64);
    let mut rows = statement.query([])?;
    while let Some(r) = rows.next()? {
        read += 1;
        let kind: String = r.get(0)?;
        let json: String = r.get(6)?;
        let Ok(kind) = kind.parse::<RecordKind>() else {
            unread += 1;
            continue;
        };
        if let Some((jid, fun, verdict)) = verdict_of_v1(kind, &json) {
            batch.add(&jid, fun.as_deref(), verdict);
            continue;
        }
        if matches!(
            kind,
            RecordKind::MinionReturn | RecordKind::LateReturn | RecordKind::MinionMissing
        ) {
            unread += 1;
            continue;
        }
        batch.add_row(Row {
            id: String::new(),
            kind: kind.as_str(),
            at: r.get(1)?,
            jid: r.get(2)?,
            minion: r.get(3)?,
            fingerprint: r.get(4)?,
            commit: None,
            fun: r.get(5)?,
            json,
        });
    }
    Ok(Upgrade {
        batch,
        read,
        unread,
        then: "DROP TABLE records_v1;",
    })
}

/// Schema 2 to 3: each `state_failure` row into its job's failures.
fn schema_2_to_3(tx: &Connection) -> rusqlite::Result<Upgrade> {
    tx.execute_batch(TABLES)?;
    let mut statement =
        tx.prepare("SELECT record FROM records WHERE kind = 'state_failure' ORDER BY id")?;
    let (mut batch, mut unread, mut read) = (Batch::default(), 0u64, 0u64);
    let mut rows = statement.query([])?;
    while let Some(r) = rows.next()? {
        read += 1;
        let json: String = r.get(0)?;
        match serde_json::from_str::<Stored<StateFailure>>(&json) {
            Ok(f) => batch.add_failure(f.at, &f.body),
            Err(_) => unread += 1,
        }
    }
    Ok(Upgrade {
        batch,
        read,
        unread,
        then: "DELETE FROM records WHERE kind = 'state_failure';",
    })
}

/// Writes `batch` through `conn` (a transaction is open). The records written.
fn put(conn: &Connection, keys: &mut Keys, batch: &Batch) -> rusqlite::Result<u64> {
    let mut written = 0u64;
    for row in &batch.rows {
        let job = match &row.jid {
            Some(jid) => Some(keys.job(conn, jid, row.at, row.fun.as_deref())?),
            None => None,
        };
        conn.prepare_cached(
            "INSERT INTO records (kind, at, job, minion, fingerprint, record)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![
            row.kind,
            row.at,
            job,
            row.minion,
            row.fingerprint,
            row.json
        ])?;
        written += 1;
    }
    for job in &batch.verdicts {
        let times = job.verdicts.iter().map(|v| v.at.0);
        let Some(first) = times.chain(job.failures.iter().map(|f| f.1.0)).min() else {
            continue;
        };
        let id = keys.job(conn, &job.jid, first, job.fun.as_deref())?;
        let mut returns = Vec::with_capacity(job.verdicts.len() * verdicts::RETURN_WIDTH);
        let mut missing: Vec<(u32, i64, MissingFacts)> = Vec::new();
        for v in &job.verdicts {
            let minion = keys.minion(conn, &v.minion)?;
            match &v.answer {
                Answer::Returned(r) => verdicts::put_return(&mut returns, minion, v.at, r),
                Answer::Missing(m) => missing.push((minion, v.at.0, m.clone())),
            }
        }
        let seq = keys.seq;
        keys.seq += 1;
        if !job.verdicts.is_empty() {
            conn.prepare_cached(
                "INSERT INTO outcomes (job, seq, entries, returns, missing) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                id,
                seq,
                job.verdicts.len() as i64,
                returns,
                verdicts::put_missing(&missing)
            ])?;
        }
        if !job.failures.is_empty() {
            let mut failures = Vec::with_capacity(job.failures.len());
            for (minion, at, cause) in &job.failures {
                // Each is the place of a cause pushed with it.
                let Some(failed) = job.causes.get(*cause as usize) else {
                    continue;
                };
                failures.push((keys.minion(conn, minion)?, *at, failed));
            }
            conn.prepare_cached(
                "INSERT INTO failures (job, seq, entries, causes) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                id,
                seq,
                failures.len() as i64,
                verdicts::put_failures(&failures)
            ])?;
        }
        let entries = job.verdicts.len() + job.failures.len();
        written += entries as u64;
    }
    for (jid, n) in &batch.lost {
        let now = Stamp::now();
        let id = keys.job(conn, jid, now.0, None)?;
        conn.execute(
            "UPDATE jobs SET lost = lost + ?1 WHERE id = ?2",
            params![*n as i64, id],
        )?;
    }
    Ok(written)
}

/// The verdict a schema 1 row of a return or a missing minion states.
fn verdict_of_v1(kind: RecordKind, json: &str) -> Option<(String, Option<String>, Verdict)> {
    match kind {
        RecordKind::MinionReturn | RecordKind::LateReturn => {
            let r = serde_json::from_str::<Stored<MinionReturn>>(json).ok()?;
            let verdict = Verdict::returned(&r.body, r.at, kind == RecordKind::LateReturn);
            Some((
                r.body.jid.to_string(),
                r.body.fun.map(|f| f.to_string()),
                verdict,
            ))
        }
        RecordKind::MinionMissing => {
            let m = serde_json::from_str::<Stored<MinionMissing>>(json).ok()?;
            let verdict = Verdict::missing(&m.body, m.at);
            Some((m.body.jid, Some(m.body.fun), verdict))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_size(writer: &Writer) -> i64 {
        let conn = &writer.store.conn;
        conn.query_row("PRAGMA cache_size", [], |r| r.get(0))
            .expect("reads")
    }

    /// The page cache grows with the minions the store knows, each time
    /// they double, from the store's own to its bound; reopened, it is
    /// sized for them at once.
    #[test]
    fn the_page_cache_makes_room_for_the_fleets_names() {
        assert_eq!(cache_kib(0), CACHE_KIB);
        assert_eq!(cache_kib(100_000), 100_000 * CACHE_BYTES_PER_MINION / 1024);
        assert_eq!(cache_kib(usize::MAX), MAX_CACHE_KIB);

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("history.db");
        let mut writer = Writer::open(&path).expect("opens");
        assert_eq!(cache_size(&writer), -(cache_kib(0) as i64));
        for m in 0..30_000 {
            let Writer { store, keys } = &mut writer;
            keys.minion(&store.conn, &format!("web{m:05}"))
                .expect("a number");
        }
        assert_eq!(cache_size(&writer), -(cache_kib(16_384) as i64));
        drop(writer);
        let writer = Writer::open(&path).expect("opens again");
        assert_eq!(cache_size(&writer), -(cache_kib(30_000) as i64));
    }

    /// A minion's number is the store's, whether it is remembered, looked
    /// up (the store knew it before), or new; after a write rolled back,
    /// the numbers it made are forgotten.
    #[test]
    fn a_minions_number_is_the_stores_after_a_reopen_and_a_rollback() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("history.db");
        let number = |writer: &mut Writer, name: &str| {
            let Writer { store, keys } = writer;
            let tx = store.conn.unchecked_transaction().expect("a transaction");
            if keys.forgotten {
                keys.start(&tx).expect("read again");
            }
            let id = keys.minion(&tx, name).expect("a number");
            tx.commit().expect("commits");
            let stored: u32 = store
                .conn
                .query_row("SELECT id FROM minions WHERE name = ?1", [name], |r| {
                    r.get(0)
                })
                .expect("stored");
            assert_eq!(id, stored, "{name}");
            id
        };
        let mut writer = Writer::open(&path).expect("opens");
        let (a, b) = (number(&mut writer, "a"), number(&mut writer, "b"));
        assert_eq!(number(&mut writer, "a"), a, "remembered");
        drop(writer);
        let mut writer = Writer::open(&path).expect("opens again");
        assert_eq!(number(&mut writer, "b"), b, "looked up");
        let c = number(&mut writer, "c");
        assert_eq!(
            number(&mut writer, "a"),
            a,
            "looked up, every one known now"
        );
        assert!(number(&mut writer, "d") > c, "new");

        let Writer { store, keys } = &mut writer;
        let tx = store.conn.unchecked_transaction().expect("a transaction");
        keys.minion(&tx, "lost").expect("a number");
        drop(tx);
        writer.keys.forget_all();
        let e = number(&mut writer, "e");
        assert_ne!(number(&mut writer, "lost"), e);
    }
}
