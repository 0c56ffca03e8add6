//! Where frames come from: the master's publisher (the reader task, which never
//! waits on the pipeline), or a recording (a capture or a raw dump, read by a
//! blocking task that waits for room in the queue: a file can wait).

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::bus::reader::Delivery;
use crate::bus::recording::{RecordingFormat, RecordingReader};
use crate::bus::{BusMessage, ReaderConfig};
use crate::config::BusConfig;

/// Where frames come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// The master's publisher, read-only, reconnecting.
    Live(ReaderConfig),
    /// A recording: the capture format or a raw dump of the socket bytes.
    Recording {
        path: PathBuf,
        max_frame_bytes: usize,
        progress: bool,
    },
}

impl Source {
    pub fn live(bus: &BusConfig, delivery: Delivery) -> Self {
        Source::Live(ReaderConfig {
            endpoint: bus.endpoint.clone(),
            max_frame_bytes: bus.max_frame_bytes,
            max_queue_frames: bus.queue_frames,
            max_queue_bytes: bus.queue_bytes,
            reconnect_min: bus.reconnect_min,
            reconnect_max: bus.reconnect_max,
            stall_timeout: bus.stall_timeout,
            delivery,
            spill: bus.spill.clone(),
        })
    }
}

/// What a recording held besides its frames.
#[derive(Debug, Default)]
pub struct RecordingTotals {
    /// The recording ended in damage: nothing after it could be read.
    pub damaged: bool,
    pub skipped_frames: u64,
    pub discarded_bytes: u64,
    pub desyncs: u64,
    pub trailing_bytes: u64,
}

/// Reads a recording into the queue, waiting for room (a file can wait).
pub fn read_recording(
    path: &std::path::Path,
    max_frame_bytes: usize,
    progress: bool,
    tx: &mpsc::Sender<BusMessage>,
    cancel: &CancellationToken,
) -> anyhow::Result<RecordingTotals> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open recording {}", path.display()))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = RecordingReader::new(file, max_frame_bytes)
        .with_context(|| format!("cannot read recording {}", path.display()))?;
    let format = match reader.format() {
        RecordingFormat::Capture => "saltsight capture",
        RecordingFormat::RawDump => "raw socket dump",
    };
    debug!(path = %path.display(), format, "Replaying a recording.");
    let bar = (progress && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(size);
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    let mut batch = Vec::new();
    let mut damaged = false;
    loop {
        if cancel.is_cancelled() {
            break;
        }
        let more = match reader.next_batch(&mut batch) {
            Ok(more) => more,
            Err(error) => {
                // Bad input, not a failure of saltsight: what came before is
                // replayed and the exit code says the input was bad.
                tracing::warn!(
                    path = %path.display(),
                    %error,
                    "The recording is damaged; what came before it was replayed."
                );
                damaged = true;
                false
            }
        };
        for message in batch.drain(..) {
            if tx.blocking_send(message).is_err() {
                return Ok(RecordingTotals::default());
            }
        }
        if let Some(bar) = &bar {
            bar.set_position(reader.position());
        }
        if !more {
            break;
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(RecordingTotals {
        damaged,
        skipped_frames: reader.skipped_frames,
        discarded_bytes: reader.discarded_bytes,
        desyncs: reader.desyncs,
        trailing_bytes: reader.trailing_bytes,
    })
}
