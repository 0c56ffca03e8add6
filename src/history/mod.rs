//! The record history kept on the master: every record (redacted, as the
//! outputs get it) in an embedded SQLite store, so that `saltsight job`,
//! `jobs`, `failures` and `minion` answer without an upstream.
//!
//! One table: the columns queries filter on (time, kind, jid, minion,
//! fingerprint, commit, function), indexed, and the whole record as JSON. WAL
//! mode: the agent writes in batches (from its own thread, see
//! `sink::history`) while the query commands read. Bounded by age and by size:
//! the oldest records go first, counted. The file is 0640: readable by the
//! agent's group (`salt`), not by the world.

pub mod drift;
pub mod query;
pub mod rollout;
pub mod rows;
pub mod status;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};

use crate::record::Record;
use crate::time::Stamp;

/// The schema's version (`PRAGMA user_version`).
pub const SCHEMA: i64 = 1;

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
        "no history at {path} (is `saltsight run` running with [history] on, and is this the state directory it uses?)"
    )]
    Missing { path: PathBuf },
}

/// One record as stored.
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
            id: record.id.clone(),
            kind: record.kind.as_str(),
            at: record.at.0,
            jid: column(keys.jid),
            minion: column(keys.minion),
            fingerprint: column(keys.fingerprint),
            commit: column(keys.commit),
            fun: column(keys.fun),
            json: String::from_utf8_lossy(json).trim_end().to_owned(),
        }
    }
}

/// The store, opened to write (the agent) or to read (the query commands).
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// What the store holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    pub rows: u64,
    pub bytes: u64,
    /// The oldest record's time.
    pub oldest: Option<Stamp>,
}

impl Store {
    fn sql<T>(&self, result: rusqlite::Result<T>) -> Result<T, HistoryError> {
        result.map_err(|source| HistoryError::Sql {
            path: self.path.clone(),
            source,
        })
    }

    /// Opens (making it, and its directory, when missing) to write: WAL, the
    /// schema, 0640.
    pub fn open_writer(path: &Path) -> Result<Store, HistoryError> {
        let io = |source| HistoryError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
            // The query commands run as the agent's group: they traverse it.
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750));
        }
        let conn = Connection::open(path).map_err(|source| HistoryError::Sql {
            path: path.to_path_buf(),
            source,
        })?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
        };
        // auto_vacuum must be chosen before the first table exists.
        store.sql(store.conn.execute_batch(
            "PRAGMA auto_vacuum = INCREMENTAL;
             PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             PRAGMA busy_timeout = 5000;",
        ))?;
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
        store.sql(store.conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS records (
                 id TEXT PRIMARY KEY,
                 kind TEXT NOT NULL,
                 at INTEGER NOT NULL,
                 jid TEXT,
                 minion TEXT,
                 fingerprint TEXT,
                 commit_id TEXT,
                 fun TEXT,
                 record TEXT NOT NULL
             );
             CREATE INDEX IF NOT EXISTS records_at ON records(at);
             CREATE INDEX IF NOT EXISTS records_kind_at ON records(kind, at);
             CREATE INDEX IF NOT EXISTS records_jid ON records(jid) WHERE jid IS NOT NULL;
             CREATE INDEX IF NOT EXISTS records_minion_at ON records(minion, at) WHERE minion IS NOT NULL;
             CREATE INDEX IF NOT EXISTS records_fingerprint ON records(fingerprint) WHERE fingerprint IS NOT NULL;
             CREATE INDEX IF NOT EXISTS records_commit ON records(commit_id) WHERE commit_id IS NOT NULL;
             PRAGMA user_version = 1;",
        ))?;
        for file in [
            path.to_path_buf(),
            with_suffix(path, "-wal"),
            with_suffix(path, "-shm"),
        ] {
            if file.exists() {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640))
                    .map_err(|source| HistoryError::Io { path: file, source })?;
            }
        }
        Ok(store)
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
        if found != SCHEMA {
            return Err(HistoryError::Schema {
                path: path.to_path_buf(),
                found,
            });
        }
        Ok(store)
    }

    /// Writes `rows` in one transaction; a record already there (the same id:
    /// a replay, a restart) is kept once.
    pub fn insert(&mut self, rows: &[Row]) -> Result<u64, HistoryError> {
        let tx = self
            .conn
            .transaction()
            .map_err(|source| HistoryError::Sql {
                path: self.path.clone(),
                source,
            })?;
        let mut written = 0;
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO records (id, kind, at, jid, minion, fingerprint, commit_id, fun, record)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .map_err(|source| HistoryError::Sql {
                    path: self.path.clone(),
                    source,
                })?;
            for r in rows {
                written += insert
                    .execute(params![
                        r.id,
                        r.kind,
                        r.at,
                        r.jid,
                        r.minion,
                        r.fingerprint,
                        r.commit,
                        r.fun,
                        r.json
                    ])
                    .map_err(|source| HistoryError::Sql {
                        path: self.path.clone(),
                        source,
                    })? as u64;
            }
        }
        tx.commit().map_err(|source| HistoryError::Sql {
            path: self.path.clone(),
            source,
        })?;
        Ok(written)
    }

    /// Removes records older than `before`, then the oldest until the store
    /// is within `max_bytes`. The records removed, for age and for size.
    pub fn prune(&mut self, before: Stamp, max_bytes: u64) -> Result<(u64, u64), HistoryError> {
        let aged = self.sql(
            self.conn
                .execute("DELETE FROM records WHERE at < ?1", [before.0]),
        )? as u64;
        let mut sized = 0u64;
        loop {
            self.reclaim()?;
            let figures = self.figures()?;
            if figures.bytes <= max_bytes || figures.rows == 0 {
                break;
            }
            // A tenth of what is there, oldest first, at least one.
            let n = (figures.rows / 10).max(1);
            sized += self.sql(self.conn.execute(
                "DELETE FROM records WHERE rowid IN (SELECT rowid FROM records ORDER BY at LIMIT ?1)",
                [n as i64],
            ))? as u64;
        }
        Ok((aged, sized))
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
        let (rows, oldest): (i64, Option<i64>) = self.sql(self.conn.query_row(
            "SELECT count(*), min(at) FROM records",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        ))?;
        Ok(Figures {
            rows: rows.max(0) as u64,
            bytes: (pages.max(0) as u64) * (size.max(0) as u64),
            oldest: oldest.map(Stamp),
        })
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
