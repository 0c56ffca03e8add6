//! Outputs: where records go, all of them at once.
//!
//! ```text
//! record ─▶ encode (ndjson | clickhouse row) ─▶ stdout            (JSON lines)
//!                                           ├─▶ file              (JSON lines, rotated by size)
//!                                           └─▶ spool (batches) ─▶ http sender (task)
//! ```
//!
//! Each output kind is one file (or folder) behind [`output::OutputKind`], listed
//! once in [`output`]'s registry. [`Outputs`] runs on the consumer task: each
//! record is made JSON once, every output queues it, and after each read every
//! output gets one write, given the read's lines as made (stdout and the file
//! output write them as they are), durable ones (spools) first, so a SIGKILL loses
//! nothing already handled and nothing is shown before it is safe. A read that
//! makes more than [`WRITE_EVERY_BYTES`] of lines is written in parts the same
//! way, so no output holds more than about that much. Batches are
//! sealed by count, size and age ([`spool::SpoolWriter`]); each spooled output's
//! sender ([`deliver`]) is its own task and sends sealed batches oldest first.

pub mod deliver;
pub mod encode;
pub mod file;
pub mod history;
pub mod http;
pub mod otlp;
pub mod output;
pub mod retry;
pub mod segment;
pub mod spool;
pub mod stdout;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::spool::SpoolConfig;
use crate::counter::Counts;
use crate::ratelimit::LogLimiter;
use crate::record::Record;
use crate::record::redact::Redacted;
use deliver::Delivery;
use output::{OpenContext, Output, OutputError};
pub use output::{OutputSpec, resolve_outputs};

// The registry of output kinds: one line each (`Variant => kind type`).
output::output_kinds! {
    Stdout => stdout::Stdout,
    File => file::File,
    Http => http::Http,
    Otlp => otlp::Otlp,
}

use spool::Spool;

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("output {name}: {source}")]
    Spool {
        name: String,
        source: spool::SpoolError,
    },
    #[error("output {name}: {source}")]
    File {
        name: String,
        source: file::FileOutputError,
    },
    #[error("output {name}: {source}")]
    Http {
        name: String,
        source: http::HttpSetupError,
    },
    #[error("writing records to stdout: {0}")]
    Stdout(std::io::Error),
    #[error("{0}")]
    History(String),
}

crate::counts! {
    /// What the outputs together could not take.
    pub struct OutputCounts {
        counter lost_records = "saltsight_output_lost_records",
            "Records an output could not take (file or spool write errors)";
        counter trace_jobs_forgotten = "saltsight_otlp_trace_jobs_forgotten",
            "Open jobs an otlp output with traces forgot before they closed (its bound of 10,000): they get no spans";
    }
}

/// Every configured output, fed from the consumer task.
/// Lines queued past which every output writes before the read's end (durable
/// ones first, as at its end): what an output holds between writes is about
/// this, not all a read made (a failing highstate's read made about 1 MB).
pub const WRITE_EVERY_BYTES: usize = 64 * 1024;

pub struct Outputs {
    outputs: Vec<Box<dyn Output>>,
    /// The ndjson lines of the records queued since the last write, each made
    /// once for every output ([`Output::flush`]'s `lines`).
    lines: Vec<u8>,
    log: LogLimiter,
    counts: Arc<OutputCounts>,
}

/// The senders of the outputs that deliver in the background, to be started on
/// the runtime.
pub struct Senders {
    deliveries: Vec<Delivery>,
}

impl Outputs {
    /// One more output beside the configured ones (the history on the master).
    pub fn add(&mut self, output: Box<dyn Output>) {
        self.outputs.push(output);
    }

