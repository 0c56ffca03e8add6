//! The `otlp` output: records as OpenTelemetry log records over OTLP/HTTP
//! (protobuf, gzip) to `<endpoint>/v1/logs`, through the disk spool like
//! `http` and with its transport: headers, credentials read from files, a
//! custom CA, timeouts, retries with `Retry-After`, dead letters. A partial
//! success (`rejected_log_records`) is counted. With `traces = true`, one trace
//! per job to `<endpoint>/v1/traces` too (`spans.rs`), through a spool of its
//! own (`<name>-traces`). The messages are the OpenTelemetry project's own
//! definitions (`proto.rs`, generated). docs/opentelemetry.md.

pub mod logs;
pub mod proto;
pub mod spans;

use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use tokio::time::Instant;

use super::SinkError;
use super::deliver::{Attempt, Delivery, Upstream};
use super::encode::Encoding;
use super::http::config::{self as http_config, HttpSettings, section_with_transport};
use super::http::{HttpUpstream, SpoolOutput};
use super::output::{OpenContext, Output, OutputError, OutputKind, Probe};
use super::spool::{Spool, SpoolWriter};
use crate::config::spool::SpoolConfig;
use crate::record::Record;
use crate::time::Stamp;
use proto::opentelemetry::proto::collector::logs::v1::ExportLogsServiceResponse;
use proto::opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse;

/// `type = "otlp"`.
pub struct Otlp;

section_with_transport! {
    /// An `otlp` output's keys as written: `endpoint` (the collector's base
    /// URL; `/v1/logs` is appended, as `OTEL_EXPORTER_OTLP_ENDPOINT` does),
    /// and the transport keys of `http`.
    pub struct OtlpSection {
        pub endpoint: Option<String>,
        pub traces: Option<bool>,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    /// As written (for `check-config`).
    pub endpoint: String,
    /// The transport, its URL `<endpoint>/v1/logs`.
    pub transport: HttpSettings,
    /// One trace per job to `<endpoint>/v1/traces` as well.
    pub traces: bool,
}

impl OutputKind for Otlp {
    const TYPE: &'static str = "otlp";
    type Section = OtlpSection;
    type Settings = OtlpSettings;

    fn resolve(
        mut section: OtlpSection,
        spool: &SpoolConfig,
        problems: &mut Vec<String>,
    ) -> Option<OtlpSettings> {
        let Some(endpoint) = section.endpoint.clone() else {
            problems.push(
                "`endpoint` is missing (the collector's base URL, e.g. http://127.0.0.1:4318)"
                    .into(),
            );
            return None;
        };
        let base = http_config::checked_url("endpoint", &endpoint, problems);
        let logs = format!("{}/v1/logs", base.trim_end_matches('/'));
        let transport = section.take_transport();
        let transport =
            http_config::resolve_transport(transport, logs, Encoding::Otlp, spool, problems)?;
        Some(OtlpSettings {
            endpoint,
            transport,
            traces: section.traces.unwrap_or(false),
        })
    }

    fn describe(name: &str, settings: &OtlpSettings, spool: &SpoolConfig) -> String {
        format!(
            "otlp {} (OTLP/HTTP logs{}), spool {}",
            settings.transport.url,
            if settings.traces {
                ", and a trace per job to /v1/traces"
            } else {
                ""
            },
            spool.dir.join(name).display()
        )
    }

    fn probe(_settings: &OtlpSettings, _timeout: Duration) -> Option<Probe> {
        // A collector answers only POSTs of its own messages; an empty export
        // would be one, but is nothing to send just to ask.
        None
    }

    fn open(
        name: &str,
        settings: &OtlpSettings,
        context: &mut OpenContext<'_>,
    ) -> Result<Box<dyn Output>, SinkError> {
        let sender = logs::Sender {
            host: nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_default(),
        };
        let logs = signal(name, settings, Signal::Logs, &sender, context)?;
        let traces = if settings.traces {
            let traces_name = traces_spool(name);
            let spool = signal(&traces_name, settings, Signal::Traces, &sender, context)?;
            Some((spans::JobSpans::new(context.counts.clone()), spool))
        } else {
            None
        };
        Ok(Box::new(OtlpOutput {
            logs,
            traces,
            line: Vec::new(),
        }))
    }
}

/// The spool of an `otlp` output's spans, beside its own (`<name>`).
pub fn traces_spool(name: &str) -> String {
    format!("{name}-traces")
}

/// What one of the output's spools carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    Logs,
    Traces,
}

impl Signal {
    fn encoding(self) -> Encoding {
        match self {
            Signal::Logs => Encoding::Otlp,
            Signal::Traces => Encoding::OtlpSpans,
        }
    }

    fn path(self) -> &'static str {
        match self {
            Signal::Logs => "/v1/logs",
            Signal::Traces => "/v1/traces",
        }
    }
}

