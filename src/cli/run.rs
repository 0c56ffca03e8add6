//! `saltsight run`: the agent. The pipeline (`pipeline::Agent`) over the live
//! bus, with its metrics endpoint, systemd's notify protocol and watchdog, and
//! config reloads on SIGHUP.

use std::sync::Arc;

use clap::Args;
use tokio::signal::unix::Signal;

use super::flags::{BusArgs, FormatArgs, Output, StateArgs, WebArgs};
use super::log::LogLevel;
use super::reload::Reloader;
use super::{Outcome, Session};
use crate::bus::ReaderStats;
use crate::config::Overrides;
use crate::metrics::server::MetricsServer;
use crate::pipeline::{AgentOptions, Assembly};
use crate::service::ServiceManager;
use crate::shutdown;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where records go
    #[arg(long, value_enum, default_value = "config")]
    pub output: Output,
    #[command(flatten)]
    pub format: FormatArgs,
    /// Run as root anyway (saltsight needs only read access to the bus socket:
    /// run it as the master's user or a member of its group)
    #[arg(long, env = "SALTSIGHT_ALLOW_ROOT")]
    pub allow_root: bool,
    #[command(flatten, next_help_heading = "Event bus")]
    pub bus: BusArgs,
    #[command(flatten, next_help_heading = "Metrics endpoint")]
    pub web: WebArgs,
    #[command(flatten, next_help_heading = "State")]
    pub state: StateArgs,
}

/// What `run` needs to reload its config on SIGHUP.
pub struct Reload {
    pub overrides: Overrides,
    pub log_level: LogLevel,
    /// SIGHUP, registered before the config was read.
    pub hangups: Option<std::io::Result<Signal>>,
}

pub async fn run(args: RunArgs, session: Session, reload: Reload) -> anyhow::Result<Outcome> {
    let Session {
        config,
        outputs,
        redactor,
        cancel,
    } = session;
    let assembly = Assembly::open(
        &config,
        &outputs,
        AgentOptions::service(args.output.into(), args.format.stdout_format()),
    )?;
    let reader_stats = Arc::new(ReaderStats::default());
    let metrics = assembly.metrics(&config, reader_stats.clone(), redactor.clone());
    // Bound before the pipeline starts: a port in use is an error now.
    let (server, web) = if config.metrics.enabled {
        let server = MetricsServer::bind(
            &config.metrics,
            metrics.registry.clone(),
            reader_stats.clone(),
            assembly.alert_webhook(&config, &redactor),
        )
        .await?;
        let web = server.web_switch();
        (Some(tokio::spawn(server.serve(cancel.clone()))), Some(web))
    } else {
        (None, None)
    };
    let service = ServiceManager::from_env();
    let reloader = Reloader::new(
        reload.overrides,
        config.clone(),
        reload.log_level,
        web,
        metrics.reloads.clone(),
    );
    match reload.hangups {
        Some(Ok(hangups)) => {
            tokio::spawn(reloader.on_hangups(hangups, service.clone(), cancel.clone()));
        }
        Some(Err(error)) => {
            tracing::warn!(%error, "Cannot listen for SIGHUP; config reloads are off.");
        }
        None => {}
    }
    tokio::spawn(
        service
            .clone()
            .follow_the_bus(reader_stats.clone(), config.bus.endpoint.clone()),
    );
    let stopping = service.clone();
    let stop_signal = cancel.clone();
    tokio::spawn(async move {
        stop_signal.cancelled().await;
        stopping.stopping("Stopping: draining the pipeline and flushing the outputs.");
    });
    let consumer = assembly
        .consumer(&config, cancel.clone())
        .reader_stats(reader_stats)
        .metrics(metrics.events.clone())
        .watchdog(service.watchdog());
    let (agent, senders) = assembly.agent(&config, redactor, metrics.observer)?;
    let sending = senders.spawn();
    let result = shutdown::within_grace(&cancel, consumer.run(agent)).await;
    sending.stop().await;
    if let Some(server) = server {
        server.abort();
    }
    // The agent ran and stopped as asked: bad frames it met are in its metrics
    // and logs, and are no reason for a service manager to call it failed.
    result?;
    Ok(Outcome::Ok)
}

impl super::Action for RunArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.bus.apply(o);
        self.web.apply(o);
        self.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, super::Failure> {
        let rt = super::async_runtime()?;
        // From here on a SIGHUP is a reload (handled once `run` runs), never
        // the default's exit.
        let hangups = {
            let _runtime = rt.enter();
            super::reload::listen_for_hangups()
        };
        let loaded = super::Loaded::read(&overrides)?;
        if let Some(why) =
            super::privilege::refuse_root(&loaded.config.bus.endpoint, self.allow_root)
        {
            return Err(super::Failure::new(super::exit::NO_PERMISSION, why).log("Refusing to run."));
        }
        let reload = Reload {
            overrides,
            log_level: loaded.log_level.clone(),
            hangups: Some(hangups),
        };
        loaded.serve(&rt, |session| run(self, session, reload))
    }
}