    /// Opens every output: files, spools (recovering an earlier run's batches)
    /// and upstream clients. Any failure names its output.
    pub fn open(
        specs: &[OutputSpec],
        spool: &SpoolConfig,
        stdout: Box<dyn Write + Send>,
        stdout_format: stdout::StdoutFormat,
        flush_each: bool,
    ) -> Result<(Outputs, Senders), SinkError> {
        let mut stdout = Some(stdout);
        let mut deliveries = Vec::new();
        let counts = Arc::<OutputCounts>::default();
        let mut context = OpenContext {
            spool,
            counts: &counts,
            stdout: &mut stdout,
            flush_each,
            stdout_format,
            deliveries: &mut deliveries,
        };
        let mut outputs = Vec::new();
        for spec in specs {
            outputs.push(spec.settings.open(&spec.name, &mut context)?);
        }
        // Durable outputs first: no record is shown before it is safe.
        outputs.sort_by_key(|o| !o.durable());
        Ok((
            Outputs {
                outputs,
                lines: Vec::new(),
                log: LogLimiter::new(Duration::from_secs(10)),
                counts,
            },
            Senders { deliveries },
        ))
    }

    /// Queues `record` on every output; [`Outputs::flush`] writes. Only a
    /// redacted record gets here (`record::redact`).
    pub fn write(&mut self, record: &Redacted<Record>) -> Result<(), SinkError> {
        if self.outputs.is_empty() {
            return Ok(());
        }
        let record = record.get();
        let start = self.lines.len();
        encode::ndjson(record, &mut self.lines);
        for i in 0..self.outputs.len() {
            let result = self.outputs[i].queue(record, &self.lines[start..]);
            self.settle(i, result)?;
        }
        if self.lines.len() >= WRITE_EVERY_BYTES {
            self.write_each(|o, lines| o.flush_part(lines))?;
        }
        Ok(())
    }

    /// Writes what was queued: one write per output, durable ones first, so that
    /// no record is shown (stdout, file) before it is safe in every spool.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        self.write_each(|o, lines| o.flush(lines))
    }

    /// Has every output write what it queued with `write`, in order (durable
    /// ones first).
    fn write_each(
        &mut self,
        write: impl Fn(&mut dyn Output, &[u8]) -> Result<(), OutputError>,
    ) -> Result<(), SinkError> {
        for i in 0..self.outputs.len() {
            let result = write(self.outputs[i].as_mut(), &self.lines);
            self.settle(i, result)?;
        }
        self.lines.clear();
        Ok(())
    }

    /// A lost record is counted and logged (at most once per interval per
    /// kind of loss); a fatal error stops the run.
    fn settle(&mut self, i: usize, result: Result<(), OutputError>) -> Result<(), SinkError> {
        match result {
            Ok(()) => Ok(()),
            Err(OutputError::Fatal(e)) => Err(e),
            Err(OutputError::Lost(lost)) => {
                self.counts.lost_records.add(lost.records);
                if let Some(suppressed) = self.log.admit(lost.what) {
                    warn!(output = %self.outputs[i].name(), error = %lost.error, lost_records = lost.records, suppressed, "An output could not take records; they are lost (counted).");
                }
                Ok(())
            }
        }
    }

    /// Their own counts, for the scrape.
    pub fn counts(&self) -> Arc<dyn Counts> {
        self.counts.clone()
    }

    /// When the oldest open batch must be sealed.
    pub fn next_seal_at(&self) -> Option<Instant> {
        self.outputs.iter().filter_map(|o| o.next_seal_at()).min()
    }

    /// Seals batches that reached their age (`all`: every open batch, at the end).
    pub fn seal(&mut self, now: Instant, all: bool) {
        for i in 0..self.outputs.len() {
            let result = self.outputs[i].seal(now, all);
            // A fatal seal is stdout closing at the end; nothing more to write.
            let _ = self.settle(i, result);
        }
    }

    /// The end: queued records written, every open batch sealed, stdout flushed.
    pub fn close(&mut self) -> Result<(), SinkError> {
        self.flush()?;
        for i in 0..self.outputs.len() {
            let result = self.outputs[i].seal(Instant::now(), true);
            self.settle(i, result)?;
        }
        Ok(())
    }
}

/// The running senders.
pub struct Sending {
    tasks: Vec<JoinHandle<()>>,
    spools: Vec<Spool>,
    cancel: CancellationToken,
}

