//! The stages' memory on disk, so a restart (an upgrade, a reboot) does not
//! lose the jobs in flight: written every `state.checkpoint_interval` and at
//! every stop, read back at start. The restart itself becomes a bus gap from
//! when the checkpoint was written to when the bus is read again.
//!
//! The periodic checkpoint is a copy of the stages' memory taken between
//! events ([`StagesSnapshot`]: the per-minion memories copy on write,
//! `crate::cow`, so the copy costs the pipeline a few pointers per part, not
//! the fleet), encoded into its temporary file, fsynced and renamed on a
//! thread of its own; one still being written when the next is due makes
//! that one wait for the next interval (counted). The checkpoint at a stop is
//! written whole before saltsight exits.
//!
//! One file, `<state.dir>/checkpoint`: a fixed header (magic, format, length,
//! CRC-32 of the body), then the body in MessagePack (maps with field names, so
//! a field added later reads as its default). Written to a temporary file,
//! fsynced and renamed over the old one: a crash mid-write leaves the last
//! checkpoint whole. Read back, anything wrong (short, damaged, another format,
//! another master's) is set aside beside it (`checkpoint.<why>-<unix µs>`,
//! the last [`KEEP_SET_ASIDE`] kept) with a warning, and saltsight starts
//! empty: never trusted blindly, never lost.

use std::fs::{self, File};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::stages::{SavedStages, SavingStages, StagesSnapshot};
use crate::time::Stamp;

/// The body's layout written. Bumped when a saved form changes so that an
/// older saltsight could not read it (a field added with a default does not):
/// 2 holds a job's minions in their compact form (`jobs::tracker::minions`),
/// where 1 held a map of names to states.
pub const FORMAT: u32 = 2;
/// The layouts read back: every one since the first (a job's minions read in
/// either form), so an upgrade keeps the jobs in flight.
pub const READS: std::ops::RangeInclusive<u32> = 1..=FORMAT;
const MAGIC: &[u8; 8] = b"SSIGHTCK";
/// magic, format (u32), body length (u64), CRC-32 of the body (u32).
const HEADER_LEN: usize = 8 + 4 + 8 + 4;
/// Set-aside checkpoints kept (the oldest are removed).
pub const KEEP_SET_ASIDE: usize = 3;
const FILE_NAME: &str = "checkpoint";

crate::counts! {
    /// The checkpoint's own counts, read at scrape.
    pub struct CheckpointStats {
        counter writes = "saltsight_checkpoint_writes",
            "Checkpoints written (periodic and at stop)";
        counter write_errors = "saltsight_checkpoint_write_errors",
            "Checkpoints that could not be written (the log says why; the last good one stays)";
        counter set_aside = "saltsight_checkpoint_set_aside",
            "Checkpoints found at start but not restored (damaged, another format or master): set aside beside it";
        gauge bytes = "saltsight_checkpoint_bytes",
            "Size of the last checkpoint written";
        seconds write_micros = "saltsight_checkpoint_write_duration_seconds",
            "How long the last checkpoint took to encode and write; kept in microseconds";
        seconds pause_micros = "saltsight_checkpoint_pause_duration_seconds",
            "How long the pipeline waited for the last periodic checkpoint: its copy of the stages' memory (the encoding and the fsyncs are a thread's); kept in microseconds";
        counter skipped = "saltsight_checkpoint_skipped",
            "Periodic checkpoints not taken because the one before was still being written";
    }
}

/// What the checkpoint says of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// saltsight's version that wrote it (for the log; any version of the same
    /// [`FORMAT`] reads it).
    pub version: String,
    pub master_id: String,
    pub written_at: Stamp,
    /// Events were read up to here: the restart gap begins here.
    pub bus_until: Stamp,
}

#[derive(Serialize)]
struct Writing<'a> {
    header: &'a Header,
    stages: SavingStages<'a>,
}

#[derive(Deserialize)]
struct Reading {
    header: Header,
    stages: SavedStages,
}

/// A checkpoint read back.
pub struct Restored {
    pub header: Header,
    pub stages: SavedStages,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot encode the checkpoint: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
}

/// Why a checkpoint found at start was not restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unusable {
    Damaged(String),
    Format(u32),
    OtherMaster(String),
}

