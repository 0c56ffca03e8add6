//! The `stdout` output: records as JSON lines on standard output (the journal,
//! under systemd), or one readable line each for a person at a terminal
//! (`record::text`). It has no keys of its own.

use std::io::{BufWriter, Write};

use serde::Deserialize;

use super::SinkError;
use super::output::{OpenContext, Output, OutputError, OutputKind};
use crate::config::spool::SpoolConfig;
use crate::record::Record;

/// `type = "stdout"`.
pub struct Stdout;

pub use super::output::StdoutFormat;

/// No keys besides `type` and `name`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdoutSection {}

impl OutputKind for Stdout {
    const TYPE: &'static str = "stdout";
    type Section = StdoutSection;
    type Settings = ();

    fn resolve(_: StdoutSection, _: &SpoolConfig, _: &mut Vec<String>) -> Option<()> {
        Some(())
    }

    fn describe(_: &str, _: &(), _: &SpoolConfig) -> String {
        "stdout (JSON lines)".into()
    }

    fn open(
        name: &str,
        _: &(),
        context: &mut OpenContext<'_>,
    ) -> Result<Box<dyn Output>, SinkError> {
        // Only the first stdout output writes; another would double every line.
        let out = context
            .stdout
            .take()
            .unwrap_or_else(|| Box::new(std::io::sink()));
        Ok(Box::new(StdoutOutput {
            name: name.to_owned(),
            out: BufWriter::new(out),
            lines: Vec::new(),
            flush_each: context.flush_each,
            format: context.stdout_format,
        }))
    }
}

struct StdoutOutput {
    name: String,
    out: BufWriter<Box<dyn Write + Send>>,
    lines: Vec<u8>,
    flush_each: bool,
    format: StdoutFormat,
}

impl Output for StdoutOutput {
    fn name(&self) -> &str {
        &self.name
    }

    fn queue(&mut self, record: &Record, _: &[u8]) -> Result<(), OutputError> {
        // JSON lines are written from the outputs' own (`flush`'s `lines`).
        if self.format == StdoutFormat::Text {
            self.lines
                .extend_from_slice(crate::record::text::line(record).as_bytes());
            self.lines.push(b'\n');
        }
        Ok(())
    }

    fn flush(&mut self, json_lines: &[u8]) -> Result<(), OutputError> {
        let fatal = |e| OutputError::Fatal(SinkError::Stdout(e));
        let lines = match self.format {
            StdoutFormat::Json => json_lines,
            StdoutFormat::Text => &self.lines,
        };
        self.out.write_all(lines).map_err(fatal)?;
        self.lines.clear();
        if self.flush_each {
            self.out.flush().map_err(fatal)?;
        }
        Ok(())
    }

    fn seal(&mut self, _: tokio::time::Instant, all: bool) -> Result<(), OutputError> {
        if all {
            self.out
                .flush()
                .map_err(|e| OutputError::Fatal(SinkError::Stdout(e)))?;
        }
        Ok(())
    }
}
