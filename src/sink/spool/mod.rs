//! The disk spool of one HTTP output: every record is on disk before it is sent,
//! and a batch leaves the disk only after a 2xx (or into the dead-letter
//! directory). It survives upstream outages and a SIGKILL of saltsight.
//!
//! Layout, in `<spool.dir>/<output>/` (0700, files 0600):
//!
//! ```text
//! <seq>.open      the batch being filled (at most one; appended per event)
//! <seq>.seg       sealed batches, oldest first by seq (unix micros at opening)
//! .lock           flock: one saltsight per spool
//! quarantine/     damaged files, as found
//! dead-letter/    batches upstream refused (4xx), each with <seq>.json saying why
//! ```
//!
//! The writer ([`SpoolWriter`]) runs on the consumer task; the sender reads
//! sealed batches through [`Spool`]. They share the index of sealed batches under
//! one mutex, held for bookkeeping only, never across IO.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::encode::Encoding;
use crate::config::spool::SpoolConfig;

#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("spool {} is in use by another saltsight (its .lock is held)", path.display())]
    Locked { path: PathBuf },
}

fn io<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(std::io::Error) -> SpoolError + 'p {
    move |source| SpoolError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Counters of one spool, read by logs now and by metrics.
#[derive(Debug, Default)]
pub struct SpoolStats {
    pub records_spooled: AtomicU64,
    pub batches_sealed: AtomicU64,
    pub dropped_batches: AtomicU64,
    pub dropped_records: AtomicU64,
    pub corrupt_files: AtomicU64,
    pub corrupt_records: AtomicU64,
    pub write_errors: AtomicU64,
    pub sent_batches: AtomicU64,
    pub sent_records: AtomicU64,
    pub retries: AtomicU64,
    pub dead_batches: AtomicU64,
    pub dead_records: AtomicU64,
    /// Records in delivered batches that upstream said it refused (OTLP's
    /// partial success).
    pub rejected_records: AtomicU64,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// A sealed batch waiting in the spool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sealed {
    pub seq: u64,
    pub bytes: u64,
    pub records: u32,
}

struct Inner {
    name: String,
    dir: PathBuf,
    max_bytes: u64,
    fsync: bool,
    encoding: Encoding,
    index: Mutex<Index>,
    notify: Notify,
    stats: SpoolStats,
    _lock: Flock<File>,
}

/// One output's spool, shared by its writer and its sender.
#[derive(Clone)]
pub struct Spool {
    inner: Arc<Inner>,
}

/// What opening found of an earlier run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    pub batches: u64,
    pub records: u64,
    pub corrupt_files: u64,
    pub torn_bytes: u64,
    /// Things named like a batch that are not files, set aside.
    pub foreign_entries: u64,
}

fn create_private_dir(path: &Path) -> Result<(), SpoolError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(io("create the directory", path))?;
    let meta = fs::metadata(path).map_err(io("stat", path))?;
    if meta.permissions().mode() & 0o077 != 0 {
        warn!(dir = %path.display(), mode = format!("{:o}", meta.permissions().mode() & 0o777), "Spool directory was open to others; setting it to 0700.");
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))
            .map_err(io("chmod 0700", path))?;
    }
    Ok(())
}

fn create_private_file(path: &Path) -> Result<File, SpoolError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io("create", path))
}

fn sync_dir(dir: &Path) -> Result<(), SpoolError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync the directory", dir))
}

/// `dir/name`, or `dir/name.N` for the first N free: nothing in quarantine or the
/// dead-letter directory is ever overwritten.
fn unique_path(dir: &Path, name: &str) -> PathBuf {
    let first = dir.join(name);
    if !first.exists() {
        return first;
    }
    (1..)
        .map(|n| dir.join(format!("{name}.{n}")))
        .find(|p| !p.exists())
        .unwrap_or(first)
}

fn seq_of(path: &Path, extension: &str) -> Option<u64> {
    if path.extension()? != extension {
        return None;
    }
    let stem = path.file_stem()?.to_str()?;
    (stem.len() == 20).then(|| stem.parse().ok())?
}

fn seg_name(seq: u64, extension: &str) -> String {
    format!("{seq:020}.{extension}")
}

impl Spool {
    /// Opens (creating) `<root>/<name>/`, takes its lock, and recovers what an
    /// earlier run left: the unfinished batch is sealed (a torn last record cut
    /// off), damaged files are quarantined with their good records kept.
    pub fn open(
        root: &Path,
        name: &str,
        config: &SpoolConfig,
        encoding: Encoding,
    ) -> Result<(Spool, Recovered), SpoolError> {
        create_private_dir(root)?;
        let dir = root.join(name);
        create_private_dir(&dir)?;
        create_private_dir(&dir.join("quarantine"))?;
        create_private_dir(&dir.join("dead-letter"))?;
        let lock_path = dir.join(".lock");
        let lock_file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io("open", &lock_path))?;
        let lock = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock)
            .map_err(|_| SpoolError::Locked { path: dir.clone() })?;
        let spool = Spool {
            inner: Arc::new(Inner {
                name: name.to_string(),
                dir,
                max_bytes: config.max_bytes,
                fsync: config.fsync,
                encoding,
                index: Mutex::new(Index::default()),
                notify: Notify::new(),
                stats: SpoolStats::default(),
                _lock: lock,
            }),
        };
        let recovered = spool.recover()?;
        Ok((spool, recovered))
    }

    fn index(&self) -> MutexGuard<'_, Index> {
        // A panic elsewhere cannot leave the index half-updated: every update is
        // a few integer operations.
        self.inner
            .index
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub fn stats(&self) -> &SpoolStats {
        &self.inner.stats
    }

    /// Bytes on disk: sealed batches and the open one.
    pub fn bytes(&self) -> u64 {
        let index = self.index();
        index.sealed_bytes + index.open_bytes
    }

    /// When the oldest record not yet delivered was spooled: the sequence number
    /// (open time, unix micros) of the oldest sealed batch, or of the open one.
    pub fn oldest_unsent(&self) -> Option<u64> {
        let index = self.index();
        let sealed = index.sealed.keys().next().copied();
        sealed.into_iter().chain(index.open_seq).min()
    }

    /// Sealed batches waiting.
    pub fn pending(&self) -> usize {
        self.index().sealed.len()
    }

    /// The oldest sealed batch; waits for one, or for `cancel`.
    pub async fn next(&self, cancel: &CancellationToken) -> Option<Sealed> {
        loop {
            let notified = self.inner.notify.notified();
            if let Some(sealed) = self.index().sealed.values().next().copied() {
                return Some(sealed);
            }
            tokio::select! {
                () = notified => {}
                () = cancel.cancelled() => return None,
            }
        }
    }

    pub fn path_of(&self, seq: u64) -> PathBuf {
        self.inner.dir.join(seg_name(seq, "seg"))
    }

    /// Waits until every sealed batch has left (sent or dead-lettered), or `cancel`.
    pub async fn drained(&self, cancel: &CancellationToken) -> bool {
        loop {
            if self.pending() == 0 {
                return true;
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
                () = cancel.cancelled() => return false,
            }
        }
    }
}

pub mod backlog;
mod index;
mod recovery;
mod writer;

use index::Index;
pub use writer::{BatchConfig, SpoolWriter};

#[cfg(test)]
mod tests;
