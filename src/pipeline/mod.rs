//! The agent's core, out of the command line: where frames come from
//! ([`source`]), the consumer loop ([`consumer`]), the stages in order and what
//! they hand each other ([`stages`]), the clock they run on ([`clock`]), and the
//! handler that takes their records through redaction to the metrics and the
//! outputs ([`agent`]), and their memory across restarts ([`checkpoint`]).
//!
//! ```text
//! Source ─▶ Consumer (one bounded queue, one task) ─▶ Handler
//!                                                       └─ Agent: Stages (triage → jobs → correlate)
//!                                                                 ─▶ redact ─▶ log, metrics, outputs
//! ```
//!
//! `tail` and `capture` are handlers too (in `cli`); `run`, `replay`, `demo`
//! and `top` build the [`Agent`] one way ([`assembly`]), each choosing its
//! [`AgentOptions`].

pub mod agent;
pub mod assembly;
pub mod checkpoint;
pub mod clock;
pub mod consumer;
pub mod outputs;
pub mod source;
pub mod stages;

#[cfg(test)]
mod keys_agree;

pub use agent::Agent;
pub use assembly::{AgentOptions, Assembly, HistoryChoice, SourceChoice};
pub use checkpoint::Checkpointer;
pub use clock::Clock;
pub use consumer::{Consumer, Handler, Summary};
pub use outputs::{OutputChoice, load_config, open_outputs};
pub use source::Source;
pub use stages::Stages;
