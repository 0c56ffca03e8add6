//! SIGHUP: read the config again and apply what can change while running.
//!
//! Applied at once: `log.level`, and the metrics web config (TLS certificate and
//! key re-read, so a rotated certificate is served; basic-auth users; headers).
//! Everything else (the bus endpoint, outputs and spool, jobs, triage, correlate,
//! redaction, log format, the metrics listener) needs a restart: a reload that
//! changes them says which, and keeps running as it was. A config that does not
//! load leaves the running one in place; `saltsight_config_last_reload_successful`
//! says so, like Prometheus's own.

use std::sync::Arc;

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::cli::log::LogLevel;
use crate::config::{Config, Overrides};
use crate::metrics::collect::ConfigReloads;
use crate::metrics::server::WebSwitch;
use crate::service::ServiceManager;

/// What a reload did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// Applied now.
    pub applied: Vec<&'static str>,
    /// Changed in the file, kept as running until a restart.
    pub need_restart: Vec<&'static str>,
}

impl Reloaded {
    /// What was applied, for the log: never an empty field.
    pub fn applied_text(&self) -> String {
        if self.applied.is_empty() {
            "nothing (log.level and the web config are as they were)".into()
        } else {
            self.applied.join(", ")
        }
    }
}

/// Holds the running config and what can be changed in place.
pub struct Reloader {
    overrides: Overrides,
    running: Config,
    log: LogLevel,
    /// The metrics server's, when it runs.
    web: Option<WebSwitch>,
    reloads: Arc<ConfigReloads>,
}

impl Reloader {
    pub fn new(
        overrides: Overrides,
        running: Config,
        log: LogLevel,
        web: Option<WebSwitch>,
        reloads: Arc<ConfigReloads>,
    ) -> Self {
        Reloader {
            overrides,
            running,
            log,
            web,
            reloads,
        }
    }

    /// Loads the config again and applies it; on any error nothing changes.
    pub fn reload(&mut self) -> anyhow::Result<Reloaded> {
        let result = self.try_reload();
        self.reloads.record(result.is_ok());
        result
    }

    fn try_reload(&mut self) -> anyhow::Result<Reloaded> {
        let (new, _) = crate::pipeline::load_config(&self.overrides)?;
        let mut done = Reloaded::default();
        // The web config is built (and may fail) before anything is applied;
        // setting the level fails only without a subscriber.
        if let Some(web) = &self.web {
            web.replace(new.metrics.web.as_ref())?;
            if new.metrics.web.is_some() || self.running.metrics.web.is_some() {
                done.applied.push("metrics web config");
            }
        }
        if new.log.level != self.running.log.level {
            self.log.set(&new.log.level)?;
            done.applied.push("log.level");
        }
        done.need_restart = needs_restart(&self.running, &new, self.web.is_some());
        for warning in &new.warnings {
            warn!("{warning}");
        }
        // What needs a restart keeps running as it was, so is remembered as such.
        self.running.log.level = new.log.level;
        self.running.metrics.web = new.metrics.web;
        Ok(done)
    }

    /// Reloads on every SIGHUP until `cancel`, telling the service manager.
    /// `hangups` is registered as the process starts ([`listen_for_hangups`]),
    /// so a SIGHUP before this runs is a reload, not the default's exit.
    pub async fn on_hangups(
        mut self,
        mut hangups: Signal,
        service: ServiceManager,
        cancel: CancellationToken,
    ) {
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                Some(()) = hangups.recv() => {}
            }
            service.reload_begins();
            let result = self.reload();
            match &result {
                Ok(done) => {
                    info!(applied = %done.applied_text(), "Reloaded the config (SIGHUP).");
                    if !done.need_restart.is_empty() {
                        warn!(
                            changed = done.need_restart.join(", "),
                            "Changed in the config but not applied: restart saltsight for these."
                        );
                    }
                }
                Err(e) => error!("Config reload failed; the running config stays: {e:#}"),
            }
            service.reload_ended(result.is_ok());
        }
    }
}

/// Takes SIGHUP from its default (exit) to a queue that [`Reloader::on_hangups`]
/// reads. Call it first thing in the runtime.
pub fn listen_for_hangups() -> std::io::Result<Signal> {
    signal(SignalKind::hangup())
}

/// The parts of `new` that differ from `running` and apply only at a start.
/// Every section is named (the destructuring does not compile without a new
/// one), so none changes unnoticed.
fn needs_restart(running: &Config, new: &Config, web_live: bool) -> Vec<&'static str> {
    let mut changed = Vec::new();
    let mut differs = |name: &'static str, differ: bool| {
        if differ {
            changed.push(name);
        }
    };
    let Config {
        warnings: _,
        master_id,
        master_id_origin: _,
        bus,
        jobs,
        triage,
        correlate,
        log,
        spool,
        state,
        incidents,
        presence,
        pressure,
        rollouts,
        drift,
        history,
        outputs,
        metrics,
        redact,
        reactor,
        file: _,
    } = new;
    differs("master_id", &running.master_id != master_id);
    differs("bus", &running.bus != bus);
    differs("jobs", &running.jobs != jobs);
    differs("triage", &running.triage != triage);
    differs("correlate", &running.correlate != correlate);
    // log.level is applied live.
    differs("log.format", running.log.format != log.format);
    differs("spool", &running.spool != spool);
    differs("state", &running.state != state);
    differs("incidents", &running.incidents != incidents);
    differs("presence", &running.presence != presence);
    differs("pressure", &running.pressure != pressure);
    differs("rollouts", &running.rollouts != rollouts);
    differs("drift", &running.drift != drift);
    differs("history", &running.history != history);
    differs("output", &running.outputs != outputs);
    differs("redact", &running.redact != redact);
    differs("reactor", &running.reactor != reactor);
    let without_web = |m: &crate::config::metrics::MetricsConfig| {
        let mut metrics = m.clone();
        metrics.web = None;
        metrics
    };
    differs(
        "metrics",
        without_web(&running.metrics) != without_web(metrics),
    );
    differs(
        "metrics web config (no metrics server runs)",
        !web_live && running.metrics.web != metrics.web,
    );
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("saltsight.toml");
        std::fs::write(
            &path,
            format!("[bus]\nendpoint = \"unix:/unused\"\n[correlate]\ndiscover = false\n{extra}"),
        )
        .expect("write");
        crate::pipeline::load_config(&crate::config::Overrides {
            config: Some(path),
            ..Default::default()
        })
        .expect("loads")
        .0
    }

    /// Every section but `log.level` and the web config waits for a restart,
    /// and is named: the ones added after this list was first written too.
    #[test]
    fn sections_that_apply_at_start_are_named_when_they_change() {
        let running = config("[log]\nlevel = \"info\"\n");
        let new = config(
            "[log]\nlevel = \"debug\"\n[drift]\nenabled = false\n[history]\nenabled = false\n[reactor]\nenabled = true\n",
        );
        assert_eq!(
            needs_restart(&running, &new, true),
            ["drift", "history", "reactor"]
        );
        assert!(needs_restart(&running, &running, true).is_empty());
    }
}
