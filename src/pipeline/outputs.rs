//! The config with its outputs resolved by their kinds, and which outputs a
//! subcommand opens: the config's, stdout only, or none.

use crate::config::spool::SpoolConfig;
use crate::config::{Config, ConfigErrors, Overrides};
use crate::sink::stdout::StdoutFormat;
use crate::sink::{OutputSpec, Outputs, Senders, SinkError, resolve_outputs};

use super::clock::Clock;

/// Where records go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputChoice {
    /// The config's `[[output]]`s (stdout when it has none).
    Config,
    /// Records as JSON lines on stdout only.
    Stdout,
    /// No records (logs and counters only).
    None,
}

/// Reads and validates the whole config, each `[[output]]` by its kind's own
/// rules; every problem of either is listed.
pub fn load_config(overrides: &Overrides) -> Result<(Config, Vec<OutputSpec>), ConfigErrors> {
    crate::config::load_with(overrides, resolve_outputs)
}

/// Opens the outputs `choice` selects. Live (`Clock::Wall`), stdout is flushed
/// after each event; replay lets it buffer.
pub fn open_outputs(
    specs: &[OutputSpec],
    spool: &SpoolConfig,
    choice: OutputChoice,
    stdout_format: StdoutFormat,
    clock: Clock,
) -> Result<(Outputs, Senders), SinkError> {
    let stdout_only = [OutputSpec::stdout()];
    let specs: &[OutputSpec] = match choice {
        OutputChoice::Config => specs,
        OutputChoice::Stdout => &stdout_only,
        OutputChoice::None => &[],
    };
    let flush_each = clock == Clock::Wall;
    Outputs::open(
        specs,
        spool,
        Box::new(std::io::stdout()),
        stdout_format,
        flush_each,
    )
}
