//! The output seam. An output kind ([`OutputKind`]) is one file (or folder) of
//! `sink`: its keys as written (a serde struct, unknown keys refused), its
//! resolved settings, what `check-config` says of it, and how it opens into an
//! [`Output`]. The registry below lists the kinds; adding one is adding a line.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

use serde::de::DeserializeOwned;

use super::deliver::Delivery;
use super::{OutputSettings, SinkError};
use crate::config::fields;
use crate::config::spool::{RawOutput, SpoolConfig};
use crate::record::Record;

/// A kind of output, as `[[output]] type = "..."` names it.
pub trait OutputKind {
    /// Its `type`.
    const TYPE: &'static str;
    /// Its keys as written, besides `type` and `name` (`deny_unknown_fields`).
    type Section: DeserializeOwned;
    /// Resolved and checked, ready to open.
    type Settings: fmt::Debug + Clone + PartialEq;

    /// Checks the section, every problem into `problems`.
    fn resolve(
        section: Self::Section,
        spool: &SpoolConfig,
        problems: &mut Vec<String>,
    ) -> Option<Self::Settings>;

    /// One line for `check-config`.
    fn describe(name: &str, settings: &Self::Settings, spool: &SpoolConfig) -> String;

    /// For `check-config`: reaches what the output writes to, within `timeout`;
    /// `None` when there is nothing to reach.
    fn probe(_settings: &Self::Settings, _timeout: Duration) -> Option<Probe> {
        None
    }

    /// Opens it; an output that delivers in the background adds its sender to
    /// `deliveries`.
    fn open(
        name: &str,
        settings: &Self::Settings,
        context: &mut OpenContext<'_>,
    ) -> Result<Box<dyn Output>, SinkError>;
}

/// A reachability check: `Ok` says what answered, `Err` why it cannot be reached.
pub type Probe = Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;

/// How records look on standard output (the `stdout` output's form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdoutFormat {
    /// JSON lines: the contract, for pipes and the journal.
    #[default]
    Json,
    /// One readable line per record (`record::text`), for a terminal.
    Text,
}

/// What opening an output may need and give back.
pub struct OpenContext<'a> {
    pub spool: &'a SpoolConfig,
    /// The outputs' counts, for an output with a bound of its own to count.
    pub counts: &'a std::sync::Arc<super::OutputCounts>,
    /// Standard output, for the first output that takes it.
    pub stdout: &'a mut Option<Box<dyn std::io::Write + Send>>,
    /// Flush stdout after each event (live); replay lets it buffer.
    pub flush_each: bool,
    /// How records look on stdout.
    pub stdout_format: StdoutFormat,
    /// Senders to start on the runtime (one per spooled output).
    pub deliveries: &'a mut Vec<Delivery>,
}

/// A record an output could not take, for the count and the log.
#[derive(Debug)]
pub struct Lost {
    pub records: u64,
    /// A bounded label for the rate-limited log (`file_write`, `spool_write`).
    pub what: &'static str,
    pub error: String,
}

/// Why an output call failed.
#[derive(Debug)]
pub enum OutputError {
    /// Records lost (counted and logged); the output goes on.
    Lost(Lost),
    /// The output cannot go on (stdout closed): the run stops.
    Fatal(SinkError),
}

/// One opened output, fed from the consumer task.
pub trait Output: Send {
    fn name(&self) -> &str;
    /// Takes one redacted record; `json` is its ndjson line, made once for all
    /// outputs. Writes happen in [`Output::flush`] and [`Output::flush_part`].
    fn queue(&mut self, record: &Record, json: &[u8]) -> Result<(), OutputError>;
    /// Writes what was queued: at the end of each read. `lines` are the
    /// ndjson lines of every record queued since the last write, in order,
    /// one after another (the ones [`Output::queue`] was given): an output
    /// that writes them as they are writes these, with no copy of its own.
    fn flush(&mut self, lines: &[u8]) -> Result<(), OutputError>;
    /// Writes what was queued before the read's end, as the read made more
    /// than [`super::WRITE_EVERY_BYTES`] of lines. An output that must see
    /// the whole read first (the Reactor's verdicts, gathered per job) waits
    /// for [`Output::flush`].
    fn flush_part(&mut self, lines: &[u8]) -> Result<(), OutputError> {
        self.flush(lines)
    }
    /// A durable output (a spool) is flushed before the others, so that no
    /// record is shown before it is safe.
    fn durable(&self) -> bool {
        false
    }
    /// When it next needs [`Output::seal`] (a batch reaching its age).
    fn next_seal_at(&self) -> Option<Instant> {
        None
    }
    /// Seals what is due at `now` (`all`: everything open, at the end).
    fn seal(&mut self, _now: Instant, _all: bool) -> Result<(), OutputError> {
        Ok(())
    }
}

