//! saltsight watches a Salt master's event bus, read-only, and turns it into answers.
//!
//! Data flows one way (see ARCHITECTURE.md):
//!
//! ```text
//! bus (bytes → frames) → event (frames → typed events)
//!   → pipeline::Stages: pressure, triage → incident → correlate, jobs (with presence) → correlate, rollouts, drift
//!   → record (redacted) → sink | metrics | history | reactor (opt-in)
//! ```
//!
//! - [`label`], [`counter`], [`time`], [`ratelimit`], [`fifo`], [`cow`], [`minion_states`], [`names`], [`plain`]: leaves: closed label sets, a stage's counts, `Stamp`, log rate limits, a map bounded by count that forgets its oldest first, containers whose clone is a snapshot (copy on write, in parts), what a stage remembers per (minion, state), a list of names found by name, how a duration, a time, a list or a cut text is said to a person.
//! - [`bus`]: the publisher endpoint, the sans-IO frame splitter, the reader task, recordings.
//! - [`event`]: frame → [`event::Event`], borrowed and selective; no IO, no clock.
//! - [`jobs`]: job lifecycles and missing-return verdicts; a state machine fed events and time.
//! - [`triage`]: failed state runs → root-cause states, categories, fingerprints, groups.
//! - [`correlate`]: failures → the git commits of the state tree, per-minion history, rollouts.
//! - [`incident`]: external causes grouped by target across minions and jobs.
//! - [`pressure`]: the master itself saturated (its workers, the bus, its requests).
//! - [`drift`]: each change a state run makes: a commit's, drift put back or seen, or a state that never settles.
//! - [`master_processes`]: the salt-master's process tree from `/proc` (CPU, memory, by role).
//! - [`master_connections`]: which minions hold a connection to the publish port, from `/proc` and the minion data cache.
//! - [`master_keys`]: the master's accepted minion keys (`<pki_dir>/minions`).
//! - [`history`]: the records kept on the master (SQLite), and the answers the query commands give.
//! - [`record`]: the records emitted, with stable ids and their query columns (docs/records.md).
//! - [`config`]: saltsight's TOML, the Salt master's YAML, resolved into one validated [`config::Config`].
//! - [`sink`]: the outputs (stdout, file, http with its disk spool, the history) and their registry.
//! - [`metrics`]: the Prometheus catalog and the `/metrics` endpoint (docs/metrics.md).
//! - [`reactor`]: opt-in: verdicts and Alertmanager's alerts fired as `saltsight/` events through the master's pull socket, for Salt's Reactor (docs/reactor.md).
//! - [`service`], [`shutdown`]: systemd's notify protocol and watchdog; signals and the grace deadline.
//! - [`pipeline`]: the source, the consumer loop, the stages in order, the agent and the one way to build it.
//! - [`lab`]: a real Salt master and minions on loopback, for the tests and the demo.
//! - [`cli`]: the subcommands, each listed once in `cli`'s `subcommands!`.
#![forbid(unsafe_code)]

pub mod bus;
pub mod cli;
pub mod config;
pub mod correlate;
pub mod counter;
pub mod cow;
pub mod drift;
pub mod event;
pub mod fifo;
pub mod history;
pub mod incident;
pub mod jobs;
pub mod lab;
pub mod label;
pub mod master_connections;
pub mod master_keys;
pub mod master_processes;
pub mod metrics;
pub mod minion_states;
pub mod names;
pub mod pipeline;
pub mod plain;
pub mod pressure;
pub mod ratelimit;
pub mod reactor;
pub mod record;
pub mod service;
pub mod shutdown;
pub mod sink;
pub mod time;
pub mod triage;
