//! The `http` output: records spooled on disk ([`super::spool`]), sent in
//! batches to an HTTP upstream ([`upstream::HttpUpstream`]) by a sender task
//! ([`super::deliver`]); `ndjson` for log pipelines (Vector, Logstash, Fluent
//! Bit) or `clickhouse` rows.

pub mod config;
pub mod upstream;

use std::time::Duration;

use tokio::time::Instant;

use super::SinkError;
use super::deliver::Delivery;
use super::encode::{self, Encoding};
use super::output::{Lost, OpenContext, Output, OutputError, OutputKind, Probe};
use super::spool::{Spool, SpoolError, SpoolWriter};
use crate::config::spool::SpoolConfig;
use crate::record::Record;
pub use config::{HttpAuth, HttpSection, HttpSettings, Secret};
pub use upstream::{HttpSetupError, HttpUpstream};

/// `type = "http"`.
pub struct Http;

impl OutputKind for Http {
    const TYPE: &'static str = "http";
    type Section = HttpSection;
    type Settings = HttpSettings;

    fn resolve(
        section: HttpSection,
        spool: &SpoolConfig,
        problems: &mut Vec<String>,
    ) -> Option<HttpSettings> {
        config::resolve(section, spool, problems)
    }

    fn describe(name: &str, settings: &HttpSettings, spool: &SpoolConfig) -> String {
        format!(
            "http {} ({}), spool {}",
            settings.url,
            settings.encoding.as_str(),
            spool.dir.join(name).display()
        )
    }

    fn probe(settings: &HttpSettings, timeout: Duration) -> Option<Probe> {
        let settings = settings.clone();
        Some(Box::pin(async move {
            upstream::probe(&settings, timeout).await
        }))
    }

    fn open(
        name: &str,
        settings: &HttpSettings,
        context: &mut OpenContext<'_>,
    ) -> Result<Box<dyn Output>, SinkError> {
        let upstream = HttpUpstream::new(settings).map_err(|source| SinkError::Http {
            name: name.to_owned(),
            source,
        })?;
        let (spool, _) = Spool::open(&context.spool.dir, name, context.spool, settings.encoding)
            .map_err(|source| SinkError::Spool {
                name: name.to_owned(),
                source,
            })?;
        context
            .deliveries
            .push(Delivery::new(name, spool.clone(), upstream, settings.retry));
        Ok(Box::new(SpoolOutput::new(
            name,
            SpoolWriter::new(spool, settings.batch),
            settings.encoding,
        )))
    }
}

/// Records into a spool, in the upstream's encoding (every spooled output:
/// `http`, `otlp`).
pub(crate) struct SpoolOutput {
    name: String,
    writer: SpoolWriter,
    encoding: Encoding,
    row: Vec<u8>,
}

impl SpoolOutput {
    pub(crate) fn new(name: &str, writer: SpoolWriter, encoding: Encoding) -> Self {
        Self {
            name: name.to_owned(),
            writer,
            encoding,
            row: Vec::new(),
        }
    }

    /// A spool write or seal failed: its open batch is lost (the spool counts it).
    fn failed(&mut self, records: u64, error: SpoolError) -> OutputError {
        self.writer.on_error();
        OutputError::Lost(Lost {
            records,
            what: "spool_write",
            error: error.to_string(),
        })
    }
}

impl Output for SpoolOutput {
    fn name(&self) -> &str {
        &self.name
    }

    fn queue(&mut self, record: &Record, json: &[u8]) -> Result<(), OutputError> {
        let payload = match self.encoding {
            Encoding::Ndjson | Encoding::Otlp | Encoding::OtlpSpans => json,
            Encoding::ClickHouse => {
                self.row.clear();
                encode::encode(self.encoding, record, json, &mut self.row);
                &self.row
            }
        };
        if let Err(e) = self.writer.append(payload) {
            // The record itself is lost too; the spool counts its batch.
            return Err(self.failed(1, e));
        }
        Ok(())
    }

    fn flush(&mut self, _: &[u8]) -> Result<(), OutputError> {
        self.writer.flush().map_err(|e| self.failed(0, e))
    }

    fn durable(&self) -> bool {
        true
    }

    fn next_seal_at(&self) -> Option<Instant> {
        self.writer.seal_at()
    }

    fn seal(&mut self, now: Instant, all: bool) -> Result<(), OutputError> {
        let result = if all {
            self.writer.seal()
        } else {
            self.writer.seal_if_due(now)
        };
        result.map_err(|e| self.failed(0, e))
    }
}
