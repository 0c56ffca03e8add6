//! Which outputs a subcommand opens: the config's, stdout only, or none.

use crate::config::Config;
use crate::config::outputs::OutputConfig;
use crate::sink::{Outputs, Senders, SinkError};

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

/// Opens the outputs `choice` selects. Live (`Clock::Wall`), stdout is flushed
/// after each event; replay lets it buffer.
pub fn open_outputs(
    config: &Config,
    choice: OutputChoice,
    clock: Clock,
) -> Result<(Outputs, Senders), SinkError> {
    let stdout_only = [OutputConfig::stdout()];
    let configs: &[OutputConfig] = match choice {
        OutputChoice::Config => &config.outputs,
        OutputChoice::Stdout => &stdout_only,
        OutputChoice::None => &[],
    };
    let flush_each = clock == Clock::Wall;
    Outputs::open(
        configs,
        &config.spool,
        Box::new(std::io::stdout()),
        flush_each,
    )
}
