//! Outputs: where records go, all of them at once.
//!
//! ```text
//! record ─▶ encode (ndjson | clickhouse row) ─▶ stdout            (JSON lines)
//!                                           ├─▶ file              (JSON lines, rotated by size)
//!                                           └─▶ spool (batches) ─▶ http sender (task)
//! ```
//!
//! [`Outputs`] runs on the consumer task: each record is encoded once per
//! encoding, and after each event every output gets one write (the spool's
//! open batch included, so a SIGKILL loses nothing already handled). Batches are
//! sealed by count, size and age ([`spool::SpoolWriter`]); each HTTP output's
//! [`http::HttpSender`] is its own task and sends sealed batches oldest first.

pub mod encode;
pub mod file;
pub mod http;
pub mod retry;
pub mod segment;
pub mod spool;

use std::io::{BufWriter, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::outputs::{Encoding, OutputConfig, OutputKind, SpoolConfig};
use crate::counter::Counts;
use crate::ratelimit::LogLimiter;
use crate::record::Record;
use crate::record::redact::Redacted;
use file::RotatingFile;
use http::HttpSender;
use spool::{Spool, SpoolWriter};

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
}

enum Target {
    Stdout {
        out: BufWriter<Box<dyn Write + Send>>,
        lines: Vec<u8>,
    },
    File {
        file: RotatingFile,
        lines: Vec<u8>,
    },
    Spool {
        writer: SpoolWriter,
        encoding: Encoding,
    },
}

struct Output {
    name: String,
    target: Target,
}

/// Every configured output, fed from the consumer task.
pub struct Outputs {
    outputs: Vec<Output>,
    /// Flush stdout after each event (live); replay lets it buffer.
    flush_each: bool,
    json: Vec<u8>,
    row: Vec<u8>,
    log: LogLimiter,
    counts: Arc<OutputCounts>,
}

crate::counts! {
    /// What the outputs together could not take.
    pub struct OutputCounts {
        counter lost_records = "saltsight_output_lost_records",
            "Records an output could not take (file or spool write errors)";
    }
}

/// The HTTP senders, to be started on the runtime.
pub struct Senders {
    senders: Vec<(HttpSender, Spool)>,
}

impl Outputs {
    /// Opens every output: files, spools (recovering an earlier run's batches)
    /// and HTTP clients. Any failure names its output.
    pub fn open(
        configs: &[OutputConfig],
        spool: &SpoolConfig,
        stdout: Box<dyn Write + Send>,
        flush_each: bool,
    ) -> Result<(Outputs, Senders), SinkError> {
        let mut outputs = Vec::new();
        let mut senders = Vec::new();
        let mut stdout = Some(stdout);
        for config in configs {
            let name = config.name.clone();
            let target = match &config.kind {
                OutputKind::Stdout => {
                    let out = stdout.take().unwrap_or_else(|| Box::new(std::io::sink()));
                    Target::Stdout {
                        out: BufWriter::new(out),
                        lines: Vec::new(),
                    }
                }
                OutputKind::File {
                    path,
                    max_bytes,
                    keep,
                } => Target::File {
                    file: RotatingFile::open(path, *max_bytes, *keep).map_err(|source| {
                        SinkError::File {
                            name: name.clone(),
                            source,
                        }
                    })?,
                    lines: Vec::new(),
                },
                OutputKind::Http(http) => {
                    let sender =
                        HttpSender::new(&name, http).map_err(|source| SinkError::Http {
                            name: name.clone(),
                            source,
                        })?;
                    let (opened, _) = Spool::open(&spool.dir, &name, spool, http.encoding)
                        .map_err(|source| SinkError::Spool {
                            name: name.clone(),
                            source,
                        })?;
                    senders.push((sender, opened.clone()));
                    Target::Spool {
                        writer: SpoolWriter::new(opened, http.batch),
                        encoding: http.encoding,
                    }
                }
            };
            outputs.push(Output { name, target });
        }
        Ok((
            Outputs {
                outputs,
                flush_each,
                json: Vec::new(),
                row: Vec::new(),
                log: LogLimiter::new(Duration::from_secs(10)),
                counts: Arc::default(),
            },
            Senders { senders },
        ))
    }

