//! The history output: what the agent sees into the store on the master
//! (`history`), in batches, from a thread of its own so that SQLite's writes
//! and fsyncs never hold the event loop. A minion's verdict (a return, a
//! missing minion) is a few appends to its job's list in the pending batch;
//! other records are kept whole. Batches go at `batch_max_age` or 2,048
//! records, through a queue of 16 batches. While the queue is full (the disk
//! slow or stalled) the pending batch grows, up to 262,144 records: a burst
//! as large as a 200,000-minion job whose minions all stay silent is held
//! whole. Past that bound records are dropped, counted, logged, and charged
//! to their job, whose answer then says it is incomplete and by how many;
//! never the pipeline. Every minute the thread removes what is past
//! `max_age` or over `max_bytes`, oldest first. At the end the last batch is
//! written and the thread joined; a SIGKILL loses at most what was pending.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use foldhash::{HashMap, HashMapExt};
use tokio::time::Instant;
use tracing::warn;

use super::SinkError;
use super::output::{Lost, Output, OutputError};
use crate::config::history::HistoryConfig;
use crate::history::write::{Batch, Writer};
use crate::record::Record;
use crate::time::Stamp;

/// Records in a batch sent to the writer.
const BATCH_RECORDS: usize = 2_048;
/// Records pending while the writer is behind, at most.
const MAX_PENDING: usize = 262_144;
/// Jobs whose lost records are remembered until written, at most.
const MAX_LOST_JOBS: usize = 4_096;
/// Batches waiting for the writer at most.
const QUEUE_BATCHES: usize = 16;
/// How often the writer prunes and measures the store.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

crate::counts! {
    /// The history's own counts, read at scrape.
    pub struct HistoryStats {
        counter written = "saltsight_history_records_written",
            "Records written into the history on the master";
        counter dropped = "saltsight_history_records_dropped",
            "Records the history could not take (its writer behind, or a write failed: the log says why)";
        counter pruned_age = "saltsight_history_records_pruned_age",
            "Records removed from the history for being older than history.max_age";
        counter pruned_size = "saltsight_history_records_pruned_size",
            "Records removed from the history, oldest first, to stay within history.max_bytes";
        gauge bytes = "saltsight_history_bytes",
            "Size of the history store";
        gauge rows = "saltsight_history_records",
            "Records in the history store";
        float oldest = "saltsight_history_oldest_timestamp_seconds",
            "The oldest record's time in the history (0 when empty): time() minus it is the history's age";
    }
}

enum Message {
    Batch(Batch),
}

/// What a record's age is counted from when the history removes what is past
/// `max_age`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgeFrom {
    /// The wall clock: an agent watching a master.
    Now,
    /// The newest record written: a replay runs on event time, so a
    /// recording older than `max_age` is kept, not removed as it is written.
    NewestRecord,
}

/// The output the agent writes to.
pub struct HistoryOutput {
    pending: Batch,
    /// Records lost by job, not yet written into their job's row.
    lost: HashMap<String, u64>,
    /// When the oldest pending record was queued.
    pending_since: Option<Instant>,
    batch_max_age: Duration,
    /// Records in a batch sent to the writer (`BATCH_RECORDS`).
    batch_records: usize,
    /// Records pending at most (`MAX_PENDING`).
    max_pending: usize,
    sender: Option<SyncSender<Message>>,
    writer: Option<JoinHandle<()>>,
    stats: Arc<HistoryStats>,
}

