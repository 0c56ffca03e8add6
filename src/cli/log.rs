//! saltsight's own log: tracing to stderr, every line through the redactor, so
//! no log line carries what a record would not (an upstream URL with its
//! password, a tag with a token).

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

use crate::config::{Config, LogFormat};
use crate::record::redact::Redactor;

/// Sets the global subscriber: text or JSON on stderr, at the configured level.
/// Under systemd (`JOURNAL_STREAM` set) text lines carry no timestamp: the
/// journal stamps every line already.
pub fn init(config: &Config, redactor: &Redactor) {
    let filter = tracing_subscriber::EnvFilter::new(&config.log.level);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(RedactedStderr(redactor.clone()))
        .with_ansi(ansi);
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    match (config.log.format, journal) {
        (LogFormat::Json, _) => builder.json().init(),
        (LogFormat::Text, true) => builder.without_time().init(),
        (LogFormat::Text, false) => builder.init(),
    }
}

/// Stderr, redacted line by line (tracing writes each event in one call).
pub struct RedactedStderr(pub Redactor);

pub struct LineWriter<'a>(&'a Redactor);

impl<'a> MakeWriter<'a> for RedactedStderr {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter(&self.0)
    }
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        io::stderr()
            .lock()
            .write_all(self.0.line(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}