impl Senders {
    /// Each spooled output's spool (for metrics read at scrape time).
    pub fn spools(&self) -> Vec<Spool> {
        self.deliveries.iter().map(|d| d.spool.clone()).collect()
    }

    /// Starts one task per spooled output; they stop with [`Sending::stop`].
    pub fn spawn(self) -> Sending {
        let cancel = CancellationToken::new();
        let mut tasks = Vec::new();
        let mut spools = Vec::new();
        for delivery in self.deliveries {
            spools.push(delivery.spool.clone());
            tasks.push(delivery.start(cancel.clone()));
        }
        Sending {
            tasks,
            spools,
            cancel,
        }
    }
}

impl Sending {
    /// Waits until every spool is empty (a one-shot replay), or `cancel`.
    pub async fn drain(&self, cancel: &CancellationToken) -> bool {
        for spool in &self.spools {
            if spool.pending() > 0 {
                info!(
                    output = spool.name(),
                    batches = spool.pending(),
                    "Waiting for the spool to be delivered (Ctrl-C leaves it for the next start)."
                );
            }
            if !spool.drained(cancel).await {
                return false;
            }
        }
        true
    }

    /// Stops the senders; a batch in flight stays spooled. Logs what is left.
    pub async fn stop(self) {
        self.cancel.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
        for spool in &self.spools {
            let stats = spool.stats();
            info!(
                output = spool.name(),
                sent_records = stats.sent_records.load(Ordering::Relaxed),
                spooled_batches = spool.pending(),
                spooled_bytes = spool.bytes(),
                dropped_records = stats.dropped_records.load(Ordering::Relaxed),
                dead_lettered_records = stats.dead_records.load(Ordering::Relaxed),
                retries = stats.retries.load(Ordering::Relaxed),
                "Output stopped."
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::record::redact::Redactor;
    use crate::record::{BusGapRecord, RecordBody, RecordFactory};
    use crate::time::Stamp;

    /// Standard output as a test sees it: the bytes written so far.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<u8>>>);

    impl Write for Seen {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("not poisoned").extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A read that makes many records is written in parts of about
    /// WRITE_EVERY_BYTES, not held whole until its end; stdout and a file
    /// output each get every line, in order, from the one encoding.
    #[test]
    fn a_read_of_many_records_is_written_in_parts_not_held_whole() {
        let seen = Seen::default();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("records.jsonl");
        let mut specs = vec![OutputSpec::stdout()];
        specs.extend(
            output::resolve(&format!(
                "[[output]]\ntype = \"file\"\npath = {:?}\n",
                file.display().to_string()
            ))
            .expect("a file output"),
        );
        let (mut outputs, _senders) = Outputs::open(
            &specs,
            &SpoolConfig::default(),
            Box::new(seen.clone()),
            stdout::StdoutFormat::Json,
            true,
        )
        .expect("stdout opens");
        let redactor = Redactor::new(&Default::default()).expect("default rules");
        let records = RecordFactory::new("m");
        let written = || seen.0.lock().expect("not poisoned").len();
        let mut expected = Vec::new();
        for i in 0..2_000u64 {
            let gap = RecordBody::BusGap(BusGapRecord {
                reason: "disconnected",
                started_at: Stamp(0),
                ended_at: Stamp(1),
                duration_ms: i,
                dropped_frames: 0,
            });
            let record = redactor.record(records.make(Stamp(0), &[&i.to_string()], gap));
            outputs.write(&record).expect("queued");
            expected.extend(serde_json::to_vec(record.get()).expect("encodes"));
            expected.push(b'\n');
            // What is not written yet is less than a part and a record.
            assert!(expected.len() - written() < WRITE_EVERY_BYTES + 1024, "{i}");
        }
        assert!(written() >= 2 * WRITE_EVERY_BYTES, "written in parts");
        outputs.flush().expect("written");
        assert_eq!(written(), expected.len(), "all of it at the read's end");
        assert!(
            *seen.0.lock().expect("not poisoned") == expected,
            "stdout has every line, in order"
        );
        assert!(
            std::fs::read(&file).expect("the file output's file") == expected,
            "the file output has every line, in order"
        );
    }
}