/// An output resolved from `[[output]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSpec {
    pub name: String,
    pub settings: OutputSettings,
}

impl OutputSpec {
    /// Records as JSON lines on stdout (when no output is configured, and `run
    /// --output stdout`).
    pub fn stdout() -> Self {
        Self {
            name: "stdout".into(),
            settings: OutputSettings::Stdout(()),
        }
    }
}

/// Makes the registry from its list, one line per kind: `Variant => kind type`
/// (the list is in `sink/mod.rs`).
macro_rules! output_kinds {
    ($($variant:ident => $kind:ty),+ $(,)?) => {
        /// Every kind's settings.
        // Made once per output at start: the largest kind's size costs nothing.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq)]
        pub enum OutputSettings {
            $($variant(<$kind as $crate::sink::output::OutputKind>::Settings)),+
        }

        /// Every kind's `type`.
        pub const TYPES: &[&str] = &[$(<$kind as $crate::sink::output::OutputKind>::TYPE),+];

        impl OutputSettings {
            pub(crate) fn resolve(
                raw: &$crate::config::spool::RawOutput,
                spool: &$crate::config::spool::SpoolConfig,
                problems: &mut Vec<String>,
            ) -> Option<Self> {
                $(
                    if raw.kind == <$kind as $crate::sink::output::OutputKind>::TYPE {
                        let section = $crate::sink::output::section::<<$kind as $crate::sink::output::OutputKind>::Section>(raw, problems)?;
                        return <$kind as $crate::sink::output::OutputKind>::resolve(section, spool, problems)
                            .map(OutputSettings::$variant);
                    }
                )+
                problems.push(format!("type {:?} is not one of {}", raw.kind, TYPES.join(", ")));
                None
            }

            /// One line for `check-config`.
            pub fn describe(&self, name: &str, spool: &$crate::config::spool::SpoolConfig) -> String {
                match self {
                    $(OutputSettings::$variant(s) => <$kind as $crate::sink::output::OutputKind>::describe(name, s, spool)),+
                }
            }

            /// `check-config`'s reachability check, if the kind has one.
            pub fn probe(&self, timeout: std::time::Duration) -> Option<$crate::sink::output::Probe> {
                match self {
                    $(OutputSettings::$variant(s) => <$kind as $crate::sink::output::OutputKind>::probe(s, timeout)),+
                }
            }

            pub(crate) fn open(
                &self,
                name: &str,
                context: &mut $crate::sink::output::OpenContext<'_>,
            ) -> Result<Box<dyn $crate::sink::output::Output>, $crate::sink::SinkError> {
                match self {
                    $(OutputSettings::$variant(s) => <$kind as $crate::sink::output::OutputKind>::open(name, s, context)),+
                }
            }
        }
    };
}

pub(crate) use output_kinds;

/// A kind's section from its table: every unknown key named, then its values
/// read (`type` and `name` are the list's, not the kind's).
pub(crate) fn section<S: DeserializeOwned>(
    raw: &RawOutput,
    problems: &mut Vec<String>,
) -> Option<S> {
    let mut table = raw.table.clone();
    table.remove("type");
    table.remove("name");
    let unknown = fields::unknown::<S>(&table);
    if !unknown.is_empty() {
        for key in &unknown {
            problems.push(format!(
                "`{key}` is not a key of {:?} outputs (they take: {})",
                raw.kind,
                fields::of::<S>().join(", ")
            ));
        }
        return None;
    }
    // Read back from text, so that an error has a place to name its key by.
    let text = toml::to_string(&table).unwrap_or_default();
    match toml::from_str::<S>(&text) {
        Ok(section) => Some(section),
        Err(e) => {
            let key = e.span().and_then(|span| key_at(&text, span.start));
            let message = e.message().trim_end();
            problems.push(match key {
                Some(key) => format!("`{key}`: {message}"),
                None => message.to_string(),
            });
            None
        }
    }
}