impl HistoryOutput {
    /// Opens the store (its schema made when new) and starts the writer.
    pub fn open(
        config: &HistoryConfig,
        age_from: AgeFrom,
    ) -> Result<(HistoryOutput, Arc<HistoryStats>), SinkError> {
        let store = Writer::open(&config.path).map_err(|e| SinkError::History(e.to_string()))?;
        let stats = Arc::new(HistoryStats::default());
        let (sender, receiver) = sync_channel(QUEUE_BATCHES);
        let writer = {
            let stats = stats.clone();
            let (max_age, max_bytes) = (config.max_age, config.max_bytes);
            std::thread::Builder::new()
                .name("saltsight-history".into())
                .spawn(move || write_loop(store, receiver, &stats, max_age, age_from, max_bytes))
                .map_err(|e| SinkError::History(format!("cannot start the history writer: {e}")))?
        };
        Ok((
            HistoryOutput {
                pending: Batch::default(),
                lost: HashMap::new(),
                pending_since: None,
                batch_max_age: config.batch_max_age,
                batch_records: BATCH_RECORDS,
                max_pending: MAX_PENDING,
                sender: Some(sender),
                writer: Some(writer),
                stats: stats.clone(),
            },
            stats,
        ))
    }

    /// The pending batch with the lost counts not yet written; `None` when
    /// there is nothing to hand over or nobody to take it.
    fn take_pending(&mut self) -> Option<Batch> {
        if self.sender.is_none() || (self.pending.is_empty() && self.lost.is_empty()) {
            return None;
        }
        let mut batch = std::mem::take(&mut self.pending);
        batch.lost = self.lost.drain().collect();
        Some(batch)
    }

    /// Hands the pending batch to the writer; while it is behind, the batch
    /// stays pending (and grows) until the bound.
    fn send(&mut self) {
        let (Some(batch), Some(sender)) = (self.take_pending(), &self.sender) else {
            return;
        };
        match sender.try_send(Message::Batch(batch)) {
            Ok(()) => self.pending_since = None,
            Err(TrySendError::Full(Message::Batch(mut batch)))
            | Err(TrySendError::Disconnected(Message::Batch(mut batch))) => {
                self.lost.extend(std::mem::take(&mut batch.lost));
                self.pending = batch;
            }
        }
    }

    /// At the end: hands what is pending to the writer, waiting for room.
    fn send_last(&mut self) {
        let (Some(batch), Some(sender)) = (self.take_pending(), &self.sender) else {
            return;
        };
        let records = batch.len() as u64;
        if sender.send(Message::Batch(batch)).is_err() {
            // The writer is gone (it panicked): nothing can take them.
            self.stats.dropped.add(records);
        }
    }

    /// Counts `record` lost (the pending batch full), against its job.
    fn lose(&mut self, record: &Record) -> OutputError {
        self.stats.dropped.add(1);
        let jid = record.keys().jid;
        if !jid.is_empty() {
            if let Some(n) = self.lost.get_mut(jid) {
                *n += 1;
            } else if self.lost.len() < MAX_LOST_JOBS {
                self.lost.insert(jid.to_owned(), 1);
            }
        }
        OutputError::Lost(Lost {
            records: 1,
            what: "history_behind",
            error: "the history writer is behind (its disk is slow or stalled)".into(),
        })
    }
}

impl Output for HistoryOutput {
    fn name(&self) -> &str {
        "history"
    }

    fn queue(&mut self, record: &Record, json: &[u8]) -> Result<(), OutputError> {
        if self.pending.len() >= self.max_pending {
            self.send();
            if self.pending.len() >= self.max_pending {
                return Err(self.lose(record));
            }
        }
        self.pending.push(record, json);
        self.pending_since.get_or_insert_with(Instant::now);
        if self.pending.len() % self.batch_records == 0 {
            self.send();
        }
        Ok(())
    }

    fn flush(&mut self, _: &[u8]) -> Result<(), OutputError> {
        if self.pending.len() >= self.batch_records {
            self.send();
        }
        Ok(())
    }

    fn next_seal_at(&self) -> Option<Instant> {
        self.pending_since.map(|t| t + self.batch_max_age)
    }

    fn seal(&mut self, now: Instant, all: bool) -> Result<(), OutputError> {
        if all || self.next_seal_at().is_some_and(|at| at <= now) {
            self.send();
        }
        if all {
            // The end: what is still pending waits for room in the queue,
            // then the writer takes what is queued and stops.
            self.send_last();
            self.sender = None;
            if let Some(writer) = self.writer.take() {
                let _ = writer.join();
            }
        }
        Ok(())
    }
}

