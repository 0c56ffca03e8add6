//! The open batch and sealing: records appended per event (one `write`, so a
//! SIGKILL loses none), batches sealed by count, size and age with fsync and a
//! rename, and handed to the sender.

use std::fs::{self, File};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use tracing::warn;

use super::{Sealed, Spool, SpoolError, add, create_private_file, io, seg_name, sync_dir};
use crate::config::defaults::{
    DEFAULT_BATCH_MAX_AGE, DEFAULT_BATCH_MAX_BYTES, DEFAULT_BATCH_MAX_RECORDS,
};
use crate::sink::segment;

/// When a batch is sealed: whichever bound it reaches first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchConfig {
    pub max_records: usize,
    pub max_bytes: usize,
    pub max_age: Duration,
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            max_records: DEFAULT_BATCH_MAX_RECORDS,
            max_bytes: DEFAULT_BATCH_MAX_BYTES,
            max_age: DEFAULT_BATCH_MAX_AGE,
        }
    }
}

struct OpenBatch {
    seq: u64,
    path: PathBuf,
    file: File,
    records: u32,
    bytes: usize,
    opened_at: Instant,
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
            opened_at: Instant::now(),
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
    pub fn seal_at(&self) -> Option<Instant> {
        self.open.as_ref().map(|o| o.opened_at + self.batch.max_age)
    }

    pub fn seal_if_due(&mut self, now: Instant) -> Result<(), SpoolError> {
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
        let dropped;
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
            dropped = index.drop_oldest_above(room);
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
