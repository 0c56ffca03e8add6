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

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::fcntl::{Flock, FlockArg};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::segment::{self, Segment};
use crate::config::outputs::{BatchConfig, Encoding, SpoolConfig};

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

#[derive(Debug, Default)]
struct Index {
    sealed: BTreeMap<u64, Sealed>,
    sealed_bytes: u64,
    open_bytes: u64,
    /// The open batch (its records are not sent yet either).
    open_seq: Option<u64>,
    last_seq: u64,
}

impl Index {
    fn next_seq(&mut self) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        self.last_seq = now.max(self.last_seq + 1);
        self.last_seq
    }

    fn remove(&mut self, seq: u64) -> Option<Sealed> {
        let sealed = self.sealed.remove(&seq)?;
        self.sealed_bytes -= sealed.bytes;
        Some(sealed)
    }
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

    fn recover(&self) -> Result<Recovered, SpoolError> {
        let dir = &self.inner.dir;
        let mut found = Vec::new();
        for entry in fs::read_dir(dir).map_err(io("list", dir))? {
            let path = entry.map_err(io("list", dir))?.path();
            if let Some(seq) = seq_of(&path, "seg") {
                found.push((seq, path, false));
            } else if let Some(seq) = seq_of(&path, "open") {
                found.push((seq, path, true));
            }
        }
        found.sort();
        let mut recovered = Recovered::default();
        for (seq, path, open) in found {
            {
                let mut index = self.index();
                index.last_seq = index.last_seq.max(seq);
            }
            let bytes = fs::read(&path).map_err(io("read", &path))?;
            let segment = match segment::decode(&bytes) {
                Ok(segment) => segment,
                Err(e) => {
                    warn!(file = %path.display(), error = %e, "Spool file is damaged; quarantined.");
                    self.quarantine(&path)?;
                    recovered.corrupt_files += 1;
                    continue;
                }
            };
            recovered.torn_bytes += segment.torn_tail_bytes as u64;
            if segment.corrupt_records > 0 || (segment.torn_tail_bytes > 0 && !open) {
                warn!(file = %path.display(), corrupt_records = segment.corrupt_records, good_records = segment.records, "Spool file is damaged; its good records are kept, the file is quarantined.");
                add(
                    &self.inner.stats.corrupt_records,
                    u64::from(segment.corrupt_records),
                );
                recovered.corrupt_files += 1;
                self.quarantine_copy(&path)?;
                self.rewrite(&path, &segment)?;
            } else if segment.torn_tail_bytes > 0 {
                // A machine that lost power mid-write: the last record never was.
                let file = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(io("open", &path))?;
                file.set_len(segment.valid_len as u64)
                    .map_err(io("truncate", &path))?;
            }
            if segment.records == 0 {
                fs::remove_file(&path).map_err(io("remove", &path))?;
                continue;
            }
            let sealed_path = dir.join(seg_name(seq, "seg"));
            if open {
                fs::rename(&path, &sealed_path).map_err(io("seal", &path))?;
            }
            let bytes = fs::metadata(&sealed_path)
                .map_err(io("stat", &sealed_path))?
                .len();
            recovered.batches += 1;
            recovered.records += u64::from(segment.records);
            let mut index = self.index();
            index.sealed.insert(
                seq,
                Sealed {
                    seq,
                    bytes,
                    records: segment.records,
                },
            );
            index.sealed_bytes += bytes;
        }
        add(&self.inner.stats.corrupt_files, recovered.corrupt_files);
        if recovered.batches > 0 {
            info!(output = %self.inner.name, batches = recovered.batches, records = recovered.records, "Spool holds records of an earlier run; they are sent first.");
            self.inner.notify.notify_one();
        }
        Ok(recovered)
    }

    /// A damaged file's good records, as a clean segment in its place.
    fn rewrite(&self, path: &Path, segment: &Segment) -> Result<(), SpoolError> {
        let mut bytes = segment::header(segment.encoding).to_vec();
        for line in segment.body.split_inclusive(|b| *b == b'\n') {
            segment::push_frame(line, &mut bytes);
        }
        let tmp = path.with_extension("rewrite");
        let _ = fs::remove_file(&tmp);
        let mut file = create_private_file(&tmp)?;
        file.write_all(&bytes).map_err(io("write", &tmp))?;
        file.sync_all().map_err(io("fsync", &tmp))?;
        fs::rename(&tmp, path).map_err(io("rename", &tmp))
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

    /// Reads a sealed batch. `None`: it is gone (dropped to respect the bound
    /// while it was being sent). Damaged records are counted and the file is
    /// copied to quarantine; the good ones are returned.
    pub fn read(&self, sealed: Sealed) -> Result<Option<Segment>, SpoolError> {
        let path = self.path_of(sealed.seq);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.index().remove(sealed.seq);
                return Ok(None);
            }
            Err(e) => return Err(io("read", &path)(e)),
        };
        match segment::decode(&bytes) {
            Ok(segment) => {
                if segment.corrupt_records > 0 || segment.torn_tail_bytes > 0 {
                    warn!(file = %path.display(), corrupt_records = segment.corrupt_records, "Spool file damaged on disk; its good records are sent, a copy is quarantined.");
                    add(&self.inner.stats.corrupt_files, 1);
                    add(
                        &self.inner.stats.corrupt_records,
                        u64::from(segment.corrupt_records),
                    );
                    self.quarantine_copy(&path)?;
                }
                Ok(Some(segment))
            }
            Err(e) => {
                warn!(file = %path.display(), error = %e, "Spool file is damaged; quarantined.");
                add(&self.inner.stats.corrupt_files, 1);
                self.quarantine(&path)?;
                self.index().remove(sealed.seq);
                Ok(None)
            }
        }
    }

    /// Upstream took the batch: it leaves the spool.
    pub fn delivered(&self, sealed: Sealed) {
        add(&self.inner.stats.sent_batches, 1);
        add(&self.inner.stats.sent_records, u64::from(sealed.records));
        self.forget(sealed.seq);
    }

    /// The batch has no good record left (all damaged): it leaves the spool.
    pub fn forget(&self, seq: u64) {
        self.index().remove(seq);
        let path = self.path_of(seq);
        if let Err(e) = fs::remove_file(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                warn!(file = %path.display(), error = %e, "Cannot remove a sent batch; it will be sent again after a restart.");
            }
        }
    }

    /// Stops sending a batch this run; its file stays (sent after a restart).
    pub fn forget_in_index(&self, seq: u64) {
        self.index().remove(seq);
    }

    /// Upstream refused the batch for good: it moves to `dead-letter/` with a
    /// `<seq>.json` holding why (status, response body), counted and logged.
    pub fn dead_letter(&self, sealed: Sealed, why: &serde_json::Value) -> Result<(), SpoolError> {
        let dead = self.inner.dir.join("dead-letter");
        let from = self.path_of(sealed.seq);
        let to = unique_path(&dead, &seg_name(sealed.seq, "seg"));
        fs::rename(&from, &to).map_err(io("move to dead-letter", &from))?;
        let note = to.with_extension("json");
        let mut file = create_private_file(&note)?;
        let text = serde_json::to_vec_pretty(why).unwrap_or_default();
        file.write_all(&text).map_err(io("write", &note))?;
        self.index().remove(sealed.seq);
        add(&self.inner.stats.dead_batches, 1);
        add(&self.inner.stats.dead_records, u64::from(sealed.records));
        Ok(())
    }

    fn quarantine(&self, path: &Path) -> Result<(), SpoolError> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let to = unique_path(&self.inner.dir.join("quarantine"), name);
        fs::rename(path, &to).map_err(io("quarantine", path))
    }

    fn quarantine_copy(&self, path: &Path) -> Result<(), SpoolError> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let to = unique_path(&self.inner.dir.join("quarantine"), name);
        fs::copy(path, &to).map_err(io("copy to quarantine", path))?;
        Ok(())
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