/// One signal's spool, named `name`, and its sender.
fn signal(
    name: &str,
    settings: &OtlpSettings,
    signal: Signal,
    sender: &logs::Sender,
    context: &mut OpenContext<'_>,
) -> Result<SpoolOutput, SinkError> {
    let transport = HttpSettings {
        url: format!(
            "{}{}",
            settings.endpoint.trim_end_matches('/'),
            signal.path()
        ),
        encoding: signal.encoding(),
        ..settings.transport.clone()
    };
    let http = HttpUpstream::new(&transport).map_err(|source| SinkError::Http {
        name: name.to_owned(),
        source,
    })?;
    let (spool, _) = Spool::open(&context.spool.dir, name, context.spool, signal.encoding())
        .map_err(|source| SinkError::Spool {
            name: name.to_owned(),
            source,
        })?;
    context.deliveries.push(Delivery::new(
        name,
        spool.clone(),
        OtlpUpstream {
            http,
            sender: sender.clone(),
            signal,
        },
        transport.retry,
    ));
    Ok(SpoolOutput::new(
        name,
        SpoolWriter::new(spool, transport.batch),
        signal.encoding(),
    ))
}

/// Records into the logs spool as [`logs::spooled`] lines; with traces, each
/// closed job's spans into the traces spool.
struct OtlpOutput {
    logs: SpoolOutput,
    traces: Option<(spans::JobSpans, SpoolOutput)>,
    line: Vec<u8>,
}

impl Output for OtlpOutput {
    fn name(&self) -> &str {
        self.logs.name()
    }

    fn queue(&mut self, record: &Record, json: &[u8]) -> Result<(), OutputError> {
        self.line.clear();
        logs::spooled(record, json, &mut self.line);
        let line = std::mem::take(&mut self.line);
        let queued = self.logs.queue(record, &line);
        self.line = line;
        if let Some((jobs, spool)) = &mut self.traces {
            for span in jobs.take(record) {
                self.line.clear();
                // A span of strings, numbers and maps serialises.
                let _ = serde_json::to_writer(&mut self.line, &span);
                self.line.push(b'\n');
                spool.queue(record, &self.line)?;
            }
        }
        queued
    }

    fn flush(&mut self, _: &[u8]) -> Result<(), OutputError> {
        // The spools were queued OTLP lines, not the records' ndjson: they
        // write what their writers hold, and are given no lines.
        if let Some((_, spool)) = &mut self.traces {
            spool.flush(&[])?;
        }
        self.logs.flush(&[])
    }

    fn durable(&self) -> bool {
        true
    }

    fn next_seal_at(&self) -> Option<Instant> {
        let traces = self.traces.as_ref().and_then(|(_, s)| s.next_seal_at());
        match (self.logs.next_seal_at(), traces) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn seal(&mut self, now: Instant, all: bool) -> Result<(), OutputError> {
        if let Some((_, spool)) = &mut self.traces {
            spool.seal(now, all)?;
        }
        self.logs.seal(now, all)
    }
}

/// The collector: a batch becomes one `ExportLogsServiceRequest` (or
/// `ExportTraceServiceRequest`), sent over the `http` transport; a 2xx's
/// `partial_success` is read.
struct OtlpUpstream {
    http: HttpUpstream,
    sender: logs::Sender,
    signal: Signal,
}

impl Upstream for OtlpUpstream {
    fn shown(&self) -> &str {
        self.http.shown()
    }

    fn encoding(&self) -> Encoding {
        self.signal.encoding()
    }

    fn prepare(&self, batch: &[u8]) -> Bytes {
        let (body, skipped) = match self.signal {
            Signal::Logs => {
                let observed = Stamp::now();
                let (request, skipped) = logs::request(batch, &self.sender, observed);
                (request.encode_to_vec(), skipped)
            }
            Signal::Traces => {
                let (request, skipped) = spans::request(batch, &self.sender);
                (request.encode_to_vec(), skipped)
            }
        };
        if skipped > 0 {
            tracing::warn!(skipped, url = %self.http.shown(), "Spooled lines that are not records or spans were left out of the batch.");
        }
        self.http.prepare(&body)
    }

    async fn attempt(&self, body: Bytes) -> Attempt {
        match self.http.post(body, true).await {
            (Attempt::Delivered, Some(reply)) => partial(self.signal, &reply),
            (attempt, _) => attempt,
        }
    }
}

/// A 2xx reply: all taken, or a partial success with how many were refused.
/// A reply that is not the signal's response (an empty one, JSON from a proxy)
/// is taken as full success, as the OTLP spec has clients do.
fn partial(signal: Signal, reply: &[u8]) -> Attempt {
    let refused = match signal {
        Signal::Logs => ExportLogsServiceResponse::decode(reply)
            .ok()
            .and_then(|r| r.partial_success)
            .map(|p| (p.rejected_log_records, p.error_message)),
        Signal::Traces => ExportTraceServiceResponse::decode(reply)
            .ok()
            .and_then(|r| r.partial_success)
            .map(|p| (p.rejected_spans, p.error_message)),
    };
    match refused {
        Some((rejected, message)) if rejected > 0 => Attempt::Partial {
            rejected: rejected as u64,
            message,
        },
        _ => Attempt::Delivered,
    }
}
