//! The record history kept on the master: what the agent saw (redacted, as
//! the outputs get it) in an embedded SQLite store, so that `saltsight job`,
//! `jobs`, `failures`, `minion`, `status` and `rollouts` answer without an
//! upstream.
//!
//! What is paid per return is paid once per job and batch: a row per job
//! (`jobs`, its integer key growing with time), its minions' verdicts in
//! compact chunks (`outcomes`, one per job and batch: see `verdicts`), and a
//! row with the whole record only for the rest (`records`: publications,
//! completions, failures, drift, episodes), keyed by an integer growing with
//! time, with the three indexes the answers need. WAL mode: the agent writes
//! in batches (from its own thread, see `sink::history`) while the query
//! commands read. Bounded by age and by size: the oldest go first, counted.
//! The file is 0640: readable by the agent's group (`salt`), not by the world.
pub mod drift;
pub mod failures;
pub mod query;
pub mod rollout;
pub mod rows;
pub mod status;
pub mod verdicts;
pub mod write;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::record::Record;
use crate::time::Stamp;

/// The schema's version (`PRAGMA user_version`): 2 since a job's returns
/// are kept per job, 3 since its root-cause failures are too
/// (`write::Writer::open` reads 1 and 2 into it).
pub const SCHEMA: i64 = 3;

/// The tables and indexes of schema 3.
const TABLES: &str = "
    CREATE TABLE IF NOT EXISTS jobs (
        id INTEGER PRIMARY KEY,
        jid TEXT NOT NULL UNIQUE,
        at INTEGER NOT NULL,
        fun TEXT,
        lost INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS jobs_at ON jobs(at);
    CREATE TABLE IF NOT EXISTS minions (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE
    );
    CREATE TABLE IF NOT EXISTS outcomes (
        job INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        entries INTEGER NOT NULL,
        returns BLOB NOT NULL,
        missing BLOB NOT NULL,
        PRIMARY KEY (job, seq)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS failures (
        job INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        entries INTEGER NOT NULL,
        causes BLOB NOT NULL,
        PRIMARY KEY (job, seq)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS records (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        at INTEGER NOT NULL,
        job INTEGER,
        minion TEXT,
        fingerprint TEXT,
        record TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS records_kind_at ON records(kind, at);
    CREATE INDEX IF NOT EXISTS records_job ON records(job) WHERE job IS NOT NULL;
    CREATE INDEX IF NOT EXISTS records_minion ON records(minion) WHERE minion IS NOT NULL;
";

/// The page cache (KiB) a store opens with.
const CACHE_KIB: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("history {path}: {source}")]
    Sql {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("history {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "history {path} has schema {found}; this saltsight reads schema {SCHEMA} (written by a newer saltsight?)"
    )]
    Schema { path: PathBuf, found: i64 },
    #[error(
        "history {path} has schema {found}, written by an older saltsight; `saltsight run` upgrades it when it starts"
    )]
    Older { path: PathBuf, found: i64 },
    #[error(
        "no history at {path} (is `saltsight run` running with [history] on, and is this the state directory it uses?)"
    )]
    Missing { path: PathBuf },
}

/// One record as stored whole (every kind but a minion's verdict, which a
/// job keeps compact: `verdicts`).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: String,
    pub kind: &'static str,
    pub at: i64,
    pub jid: Option<String>,
    pub minion: Option<String>,
    pub fingerprint: Option<String>,
    pub commit: Option<String>,
    pub fun: Option<String>,
    pub json: String,
}

impl Row {
    /// The columns of `record`; `json` is its ndjson line.
    pub fn of(record: &Record, json: &[u8]) -> Row {
        let keys = record.keys();
        let column = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Row {
            id: record.id.to_string(),
            kind: record.kind.as_str(),
            at: record.at.0,
            jid: column(keys.jid),
            minion: column(keys.minion),
            fingerprint: column(keys.fingerprint),
            commit: column(keys.commit),
            fun: column(keys.fun),
            // Our own encoding: UTF-8 already (checked, not repaired).
            json: match std::str::from_utf8(json) {
                Ok(text) => text.trim_end().to_owned(),
                Err(_) => String::from_utf8_lossy(json).trim_end().to_owned(),
            },
        }
    }
}