struct OpenBatch {
    seq: u64,
    path: PathBuf,
    file: File,
    records: u32,
    bytes: usize,
    opened_at: SystemTime,
}

/// Appends records to the open batch and seals batches by count, size and age.
pub struct SpoolWriter {
    spool: Spool,
    batch: BatchConfig,
    open: Option<OpenBatch>,
    /// Frames not yet written to the open batch's file.
    unwritten: Vec<u8>,
}

impl SpoolWriter {
    pub fn new(spool: Spool, batch: BatchConfig) -> Self {
        Self {
            spool,
            batch,
            open: None,
            unwritten: Vec::new(),
        }
    }

    pub fn spool(&self) -> &Spool {
        &self.spool
    }

    /// Queues one encoded record; seals the open batch first if the record would
    /// take it past `max_records` or `max_bytes`.
    pub fn append(&mut self, payload: &[u8]) -> Result<(), SpoolError> {
        let framed = segment::framed_len(payload.len());
        if let Some(open) = &self.open {
            let full = open.records as usize + 1 > self.batch.max_records
                || open.bytes + framed > self.batch.max_bytes;
            if full && open.records > 0 {
                self.seal()?;
            }
        }
        if self.open.is_none() {
            self.open = Some(self.start()?);
        }
        if let Some(open) = &mut self.open {
            segment::push_frame(payload, &mut self.unwritten);
            open.records += 1;
            open.bytes += framed;
        }
        add(&self.spool.inner.stats.records_spooled, 1);
        Ok(())
    }

