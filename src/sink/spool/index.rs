//! The spool's index of sealed batches (shared by the writer and the sender under
//! one mutex, held for bookkeeping only, never across IO), its bound (the oldest
//! batches dropped to stay within `spool.max_bytes`), and what leaves it: read,
//! delivered, forgotten, or moved to `dead-letter/`.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::warn;

use super::{Sealed, Spool, SpoolError, add, create_private_file, io, seg_name, unique_path};
use crate::sink::segment::{self, Segment};

#[derive(Debug, Default)]
pub(super) struct Index {
    pub(super) sealed: BTreeMap<u64, Sealed>,
    pub(super) sealed_bytes: u64,
    pub(super) open_bytes: u64,
    /// The open batch (its records are not sent yet either).
    pub(super) open_seq: Option<u64>,
    pub(super) last_seq: u64,
    /// The batch the sender is delivering: the bound never drops it (it would
    /// be counted dropped and then sent).
    pub(super) in_flight: Option<u64>,
}

impl Index {
    pub(super) fn next_seq(&mut self) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        self.last_seq = now.max(self.last_seq + 1);
        self.last_seq
    }

    pub(super) fn remove(&mut self, seq: u64) -> Option<Sealed> {
        if self.in_flight == Some(seq) {
            self.in_flight = None;
        }
        let sealed = self.sealed.remove(&seq)?;
        self.sealed_bytes -= sealed.bytes;
        Some(sealed)
    }

    /// Drops the oldest sealed batches until at most `room` bytes are sealed,
    /// always keeping the newest: what was dropped.
    pub(super) fn drop_oldest_above(&mut self, room: u64) -> Vec<Sealed> {
        let mut dropped = Vec::new();
        while self.sealed_bytes > room && self.sealed.len() > 1 {
            let in_flight = self.in_flight;
            let Some(oldest) = self.sealed.keys().copied().find(|s| Some(*s) != in_flight) else {
                break;
            };
            if let Some(sealed) = self.remove(oldest) {
                dropped.push(sealed);
            }
        }
        dropped
    }
}

impl Spool {
    /// Reads a sealed batch. `None`: it is gone (dropped to respect the bound
    /// while it was being sent). Damaged records are counted and the file is
    /// copied to quarantine; the good ones are returned.
    pub fn read(&self, sealed: Sealed) -> Result<Option<Segment>, SpoolError> {
        let path = self.path_of(sealed.seq);
        self.index().in_flight = Some(sealed.seq);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.index().remove(sealed.seq);
                return Ok(None);
            }
            Err(e) => return Err(io("read", &path)(e)),
        };
        let segment = segment::decode(&bytes, self.inner.encoding);
        if segment.damaged() || segment.torn_tail_bytes > 0 {
            warn!(file = %path.display(), corrupt_records = segment.corrupt_records, header_damaged = segment.header_damaged, good_records = segment.records, "Spool file damaged on disk; its good records are sent, a copy is quarantined.");
            add(&self.inner.stats.corrupt_files, 1);
            add(
                &self.inner.stats.corrupt_records,
                u64::from(segment.corrupt_records),
            );
            self.quarantine_copy(&path)?;
        }
        Ok(Some(segment))
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
}
