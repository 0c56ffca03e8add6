//! Configuration in two layers: [`file`] as written (unknown keys rejected), then
//! [`resolve`]d with the environment, the flags and the Salt master's own config
//! ([`master`]) into a validated [`Config`].

pub mod correlate;
pub mod defaults;
pub mod drift;
pub mod duration;
pub mod example;
pub mod fields;
pub mod file;
pub mod glob;
pub mod history;
pub mod incidents;
pub mod master;
pub mod metrics;
pub mod model;
pub mod presence;
pub mod pressure;
pub mod reactor;
pub mod redact;
pub mod resolve;
pub mod rollouts;
pub mod salt_exporter;
pub mod spool;
pub mod state;
pub mod web;
pub mod yaml_bounds;

pub use resolve::{
    BusConfig, Config, ConfigErrors, CorrelateConfig, JobsConfig, LogConfig, LogFormat, Overrides,
    RepoSpec, TriageConfig, load, load_with,
};
