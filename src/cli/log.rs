//! saltsight's own log: tracing to stderr, every line through the redactor, so
//! no log line carries what a record would not (an upstream URL with its
//! password, a tag with a token).

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

use crate::config::{Config, LogFormat};
use crate::record::redact::Redactor;

/// Sets the global subscriber: text or JSON on stderr, at the configured level.
/// When stderr is the journal (systemd's `JOURNAL_STREAM`), text lines carry no
/// timestamp: the journal stamps every line already. The level can be changed later (SIGHUP)
/// through the returned [`LogLevel`]; the format cannot.
pub fn init(config: &Config, redactor: &Redactor) -> LogLevel {
    let (filter, handle) = reload::Layer::new(EnvFilter::new(&config.log.level));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(RedactedStderr(redactor.clone()))
        .with_ansi(ansi);
    let journal = stderr_is_the_journal();
    let registry = tracing_subscriber::registry().with(filter);
    match (config.log.format, journal) {
        (LogFormat::Json, _) => registry.with(lines.json()).init(),
        (LogFormat::Text, true) => registry.with(lines.without_time()).init(),
        (LogFormat::Text, false) => registry.with(lines).init(),
    }
    LogLevel(handle)
}

/// Whether stderr is the journal's stream: `JOURNAL_STREAM` names its device
/// and inode (`dev:ino`), and they must be stderr's, as systemd.exec(5) says (a
/// child of a service inherits the variable with stderr redirected elsewhere).
fn stderr_is_the_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = value.to_str().and_then(|v| v.split_once(':')) else {
        return false;
    };
    let Ok(stat) = nix::sys::stat::fstat(std::io::stderr()) else {
        return false;
    };
    dev.parse::<u64>().ok() == Some(stat.st_dev) && ino.parse::<u64>().ok() == Some(stat.st_ino)
}

/// The live log filter.
#[derive(Clone)]
pub struct LogLevel(reload::Handle<EnvFilter, Registry>);

impl LogLevel {
    /// Replaces the filter (a level or tracing directives, as `log.level`).
    pub fn set(&self, level: &str) -> Result<(), reload::Error> {
        self.0.reload(EnvFilter::new(level))
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
