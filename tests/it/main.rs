//! The one integration test binary: captures through the CLI, the CLI's contract,
//! and saltsight against a real Salt master (see `support::lab`).

mod alerts;
mod captures;
mod cli;
mod clickhouse;
mod clickhouse_fleet;
mod drift_live;
mod faults;
mod history_live;
mod history_scale;
mod incidents_live;
mod jobs;
mod jobs_live;
mod map;
mod metrics_live;
mod mutations;
mod otlp;
mod otlp_live;
mod presence_live;
mod pressure_live;
mod reactor_live;
mod redact_live;
mod rollouts_live;
mod salt_exporter_live;
mod salt_live;
mod service;
mod service_live;
mod support;
mod systemd_live;
mod tidy;
mod top_live;
mod triage;
mod triage_corpus;
mod triage_live;
mod upstream;
mod upstream_live;