/// The store, opened to write (the agent, through `write::Writer`) or to
/// read (the query commands).
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// What the store holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// Records kept: rows, and the verdicts the jobs keep compact.
    pub rows: u64,
    pub bytes: u64,
    /// The oldest record's time.
    pub oldest: Option<Stamp>,
}

impl Store {
    pub(crate) fn sql<T>(&self, result: rusqlite::Result<T>) -> Result<T, HistoryError> {
        result.map_err(|source| HistoryError::Sql {
            path: self.path.clone(),
            source,
        })
    }

    /// Opens (making it, and its directory, when missing) to write: WAL, the
    /// schema when new. Also the schema it found (0: new; 1 is for the
    /// writer to upgrade).
    pub(crate) fn open_to_write(path: &Path) -> Result<(Store, i64), HistoryError> {
        let io = |source| HistoryError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            // A directory made here is the agent's group's to traverse (the
            // query commands run as that group); one that was there (`/tmp`,
            // a shared directory) keeps the permissions it had.
            if !dir.exists() {
                std::fs::create_dir_all(dir).map_err(io)?;
                let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750));
            }
        }
        let conn = Connection::open(path).map_err(|source| HistoryError::Sql {
            path: path.to_path_buf(),
            source,
        })?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
        };
        // auto_vacuum must be chosen before the first table exists. The
        // writer appends at the right edge of its B-trees: a page cache of
        // 512 KiB (SQLite's default is 2 MiB) holds what it touches, and
        // the writer makes room for the minions' names as the fleet grows.
        store.sql(store.conn.execute_batch(&format!(
            "PRAGMA auto_vacuum = INCREMENTAL;
             PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             PRAGMA busy_timeout = 5000;
             PRAGMA cache_size = -{CACHE_KIB};"
        )))?;
        let found: i64 = store.sql(
            store
                .conn
                .query_row("PRAGMA user_version", [], |r| r.get(0)),
        )?;
        if found > SCHEMA {
            return Err(HistoryError::Schema {
                path: path.to_path_buf(),
                found,
            });
        }
        if found == 0 {
            store.sql(store.conn.execute_batch(TABLES))?;
            store.sql(
                store
                    .conn
                    .execute_batch(&format!("PRAGMA user_version = {SCHEMA};")),
            )?;
        }
        Ok((store, found))
    }

    /// The store's files readable by the agent's group only (0640).
    pub(crate) fn restrict(&self) -> Result<(), HistoryError> {
        for file in [
            self.path.clone(),
            with_suffix(&self.path, "-wal"),
            with_suffix(&self.path, "-shm"),
        ] {
            if file.exists() {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640))
                    .map_err(|source| HistoryError::Io { path: file, source })?;
            }
        }
        Ok(())
    }

    /// Opens an existing store to read (the agent may be writing it).
    pub fn open_reader(path: &Path) -> Result<Store, HistoryError> {
        if !path.exists() {
            return Err(HistoryError::Missing {
                path: path.to_path_buf(),
            });
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| HistoryError::Sql {
            path: path.to_path_buf(),
            source,
        })?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
        };
        store.sql(store.conn.busy_timeout(std::time::Duration::from_secs(5)))?;
        let found: i64 = store.sql(
            store
                .conn
                .query_row("PRAGMA user_version", [], |r| r.get(0)),
        )?;
        if found < SCHEMA && found > 0 {
            return Err(HistoryError::Older {
                path: path.to_path_buf(),
                found,
            });
        }
        if found != SCHEMA {
            return Err(HistoryError::Schema {
                path: path.to_path_buf(),
                found,
            });
        }
        Ok(store)
    }

    /// Removes what is older than `before`, then the oldest until the store
    /// is within `max_bytes`. The records removed, for age and for size.
    pub fn prune(&mut self, before: Stamp, max_bytes: u64) -> Result<(u64, u64), HistoryError> {
        // Jobs (their rows and verdicts) by the time they were first seen,
        // other records by their own; both keys grow with time.
        let last = |sql: &str, args: &[i64]| -> Result<i64, HistoryError> {
            self.sql(
                self.conn
                    .query_row(sql, rusqlite::params_from_iter(args), |r| r.get(0)),
            )
        };
        let aged = self.remove(
            last(
                "SELECT coalesce(max(id), 0) FROM jobs WHERE at < ?1",
                &[before.0],
            )?,
            last(
                "SELECT coalesce(max(id), 0) FROM records WHERE job IS NULL AND at < ?1",
                &[before.0],
            )?,
        )?;
        let mut sized = 0u64;
        loop {
            self.reclaim()?;
            let figures = self.figures()?;
            if figures.bytes <= max_bytes || figures.rows == 0 {
                break;
            }
            // A tenth of the jobs and of the other records, oldest first.
            let removed = self.remove(
                last(
                    "SELECT coalesce(max(id), 0) FROM (SELECT id FROM jobs ORDER BY id
                      LIMIT max(1, (SELECT count(*) FROM jobs) / 10))",
                    &[],
                )?,
                last(
                    "SELECT coalesce(max(id), 0) FROM (SELECT id FROM records WHERE job IS NULL ORDER BY id
                      LIMIT max(1, (SELECT count(*) FROM records WHERE job IS NULL) / 10))",
                    &[],
                )?,
            )?;
            if removed == 0 {
                break;
            }
            sized += removed;
        }
        Ok((aged, sized))
    }

    /// Removes the jobs up to number `job` (their records and verdicts) and
    /// the other records up to number `record`. The records removed.
    fn remove(&self, job: i64, record: i64) -> Result<u64, HistoryError> {
        let tx = self.sql(self.immediate())?;
        let verdicts: i64 = self.sql(tx.query_row(
            "SELECT (SELECT coalesce(sum(entries), 0) FROM outcomes WHERE job <= ?1)
                  + (SELECT coalesce(sum(entries), 0) FROM failures WHERE job <= ?1)",
            [job],
            |r| r.get(0),
        ))?;
        let mut removed = verdicts.max(0) as u64;
        self.sql(tx.execute("DELETE FROM outcomes WHERE job <= ?1", [job]))?;
        self.sql(tx.execute("DELETE FROM failures WHERE job <= ?1", [job]))?;
        removed += self.sql(tx.execute(
            "DELETE FROM records WHERE job IS NOT NULL AND job <= ?1",
            [job],
        ))? as u64;
        self.sql(tx.execute("DELETE FROM jobs WHERE id <= ?1", [job]))?;
        removed += self.sql(tx.execute(
            "DELETE FROM records WHERE job IS NULL AND id <= ?1",
            [record],
        ))? as u64;
        self.sql(tx.commit())?;
        Ok(removed)
    }

    /// Gives freed pages back to the file system and keeps the WAL short.
    fn reclaim(&self) -> Result<(), HistoryError> {
        // The pragma frees pages as it is stepped: step it to its end.
        let mut vacuum = self.sql(self.conn.prepare("PRAGMA incremental_vacuum"))?;
        let mut rows = self.sql(vacuum.query([]))?;
        while self.sql(rows.next())?.is_some() {}
        drop(rows);
        self.sql(
            self.conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())),
        )
    }

    pub fn figures(&self) -> Result<Figures, HistoryError> {
        let pages: i64 = self.sql(self.conn.query_row("PRAGMA page_count", [], |r| r.get(0)))?;
        let size: i64 = self.sql(self.conn.query_row("PRAGMA page_size", [], |r| r.get(0)))?;
        let count = |sql: &str| -> Result<(i64, Option<i64>), HistoryError> {
            self.sql(self.conn.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?))))
        };
        let (records, oldest_record) = count("SELECT count(*), min(at) FROM records")?;
        let (verdicts, oldest_job) = count(
            "SELECT (SELECT coalesce(sum(entries), 0) FROM outcomes) + (SELECT coalesce(sum(entries), 0) FROM failures), min(at) FROM jobs",
        )?;
        let oldest = match (oldest_record, oldest_job) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(Figures {
            rows: (records.max(0) + verdicts.max(0)) as u64,
            bytes: (pages.max(0) as u64) * (size.max(0) as u64),
            oldest: oldest.map(Stamp),
        })
    }

    /// A write transaction that takes the write lock at once (waiting for
    /// it up to the busy timeout): a deferred one that read first could be
    /// refused at once when it comes to write.
    pub(crate) fn immediate(&self) -> rusqlite::Result<rusqlite::Transaction<'_>> {
        rusqlite::Transaction::new_unchecked(&self.conn, rusqlite::TransactionBehavior::Immediate)
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests;