    /// Queues `record` on every output; [`Outputs::flush`] writes. Only a
    /// redacted record gets here (`record::redact`).
    pub fn write(&mut self, record: &Redacted<Record>) -> Result<(), SinkError> {
        if self.outputs.is_empty() {
            return Ok(());
        }
        let record = record.get();
        self.json.clear();
        encode::ndjson(record, &mut self.json);
        for output in &mut self.outputs {
            match &mut output.target {
                Target::Stdout { lines, .. } | Target::File { lines, .. } => {
                    lines.extend_from_slice(&self.json)
                }
                Target::Spool { writer, encoding } => {
                    let payload = match encoding {
                        Encoding::Ndjson => &self.json,
                        Encoding::ClickHouse => {
                            self.row.clear();
                            encode::encode(*encoding, record, &self.json, &mut self.row);
                            &self.row
                        }
                    };
                    if let Err(e) = writer.append(payload) {
                        // The record itself is lost too; the spool counts its batch.
                        self.counts.lost_records.inc();
                        spool_failed(writer, &mut self.log, &output.name, &e);
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes what was queued: one write per output, spools first, so that no
    /// record is shown (stdout, file) before it is safe in every spool.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        for output in &mut self.outputs {
            if let Target::Spool { writer, .. } = &mut output.target {
                if let Err(e) = writer.flush() {
                    spool_failed(writer, &mut self.log, &output.name, &e);
                }
            }
        }
        for output in &mut self.outputs {
            match &mut output.target {
                Target::Stdout { out, lines } => {
                    out.write_all(lines).map_err(SinkError::Stdout)?;
                    lines.clear();
                    if self.flush_each {
                        out.flush().map_err(SinkError::Stdout)?;
                    }
                }
                Target::File { file, lines } => {
                    if let Err(e) = file.write(lines) {
                        self.counts
                            .lost_records
                            .add(lines.iter().filter(|b| **b == b'\n').count() as u64);
                        if let Some(suppressed) = self.log.admit("file_write") {
                            warn!(output = %output.name, error = %e, suppressed, "Cannot write records to the file; they are lost (counted).");
                        }
                    }
                    lines.clear();
                }
                Target::Spool { .. } => {}
            }
        }
        Ok(())
    }

    /// Their own counts, for the scrape.
    pub fn counts(&self) -> Arc<dyn Counts> {
        self.counts.clone()
    }

    /// When the oldest open batch must be sealed.
    pub fn next_seal_at(&self) -> Option<SystemTime> {
        self.writers().filter_map(SpoolWriter::seal_at).min()
    }

    fn writers(&self) -> impl Iterator<Item = &SpoolWriter> {
        self.outputs.iter().filter_map(|o| match &o.target {
            Target::Spool { writer, .. } => Some(writer),
            _ => None,
        })
    }

    /// Seals batches that reached their age (`all`: every open batch, at the end).
    pub fn seal(&mut self, now: SystemTime, all: bool) {
        for output in &mut self.outputs {
            if let Target::Spool { writer, .. } = &mut output.target {
                let result = if all {
                    writer.seal()
                } else {
                    writer.seal_if_due(now)
                };
                if let Err(e) = result {
                    spool_failed(writer, &mut self.log, &output.name, &e);
                }
            }
        }
    }

    /// The end: queued records written, stdout flushed, every open batch sealed.
    pub fn close(&mut self) -> Result<(), SinkError> {
        self.flush()?;
        self.seal(SystemTime::now(), true);
        for output in &mut self.outputs {
            if let Target::Stdout { out, .. } = &mut output.target {
                out.flush().map_err(SinkError::Stdout)?;
            }
        }
        Ok(())
    }
}

/// A spool write or seal failed: its open batch is lost (the spool counts it),
/// logged at most once per interval.
fn spool_failed(
    writer: &mut SpoolWriter,
    log: &mut LogLimiter,
    output: &str,
    error: &spool::SpoolError,
) {
    writer.on_error();
    if let Some(suppressed) = log.admit("spool_write") {
        warn!(output, error = %error, suppressed, "Cannot spool records; the open batch is lost (counted).");
    }
}

/// The running senders.
pub struct Sending {
    tasks: Vec<JoinHandle<()>>,
    spools: Vec<Spool>,
    cancel: CancellationToken,
}

impl Senders {
    /// Each HTTP output's spool (for metrics read at scrape time).
    pub fn spools(&self) -> Vec<Spool> {
        self.senders
            .iter()
            .map(|(_, spool)| spool.clone())
            .collect()
    }

    /// Starts one task per HTTP output; they stop with [`Sending::stop`].
    pub fn spawn(self) -> Sending {
        let cancel = CancellationToken::new();
        let mut tasks = Vec::new();
        let mut spools = Vec::new();
        for (sender, spool) in self.senders {
            spools.push(spool.clone());
            tasks.push(tokio::spawn(sender.run(spool, cancel.clone())));
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
