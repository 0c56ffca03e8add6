//! The history output: every record into the store on the master
//! (`history`), in batches, from a thread of its own so that SQLite's writes
//! and fsyncs never hold the event loop. Batches go at `batch_max_age` or 512
//! records, through a queue of 16 batches: a full queue (the disk stalled)
//! drops the batch, counted and logged, never the pipeline. Every minute the
//! thread removes what is past `max_age` or over `max_bytes`, oldest first.
//! At the end the last batch is written and the thread joined; a SIGKILL loses
//! at most the batch not yet written.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tracing::warn;

use super::SinkError;
use super::output::{Lost, Output, OutputError};
use crate::config::history::HistoryConfig;
use crate::history::{Row, Store};
use crate::record::Record;
use crate::time::Stamp;

/// Records in a batch at most.
const BATCH_ROWS: usize = 512;
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
    Batch(Vec<Row>),
}

/// The output the agent writes to.
pub struct HistoryOutput {
    pending: Vec<Row>,
    /// When the oldest pending record was queued.
    pending_since: Option<Instant>,
    batch_max_age: Duration,
    sender: Option<SyncSender<Message>>,
    writer: Option<JoinHandle<()>>,
    stats: Arc<HistoryStats>,
}

impl HistoryOutput {
    /// Opens the store (its schema made when new) and starts the writer.
    pub fn open(config: &HistoryConfig) -> Result<(HistoryOutput, Arc<HistoryStats>), SinkError> {
        let store =
            Store::open_writer(&config.path).map_err(|e| SinkError::History(e.to_string()))?;
        let stats = Arc::new(HistoryStats::default());
        let (sender, receiver) = sync_channel(QUEUE_BATCHES);
        let writer = {
            let stats = stats.clone();
            let (max_age, max_bytes) = (config.max_age, config.max_bytes);
            std::thread::Builder::new()
                .name("saltsight-history".into())
                .spawn(move || write_loop(store, receiver, &stats, max_age, max_bytes))
                .map_err(|e| SinkError::History(format!("cannot start the history writer: {e}")))?
        };
        Ok((
            HistoryOutput {
                pending: Vec::new(),
                pending_since: None,
                batch_max_age: config.batch_max_age,
                sender: Some(sender),
                writer: Some(writer),
                stats: stats.clone(),
            },
            stats,
        ))
    }

    fn send(&mut self) -> Result<(), OutputError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.pending);
        self.pending_since = None;
        let n = batch.len() as u64;
        let Some(sender) = &self.sender else {
            return Ok(());
        };
        match sender.try_send(Message::Batch(batch)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.stats.dropped.add(n);
                Err(OutputError::Lost(Lost {
                    records: n,
                    what: "history_behind",
                    error: "the history writer is behind (its disk is slow or stalled)".into(),
                }))
            }
        }
    }
}

impl Output for HistoryOutput {
    fn name(&self) -> &str {
        "history"
    }

    fn queue(&mut self, record: &Record, json: &[u8]) -> Result<(), OutputError> {
        self.pending.push(Row::of(record, json));
        self.pending_since.get_or_insert_with(Instant::now);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), OutputError> {
        if self.pending.len() >= BATCH_ROWS {
            return self.send();
        }
        Ok(())
    }

    fn next_seal_at(&self) -> Option<Instant> {
        self.pending_since.map(|t| t + self.batch_max_age)
    }

    fn seal(&mut self, now: Instant, all: bool) -> Result<(), OutputError> {
        if all || self.next_seal_at().is_some_and(|at| at <= now) {
            self.send()?;
        }
        if all {
            // The end: the writer takes what is queued and stops.
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
        let _ = self.send();
        self.sender = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

fn write_loop(
    mut store: Store,
    receiver: Receiver<Message>,
    stats: &HistoryStats,
    max_age: Duration,
    max_bytes: u64,
) {
    let mut warned = false;
    let mut next_prune = std::time::Instant::now();
    let prune = |store: &mut Store, warned: &mut bool| {
        let before = Stamp::from_system_time(SystemTime::now() - max_age);
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
            Ok(Message::Batch(rows)) => match store.insert(&rows) {
                Ok(n) => {
                    stats.written.add(n);
                    written_since_prune = true;
                    warned = false;
                }
                Err(error) => {
                    stats.dropped.add(rows.len() as u64);
                    if !std::mem::replace(&mut warned, true) {
                        warn!(%error, records = rows.len(), "Cannot write to the history; records dropped.");
                    }
                }
            },
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if written_since_prune && std::time::Instant::now() >= next_prune {
            prune(&mut store, &mut warned);
            next_prune = std::time::Instant::now() + PRUNE_EVERY;
            written_since_prune = false;
        }
    }
    prune(&mut store, &mut warned);
}