    fn start(&mut self) -> Result<OpenBatch, SpoolError> {
        let seq = self.spool.index().next_seq();
        let path = self.spool.inner.dir.join(seg_name(seq, "open"));
        let mut file = create_private_file(&path)?;
        let header = segment::header(self.spool.inner.encoding);
        file.write_all(&header).map_err(io("write", &path))?;
        Ok(OpenBatch {
            seq,
            path,
            file,
            records: 0,
            bytes: header.len(),
            opened_at: SystemTime::now(),
        })
    }

    /// Writes the queued records to the open batch's file (one `write`): from
    /// here a SIGKILL loses none of them.
    pub fn flush(&mut self) -> Result<(), SpoolError> {
        let Some(open) = &mut self.open else {
            return Ok(());
        };
        if !self.unwritten.is_empty() {
            open.file
                .write_all(&self.unwritten)
                .map_err(io("write", &open.path))?;
            self.unwritten.clear();
        }
        let mut index = self.spool.index();
        index.open_bytes = open.bytes as u64;
        index.open_seq = Some(open.seq);
        Ok(())
    }

    /// When the open batch reaches its `max_age`.
    pub fn seal_at(&self) -> Option<SystemTime> {
        self.open.as_ref().map(|o| o.opened_at + self.batch.max_age)
    }

    pub fn seal_if_due(&mut self, now: SystemTime) -> Result<(), SpoolError> {
        match self.seal_at() {
            Some(at) if at <= now => self.seal(),
            _ => Ok(()),
        }
    }

    /// Ends the open batch: written, fsynced (with `spool.fsync`), renamed to
    /// `.seg`, and handed to the sender. Oldest batches are dropped, and counted,
    /// to keep the spool within `spool.max_bytes`.
    pub fn seal(&mut self) -> Result<(), SpoolError> {
        let result = self.flush();
        let Some(open) = self.open.take() else {
            return result;
        };
        if let Err(e) = result {
            self.abandon(open);
            return Err(e);
        }
        let inner = &self.spool.inner;
        let sealed_path = inner.dir.join(seg_name(open.seq, "seg"));
        let done = (|| {
            if inner.fsync {
                open.file.sync_all().map_err(io("fsync", &open.path))?;
            }
            fs::rename(&open.path, &sealed_path).map_err(io("seal", &open.path))?;
            if inner.fsync {
                sync_dir(&inner.dir)?;
            }
            Ok(())
        })();
        if let Err(e) = done {
            self.abandon(open);
            return Err(e);
        }
        let mut dropped = Vec::new();
        {
            let mut index = self.spool.index();
            index.open_bytes = 0;
            index.open_seq = None;
            index.sealed.insert(
                open.seq,
                Sealed {
                    seq: open.seq,
                    bytes: open.bytes as u64,
                    records: open.records,
                },
            );
            index.sealed_bytes += open.bytes as u64;
            // Room for the next open batch stays free.
            let room = inner.max_bytes.saturating_sub(self.batch.max_bytes as u64);
            while index.sealed_bytes > room && index.sealed.len() > 1 {
                let Some(oldest) = index.sealed.keys().next().copied() else {
                    break;
                };
                if let Some(sealed) = index.remove(oldest) {
                    dropped.push(sealed);
                }
            }
        }
        add(&inner.stats.batches_sealed, 1);
        for sealed in &dropped {
            let _ = fs::remove_file(self.spool.path_of(sealed.seq));
            add(&inner.stats.dropped_batches, 1);
            add(&inner.stats.dropped_records, u64::from(sealed.records));
        }
        if !dropped.is_empty() {
            let records: u32 = dropped.iter().map(|s| s.records).sum();
            warn!(
                output = %inner.name,
                dropped_batches = dropped.len(),
                dropped_records = records,
                dropped_total = inner.stats.dropped_records.load(Ordering::Relaxed),
                max_bytes = inner.max_bytes,
                "Spool full: oldest batches dropped."
            );
        }
        inner.notify.notify_one();
        Ok(())
    }

    /// The open batch could not be written: its file goes, its records are
    /// counted as lost.
    fn abandon(&mut self, open: OpenBatch) {
        self.unwritten.clear();
        let inner = &self.spool.inner;
        add(&inner.stats.write_errors, 1);
        add(&inner.stats.dropped_records, u64::from(open.records));
        let mut index = self.spool.index();
        index.open_bytes = 0;
        index.open_seq = None;
        drop(index);
        let _ = fs::remove_file(&open.path);
    }

    /// On a write error the batch is lost (counted); the next record starts a new one.
    pub fn on_error(&mut self) {
        if let Some(open) = self.open.take() {
            self.abandon(open);
        }
    }
}

#[cfg(test)]
#[path = "spool_tests.rs"]
mod tests;