impl Drop for HistoryOutput {
    fn drop(&mut self) {
        self.send_last();
        self.sender = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

fn write_loop(
    mut store: Writer,
    receiver: Receiver<Message>,
    stats: &HistoryStats,
    max_age: Duration,
    age_from: AgeFrom,
    max_bytes: u64,
) {
    let mut warned = false;
    let mut next_prune = std::time::Instant::now();
    // The newest record written, for ages counted from it.
    let mut newest: Option<Stamp> = None;
    let prune = |store: &mut Writer, warned: &mut bool, newest: Option<Stamp>| {
        let before = match age_from {
            AgeFrom::Now => Stamp::now().minus(max_age),
            // Nothing written yet: nothing is old.
            AgeFrom::NewestRecord => newest.map_or(Stamp(i64::MIN), |at| at.minus(max_age)),
        };
        match store.prune(before, max_bytes).and_then(|(aged, sized)| {
            stats.pruned_age.add(aged);
            stats.pruned_size.add(sized);
            store.figures()
        }) {
            Ok(figures) => {
                stats.bytes.set(figures.bytes);
                stats.rows.set(figures.rows);
                stats
                    .oldest
                    .set_f64(figures.oldest.map_or(0.0, |s| s.0 as f64 / 1e6));
            }
            Err(error) => {
                if !std::mem::replace(warned, true) {
                    warn!(%error, "Cannot prune the history.");
                }
            }
        }
    };
    // Nothing written since the last prune: nothing new to age out or over
    // the size bound, so an idle history waits for rows without a timer.
    let mut written_since_prune = true;
    loop {
        let received = if written_since_prune {
            let wait = next_prune.saturating_duration_since(std::time::Instant::now());
            receiver.recv_timeout(wait)
        } else {
            receiver
                .recv()
                .map_err(|_| std::sync::mpsc::RecvTimeoutError::Disconnected)
        };
        match received {
            Ok(Message::Batch(batch)) => match store.write(&batch) {
                Ok(n) => {
                    newest = newest.max(batch.newest());
                    stats.written.add(n);
                    written_since_prune = true;
                    warned = false;
                }
                Err(error) => {
                    stats.dropped.add(batch.len() as u64);
                    if !std::mem::replace(&mut warned, true) {
                        warn!(%error, records = batch.len(), "Cannot write to the history; records dropped.");
                    }
                }
            },
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if written_since_prune && std::time::Instant::now() >= next_prune {
            prune(&mut store, &mut warned, newest);
            next_prune = std::time::Instant::now() + PRUNE_EVERY;
            written_since_prune = false;
        }
    }
    prune(&mut store, &mut warned, newest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Store;
    use crate::history::query::job;
    use crate::record::{MinionMissing, MissingEvidence, MissingReason, RecordBody, RecordFactory};

    fn config(dir: &std::path::Path) -> HistoryConfig {
        HistoryConfig {
            enabled: true,
            path: dir.join("history.db"),
            max_age: Duration::from_secs(86_400),
            max_bytes: 1 << 30,
            batch_max_age: Duration::from_secs(1),
        }
    }

    fn missing(f: &RecordFactory, jid: &str, minion: &str) -> Record {
        // Now: the writer's last prune keeps a day.
        missing_at(f, jid, minion, Stamp::now())
    }

    fn missing_at(f: &RecordFactory, jid: &str, minion: &str, now: Stamp) -> Record {
        f.make(
            now,
            &[jid, minion],
            RecordBody::MinionMissing(MinionMissing {
                jid: jid.into(),
                minion: minion.into(),
                fun: "test.ping".into(),
                reason: MissingReason::NoResponse,
                evidence: MissingEvidence::Nothing,
                disconnected_at: None,
                address: None,
                streak: 1,
                missing_since: None,
                published_at: now,
                deadline: now,
                during_master_pressure: None,
                context: Default::default(),
            }),
        )
    }

    fn queue_all(output: &mut HistoryOutput, records: impl Iterator<Item = Record>) -> u64 {
        let mut refused = 0;
        for r in records {
            let json = serde_json::to_vec(&r).expect("a record serialises");
            if output.queue(&r, &json).is_err() {
                refused += 1;
            }
            let _ = output.flush(&json);
        }
        refused
    }

    /// A replay counts ages from its newest record: a week-old recording is
    /// kept (`max_age` is a day here), and what is over a day older than its
    /// newest record is removed. Live, both are past `max_age`.
    #[test]
    fn a_replayed_recording_ages_from_its_newest_record_not_the_clock() {
        let day = Duration::from_secs(86_400);
        let newest = Stamp::now().minus(7 * day);
        let (older, old) = ("20261120000000000001", "20261122000000000001");
        for (age_from, kept) in [
            (AgeFrom::NewestRecord, [false, true]),
            (AgeFrom::Now, [false, false]),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let (mut output, _) = HistoryOutput::open(&config(dir.path()), age_from).expect("open");
            let f = RecordFactory::new("m");
            queue_all(
                &mut output,
                [
                    missing_at(&f, older, "a", newest.minus(2 * day)),
                    missing_at(&f, old, "a", newest),
                ]
                .into_iter(),
            );
            output.seal(Instant::now(), true).expect("sealed");
            let store = Store::open_reader(&dir.path().join("history.db")).unwrap();
            let found = [older, old].map(|jid| job(&store, jid).unwrap().is_some());
            assert_eq!(found, kept, "{age_from:?}");
        }
    }

    /// A datacenter drops: one job of 200,000 minions, all silent. Its
    /// missing list is a job's chunks, not 200,000 rows: the history holds
    /// it whole however fast the verdicts come.
    #[test]
    fn a_job_whose_200000_minions_all_stay_silent_is_held_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (mut output, stats) =
            HistoryOutput::open(&config(dir.path()), AgeFrom::Now).expect("open");
        let f = RecordFactory::new("m");
        let refused = queue_all(
            &mut output,
            (1..200_000).map(|i| missing(&f, "20261126000000000001", &format!("m{i:06}"))),
        );
        output.seal(Instant::now(), true).expect("sealed");
        assert_eq!((refused, stats.dropped.get()), (0, 0));
        let store = Store::open_reader(&dir.path().join("history.db")).unwrap();
        let recap = job(&store, "20261126000000000001")
            .unwrap()
            .expect("the job");
        assert_eq!((recap.missing.len(), recap.incomplete), (199_999, 0));
    }

    /// Past its bound the history refuses, and the job's answer says by how
    /// many records it is incomplete.
    #[test]
    fn what_the_bound_refuses_is_charged_to_its_job() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.db");
        let (mut output, stats) =
            HistoryOutput::open(&config(dir.path()), AgeFrom::Now).expect("open");
        (output.batch_records, output.max_pending) = (4, 10);
        // The disk stalls: another writer holds the store's lock.
        let blocker = rusqlite::Connection::open(&path).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let f = RecordFactory::new("m");
        let jid = "20261126000000000002";
        // The writer takes a batch (or not yet) and waits on the lock; 16
        // wait in its queue (of 4 to 10 records: a batch sent late is the
        // larger); 10 records wait pending; the rest are refused.
        let total = 300;
        let refused = queue_all(
            &mut output,
            (0..total).map(|i| missing(&f, jid, &format!("m{i}"))),
        );
        assert!(refused >= total - 17 * 10 - 10, "{refused} refused");
        blocker.execute_batch("COMMIT").unwrap();
        output.seal(Instant::now(), true).expect("sealed");
        assert_eq!(stats.dropped.get(), refused);
        let store = Store::open_reader(&path).unwrap();
        let recap = job(&store, jid).unwrap().expect("the job");
        assert_eq!(
            (recap.missing.len() as u64, recap.incomplete),
            (total - refused, refused)
        );
    }
}
