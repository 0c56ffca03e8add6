//! What an earlier run left in a spool, recovered at open: the unfinished batch
//! sealed (a torn last record cut off), damaged files quarantined as found with
//! their good records kept.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use tracing::{info, warn};

use super::{
    Recovered, Sealed, Spool, SpoolError, add, create_private_file, io, seg_name, seq_of,
    unique_path,
};
use crate::sink::segment::{self, Segment};

impl Spool {
    pub(super) fn recover(&self) -> Result<Recovered, SpoolError> {
        let dir = &self.inner.dir;
        let mut found = Vec::new();
        let mut recovered = Recovered::default();
        for entry in fs::read_dir(dir).map_err(io("list", dir))? {
            let entry = entry.map_err(io("list", dir))?;
            let path = entry.path();
            let named_like_a_batch = seq_of(&path, "seg").or(seq_of(&path, "open")).is_some();
            // A directory or a link named like a batch is not one: set aside, never
            // a reason to stop.
            if named_like_a_batch && !entry.file_type().is_ok_and(|t| t.is_file()) {
                warn!(entry = %path.display(), "Something not a file is named like a spool batch; moved to quarantine.");
                if let Err(e) = self.quarantine(&path) {
                    warn!(error = %e, "Cannot quarantine it; it is left where it is and ignored.");
                }
                recovered.foreign_entries += 1;
                continue;
            }
            if let Some(seq) = seq_of(&path, "seg") {
                found.push((seq, path, false));
            } else if let Some(seq) = seq_of(&path, "open") {
                found.push((seq, path, true));
            }
        }
        found.sort();
        for (seq, path, open) in found {
            {
                let mut index = self.index();
                index.last_seq = index.last_seq.max(seq);
            }
            let bytes = fs::read(&path).map_err(io("read", &path))?;
            let segment = segment::decode(&bytes, self.inner.encoding);
            recovered.torn_bytes += segment.torn_tail_bytes as u64;
            if segment.damaged() || (segment.torn_tail_bytes > 0 && !open) {
                warn!(file = %path.display(), corrupt_records = segment.corrupt_records, header_damaged = segment.header_damaged, good_records = segment.records, "Spool file is damaged; its good records are kept, a copy is quarantined.");
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

    pub(super) fn quarantine(&self, path: &Path) -> Result<(), SpoolError> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let to = unique_path(&self.inner.dir.join("quarantine"), name);
        fs::rename(path, &to).map_err(io("quarantine", path))
    }

    pub(super) fn quarantine_copy(&self, path: &Path) -> Result<(), SpoolError> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let to = unique_path(&self.inner.dir.join("quarantine"), name);
        fs::copy(path, &to).map_err(io("copy to quarantine", path))?;
        Ok(())
    }
}