impl Unusable {
    fn tag(&self) -> &'static str {
        match self {
            Unusable::Damaged(_) => "damaged",
            Unusable::Format(_) => "format",
            Unusable::OtherMaster(_) => "other-master",
        }
    }
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Damaged(why) => write!(f, "damaged: {why}"),
            Unusable::Format(n) => write!(
                f,
                "written in checkpoint format {n}; this saltsight reads formats {} to {}",
                READS.start(),
                READS.end()
            ),
            Unusable::OtherMaster(id) => write!(f, "written for master_id {id:?}"),
        }
    }
}

/// Writes and reads `<dir>/checkpoint`.
pub struct Checkpointer {
    dir: PathBuf,
    master_id: String,
    pub interval: Duration,
    pub stats: std::sync::Arc<CheckpointStats>,
    /// The thread that writes periodic checkpoints, once one was taken.
    behind: Option<Behind>,
}

/// The stages' memory to be written, and since when the bus was read.
struct Taken {
    stages: StagesSnapshot,
    bus_until: Stamp,
    started: std::time::Instant,
}

struct Behind {
    queue: std::sync::mpsc::Sender<Taken>,
    thread: std::thread::JoinHandle<()>,
    /// A checkpoint is being synced.
    busy: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Checkpointer {
    pub fn new(dir: &Path, master_id: &str, interval: Duration) -> Self {
        Self {
            dir: dir.to_path_buf(),
            master_id: master_id.to_owned(),
            interval,
            stats: std::sync::Arc::default(),
            behind: None,
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// Writes the stages' memory, events read up to `bus_until`, and waits
    /// for it (at a stop; a periodic one being written is waited for first);
    /// counted, and on failure logged with the last good checkpoint left in
    /// place.
    pub fn write(&mut self, stages: StagesSnapshot, bus_until: Stamp) {
        self.wait_behind();
        let started = std::time::Instant::now();
        let store = Store::of(self);
        store.counted(store.store(&stages, bus_until), started);
    }

    /// Takes the stages' memory (`take`: a copy, between events) and hands
    /// it to the checkpoint's thread to encode, fsync and rename: the
    /// pipeline waits for the copy only. While the one before is still being
    /// written this one is not taken (counted): the next interval's will be.
    pub fn write_behind(&mut self, take: impl FnOnce() -> StagesSnapshot, bus_until: Stamp) {
        if self
            .behind
            .as_ref()
            .is_some_and(|b| b.busy.load(std::sync::atomic::Ordering::Acquire))
        {
            self.stats.skipped.inc();
            return;
        }
        let started = std::time::Instant::now();
        let taken = Taken {
            stages: take(),
            bus_until,
            started,
        };
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.stats.pause_micros.set(micros);
        let store = Store::of(self);
        if self.behind.is_none() {
            match self.start_behind() {
                Ok(behind) => self.behind = Some(behind),
                Err(error) => {
                    warn!(%error, "Cannot start the checkpoint's writer; writing it here.");
                    store.counted(store.store(&taken.stages, bus_until), started);
                    return;
                }
            }
        }
        let Some(behind) = &self.behind else { return };
        behind
            .busy
            .store(true, std::sync::atomic::Ordering::Release);
        if let Err(std::sync::mpsc::SendError(taken)) = behind.queue.send(taken) {
            // The thread is gone (it panicked): written here, and the next
            // one starts anew.
            self.behind = None;
            store.counted(store.store(&taken.stages, taken.bus_until), taken.started);
        }
    }

    fn start_behind(&self) -> std::io::Result<Behind> {
        let (queue, taken) = std::sync::mpsc::channel::<Taken>();
        let store = Store::of(self);
        let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("checkpoint".into())
            .spawn({
                let busy = busy.clone();
                move || {
                    for Taken {
                        stages,
                        bus_until,
                        started,
                    } in taken
                    {
                        store.counted(store.store(&stages, bus_until), started);
                        // The copy's parts are let go before the next is
                        // taken: the pipeline's writes stop copying them.
                        drop(stages);
                        busy.store(false, std::sync::atomic::Ordering::Release);
                    }
                }
            })?;
        Ok(Behind {
            queue,
            thread,
            busy,
        })
    }

    /// Waits for the periodic checkpoint being synced, if any.
    fn wait_behind(&mut self) {
        if let Some(Behind { queue, thread, .. }) = self.behind.take() {
            drop(queue);
            let _ = thread.join();
        }
    }

    /// The checkpoint, when there is one that can be trusted. One that cannot
    /// is set aside (and counted); a missing one is a first start.
    pub fn read(&self) -> Option<Restored> {
        let path = self.path();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(error) => {
                warn!(path = %path.display(), %error, "Cannot read the checkpoint; starting without it.");
                return None;
            }
        };
        match self.decode(&bytes) {
            Ok(restored) => {
                info!(
                    path = %path.display(),
                    written_by = %restored.header.version,
                    written_at = %restored.header.written_at,
                    open_jobs = restored.stages.open_jobs(),
                    "Restored the checkpoint."
                );
                Some(restored)
            }
            Err(why) => {
                self.stats.set_aside.inc();
                let aside = self.set_aside(&why);
                warn!(
                    path = %path.display(),
                    set_aside = %aside.as_ref().map_or_else(|e| format!("not moved: {e}"), |p| p.display().to_string()),
                    problem = %why,
                    "Not restoring the checkpoint: starting without it."
                );
                None
            }
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<Restored, Unusable> {
        let damaged = |why: &str| Unusable::Damaged(why.to_owned());
        let head = bytes
            .get(..HEADER_LEN)
            .ok_or_else(|| damaged("shorter than its header"))?;
        if &head[..8] != MAGIC {
            return Err(damaged("not a saltsight checkpoint (bad magic)"));
        }
        let u32_at = |at: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&head[at..at + 4]);
            u32::from_le_bytes(b)
        };
        let format = u32_at(8);
        if !READS.contains(&format) {
            return Err(Unusable::Format(format));
        }
        let mut len = [0u8; 8];
        len.copy_from_slice(&head[12..20]);
        let len = u64::from_le_bytes(len);
        let body = &bytes[HEADER_LEN..];
        if body.len() as u64 != len {
            return Err(damaged(&format!(
                "its body is {} bytes, its header says {len}",
                body.len()
            )));
        }
        if crc32fast::hash(body) != u32_at(20) {
            return Err(damaged("its checksum does not match"));
        }
        let reading: Reading =
            rmp_serde::from_slice(body).map_err(|e| damaged(&format!("cannot decode it: {e}")))?;
        if reading.header.master_id != self.master_id {
            return Err(Unusable::OtherMaster(reading.header.master_id));
        }
        Ok(Restored {
            header: reading.header,
            stages: reading.stages,
        })
    }

    /// Moves the checkpoint aside, keeping the last [`KEEP_SET_ASIDE`].
    fn set_aside(&self, why: &Unusable) -> std::io::Result<PathBuf> {
        let micros = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        let prefix = format!("{FILE_NAME}.");
        let aside = self.dir.join(format!("{prefix}{}-{micros}", why.tag()));
        fs::rename(self.path(), &aside)?;
        let mut old: Vec<(SystemTime, PathBuf)> = fs::read_dir(&self.dir)?
            .filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with(&prefix) && name != format!("{FILE_NAME}.tmp")
            })
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        old.sort();
        let excess = old.len().saturating_sub(KEEP_SET_ASIDE);
        for (_, path) in old.into_iter().take(excess) {
            let _ = fs::remove_file(path);
        }
        Ok(aside)
    }
}