/// The key of the `key = value` line holding `offset` of `text`.
fn key_at(text: &str, offset: usize) -> Option<&str> {
    let start = text.get(..offset)?.rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let key = line.split('=').next()?.trim();
    (!key.is_empty() && !key.starts_with('[')).then_some(key)
}

/// The outputs of `[[output]]`, each resolved by its kind; problems are named
/// with the output's index and name.
pub fn resolve_outputs(
    raw: &[RawOutput],
    spool: &SpoolConfig,
    errors: &mut Vec<String>,
) -> Vec<OutputSpec> {
    let mut specs = Vec::new();
    for output in raw {
        let mut problems = Vec::new();
        let settings = OutputSettings::resolve(output, spool, &mut problems);
        errors.extend(
            problems
                .into_iter()
                .map(|p| format!("{}: {p}", output.at())),
        );
        if let Some(settings) = settings {
            specs.push(OutputSpec {
                name: output.name.clone(),
                settings,
            });
        }
    }
    specs
}

/// The outputs a config's `[[output]]` tables say, or what is wrong with them.
#[cfg(test)]
pub(crate) fn resolve(text: &str) -> Result<Vec<OutputSpec>, Vec<String>> {
    #[derive(serde::Deserialize)]
    struct Doc {
        #[serde(default)]
        output: Vec<toml::Table>,
    }
    let doc: Doc = toml::from_str(text).expect("toml");
    let mut errors = Vec::new();
    let raw = crate::config::spool::raw_outputs(&doc.output, &mut errors);
    let specs = resolve_outputs(&raw, &SpoolConfig::default(), &mut errors);
    if errors.is_empty() {
        Ok(specs)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_output_means_stdout() {
        assert_eq!(resolve("").unwrap(), vec![OutputSpec::stdout()]);
    }

    #[test]
    fn every_problem_of_every_output_is_named_with_its_index() {
        let errors = resolve(
            "[[output]]\ntype = \"http\"\nname = \"a\"\nurl = \"https://u:hunter2@h/\"\n\n[[output]]\ntype = \"http\"\nurl = \"ftp://x\"\nheaders = { Authorization = \"Bearer x\" }\nbearer_token_file = \"/nonexistent/token\"\nbatch_max_age = \"soon\"\n\n[[output]]\ntype = \"file\"\nurl = \"http://x\"\nkeep = 3\nhost = \"y\"\n\n[[output]]\ntype = \"file\"\npath = \"/tmp/x\"\n\n[[output]]\ntype = \"kafka\"\n\n[[output]]\ntype = \"stdout\"\nname = \"s\"\ngzip = true\n",
        )
        .unwrap_err();
        let all = errors.join("\n");
        for expected in [
            "must start with http:// or https://",
            "url holds credentials",
            "Authorization header may not be written inline",
            "cannot read bearer_token_file /nonexistent/token",
            "batch_max_age",
            "output[2] (file): `url` is not a key of \"file\" outputs",
            "output[2] (file): `host` is not a key of \"file\" outputs",
            "two outputs are named \"file\"",
            "output[4] (kafka): type \"kafka\" is not one of stdout, file, http",
            "output[5] (s): `gzip` is not a key of \"stdout\" outputs",
        ] {
            assert!(all.contains(expected), "{expected:?} not in:\n{all}");
        }
        assert!(!all.contains("hunter2"), "a credential in an error: {all}");
        // The redaction every error passes does not garble it.
        let redactor = crate::record::redact::Redactor::new(&Default::default()).unwrap();
        let shown = redactor.line(&all);
        assert!(
            shown.contains("/nonexistent/token (No such file or directory"),
            "{shown}"
        );
    }

    #[test]
    fn a_file_output_that_is_a_directory_is_named_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let errors = resolve(&format!(
            "[[output]]\ntype = \"file\"\npath = {:?}\n",
            dir.path().display().to_string()
        ))
        .unwrap_err();
        assert!(errors[0].contains("is a directory"), "{errors:?}");
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let errors = resolve(&format!(
            "[[output]]\ntype = \"file\"\npath = {:?}\n",
            file.join("records.jsonl").display().to_string()
        ))
        .unwrap_err();
        assert!(errors[0].contains("is not a directory"), "{errors:?}");
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named() {
        let errors = resolve("[[output]]\ntype = \"file\"\npath = \"/tmp/x\"\nkeep = \"many\"\n")
            .unwrap_err();
        assert_eq!(
            errors,
            ["output[0] (file): `keep`: invalid type: string \"many\", expected u64"]
        );
    }
}