/// A writer that counts and checksums what passes through it: the body is
/// streamed to the file, never held whole in memory.
struct Summing<W> {
    inner: W,
    len: u64,
    crc: crc32fast::Hasher,
}

impl<W: Write> Write for Summing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.len += n as u64;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Where a checkpoint's bytes go, and its counts: what the writing thread
/// needs of the [`Checkpointer`].
#[derive(Clone)]
struct Store {
    dir: PathBuf,
    master_id: String,
    stats: std::sync::Arc<CheckpointStats>,
}

impl Store {
    fn of(checkpointer: &Checkpointer) -> Self {
        Self {
            dir: checkpointer.dir.clone(),
            master_id: checkpointer.master_id.clone(),
            stats: checkpointer.stats.clone(),
        }
    }

    /// The stages' memory encoded, synced and renamed over the last
    /// checkpoint: its size.
    fn store(&self, stages: &StagesSnapshot, bus_until: Stamp) -> Result<u64, CheckpointError> {
        let (file, bytes) = self.encode(stages.saving(), bus_until)?;
        self.sync(file, bytes)
    }

    /// The stages' memory streamed into the temporary file: the header
    /// (magic, format, length, CRC) once the body is out. The file, not yet
    /// synced, and its size.
    fn encode(
        &self,
        stages: SavingStages<'_>,
        bus_until: Stamp,
    ) -> Result<(File, u64), CheckpointError> {
        let store = self;
        fs::create_dir_all(&self.dir).map_err(store.io(&self.dir))?;
        let header = Header {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            master_id: self.master_id.clone(),
            written_at: Stamp::now(),
            bus_until,
        };
        let temp = store.temp();
        let mut file = File::create(&temp).map_err(store.io(&temp))?;
        // The header's place first; its length and checksum once the body is out.
        file.write_all(&[0; HEADER_LEN]).map_err(store.io(&temp))?;
        let mut body = Summing {
            inner: BufWriter::new(file),
            len: 0,
            crc: crc32fast::Hasher::new(),
        };
        let writing = Writing {
            header: &header,
            stages,
        };
        writing.serialize(&mut rmp_serde::Serializer::new(&mut body).with_struct_map())?;
        let (len, crc) = (body.len, body.crc.finalize());
        let mut file = body
            .inner
            .into_inner()
            .map_err(|e| store.io(&temp)(e.into_error()))?;
        let mut head = Vec::with_capacity(HEADER_LEN);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&FORMAT.to_le_bytes());
        head.extend_from_slice(&len.to_le_bytes());
        head.extend_from_slice(&crc.to_le_bytes());
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(&head))
            .map_err(store.io(&temp))?;
        Ok((file, HEADER_LEN as u64 + len))
    }

    fn io(&self, path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError {
        let path = path.to_path_buf();
        move |source| CheckpointError::Io { path, source }
    }

    fn temp(&self) -> PathBuf {
        self.dir.join(format!("{FILE_NAME}.tmp"))
    }

    /// The temporary file fsynced and renamed over the last checkpoint, the
    /// directory fsynced: a crash leaves one of them whole.
    fn sync(&self, file: File, bytes: u64) -> Result<u64, CheckpointError> {
        let temp = self.temp();
        file.sync_all().map_err(self.io(&temp))?;
        drop(file);
        let path = self.dir.join(FILE_NAME);
        fs::rename(&temp, &path).map_err(self.io(&path))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(self.io(&self.dir))?;
        Ok(bytes)
    }

    fn counted(&self, stored: Result<u64, CheckpointError>, started: std::time::Instant) {
        match stored {
            Ok(bytes) => {
                self.stats.writes.inc();
                self.stats.bytes.set(bytes);
                let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                self.stats.write_micros.set(micros);
            }
            Err(error) => {
                self.stats.write_errors.inc();
                warn!(%error, "Cannot write the checkpoint; the last one stays.");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::event::{decode, encode_frame};
    use crate::pipeline::Stages;
    use crate::record::{Record, RecordBody, RunKind};
    use serde_json::json;

    fn config() -> Config {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("saltsight.toml");
        std::fs::write(
            &path,
            "[bus]\nendpoint = \"unix:/unused\"\n[correlate]\ndiscover = false\n[jobs]\ndeadlines = { \"test.*\" = \"30s\" }\n",
        )
        .expect("write config");
        crate::config::load(&crate::config::Overrides {
            config: Some(path),
            ..Default::default()
        })
        .expect("config loads")
    }

    const JID: &str = "20261124100000000000";

    fn feed(stages: &mut Stages, tag: &str, mut data: serde_json::Value, secs: u32) -> Vec<Record> {
        data["_stamp"] = json!(format!("2026-11-24T10:00:{secs:02}.000000+00:00"));
        let frame = encode_frame(
            tag,
            &rmp_serde::to_vec_named(&data).expect("msgpack"),
            false,
        );
        let event = decode(&frame).expect("decode");
        let now = event.stamp.expect("stamped");
        let mut records = Vec::new();
        stages.on_event(&event, now, &mut records);
        records
    }

    fn publish(stages: &mut Stages) {
        feed(
            stages,
            &format!("salt/job/{JID}/new"),
            json!({"jid": JID, "fun": "test.sleep", "arg": [20], "tgt": "*", "tgt_type": "glob",
                "minions": ["a", "b", "c"], "missing": [], "user": "root"}),
            0,
        );
    }

    fn ret(stages: &mut Stages, minion: &str, secs: u32) -> Vec<Record> {
        feed(
            stages,
            &format!("salt/job/{JID}/ret/{minion}"),
            json!({"jid": JID, "id": minion, "fun": "test.sleep", "return": true,
                "retcode": 0, "success": true}),
            secs,
        )
    }

    /// A job published before a restart completes after it, with its run kind,
    /// its returns before and after, and the minion that never answered judged
    /// as after a gap.
    #[test]
    fn a_job_in_flight_survives_a_checkpoint() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config();
        let mut before = Stages::from_config(&config);
        publish(&mut before);
        ret(&mut before, "a", 2);
        let mut checkpointer = Checkpointer::new(dir.path(), &config.master_id, Duration::ZERO);
        let bus_until = Stamp::parse("2026-11-24T10:00:03Z").expect("stamp");
        // Taken between events: what comes after it is not in it.
        let snapshot = before.snapshot();
        ret(&mut before, "b", 3);
        checkpointer.write(snapshot, bus_until);
        assert_eq!(checkpointer.stats.writes.get(), 1);
        assert!(checkpointer.stats.bytes.get() > HEADER_LEN as u64);

        let restored = checkpointer.read().expect("restored");
        assert_eq!(restored.header.bus_until, bus_until);
        assert_eq!(restored.stages.open_jobs(), 1);
        let mut after = Stages::from_config(&config);
        after.restore(restored.stages, bus_until);
        after.gap_started();
        let gap_end = Stamp::parse("2026-11-24T10:00:05Z").expect("stamp");
        after.on_gap(bus_until, gap_end, "restart", 0);
        ret(&mut after, "b", 6);
        let records = after.advance(Stamp::parse("2026-11-24T10:00:31Z").expect("stamp"));
        let completed = records
            .iter()
            .find_map(|r| match &r.body {
                RecordBody::JobCompleted(c) => Some(c.clone()),
                _ => None,
            })
            .expect("job_completed");
        assert_eq!(
            (
                completed.returned,
                completed.context.run_kind,
                completed.fun.as_str()
            ),
            (2, RunKind::Adhoc, "test.sleep")
        );
        assert_eq!(
            completed
                .missing
                .get(&crate::record::MissingReason::UnknownGap),
            Some(&1),
            "c: its return may have come while saltsight was down"
        );
    }

    fn written(dir: &Path, master: &str) -> Checkpointer {
        let mut checkpointer = Checkpointer::new(dir, master, Duration::ZERO);
        let mut stages = Stages::from_config(&config());
        publish(&mut stages);
        checkpointer.write(stages.snapshot(), Stamp(0));
        checkpointer
    }

    fn set_aside_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("read dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("checkpoint."))
            .collect();
        names.sort();
        names
    }

    /// Whatever is wrong with it, a checkpoint is set aside (named for why),
    /// counted, and saltsight starts empty; the last three set aside are kept.
    #[test]
    fn a_checkpoint_that_cannot_be_trusted_is_set_aside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let master = config().master_id;
        let path = dir.path().join("checkpoint");
        assert!(
            Checkpointer::new(dir.path(), &master, Duration::ZERO)
                .read()
                .is_none(),
            "none yet"
        );

        type Damage = fn(&mut Vec<u8>);
        let damages: [(&str, Damage); 4] = [
            ("damaged", |b| {
                let last = b.len() - 1;
                b[last] ^= 0xff;
            }),
            ("damaged", |b| b.truncate(b.len() / 2)),
            ("damaged", |b| b.truncate(10)),
            ("format", |b| b[8] = 99),
        ];
        for (i, (tag, damage)) in damages.into_iter().enumerate() {
            let checkpointer = written(dir.path(), &master);
            let mut bytes = fs::read(&path).expect("read");
            damage(&mut bytes);
            fs::write(&path, &bytes).expect("write");
            assert!(checkpointer.read().is_none(), "case {i}");
            assert_eq!(checkpointer.stats.set_aside.get(), 1, "case {i}");
            assert!(!path.exists(), "case {i}: moved");
            let names = set_aside_files(dir.path());
            assert!(names.iter().any(|n| n.contains(tag)), "case {i}: {names:?}");
            assert!(names.len() <= KEEP_SET_ASIDE, "case {i}: {names:?}");
        }
        written(dir.path(), "another-master");
        let checkpointer = Checkpointer::new(dir.path(), &master, Duration::ZERO);
        assert!(checkpointer.read().is_none());
        assert!(
            set_aside_files(dir.path())
                .iter()
                .any(|n| n.contains("other-master"))
        );
        // A good one reads back, and so does one of format 1 (an upgrade).
        assert!(written(dir.path(), &master).read().is_some());
        let checkpointer = written(dir.path(), &master);
        let mut bytes = fs::read(&path).expect("read");
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        fs::write(&path, &bytes).expect("write");
        assert!(checkpointer.read().is_some(), "format 1 is read");
    }
}
