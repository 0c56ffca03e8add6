//! `saltsight check-config`: validate, then say what `run` would do with it —
//! where the bus is and whether this user can connect to it now, the master id,
//! the deadlines, the git checkouts, the metrics address, the state directory
//! and each output — and try what can be tried: a connection to the bus (unix
//! or TCP) and each output's upstream (HEAD, or ClickHouse's `SELECT 1`), each
//! within [`PROBE_TIMEOUT`].
//!
//! Exit codes: an invalid config is 78 before anything here runs (`run` checks
//! the same at start); a bus this user may not open is 77; a bus or an output
//! that cannot be reached is 69. `--no-environment` checks the config alone.

use std::io::Write;
use std::time::Duration;

use clap::Args;
use humantime::format_duration;

use super::flags::{BusArgs, StateArgs, WebArgs};
use super::{Failure, connect_status, exit};
use crate::bus::Endpoint;
use crate::bus::endpoint::current_user;
use crate::config::Config;
use crate::config::metrics::{LabelChoice, ListenAddress};
use crate::sink::OutputSpec;

/// How long each probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// Print a documented example config with every key at its default, and exit
    #[arg(long)]
    pub example: bool,
    /// Check the config only: do not connect to the bus or the outputs
    #[arg(long)]
    pub no_environment: bool,
    #[command(flatten, next_help_heading = "Event bus")]
    pub bus: BusArgs,
    #[command(flatten, next_help_heading = "Metrics endpoint")]
    pub web: WebArgs,
    #[command(flatten, next_help_heading = "State")]
    pub state: StateArgs,
}

/// Writes the report; `Some` is what cannot be reached, with its exit code.
pub async fn run(
    args: &CheckConfigArgs,
    config: &Config,
    outputs: &[OutputSpec],
    out: &mut impl Write,
) -> std::io::Result<Option<Failure>> {
    // (exit code, what, why) of each thing that cannot be reached.
    let mut unreachable: Vec<(exit::Status, String, String)> = Vec::new();
    match &config.file {
        Some(path) => writeln!(out, "config file: {}", path.display())?,
        None => writeln!(out, "config file: none (defaults)")?,
    }
    writeln!(
        out,
        "master id: {} (from {})",
        config.master_id, config.master_id_origin
    )?;
    writeln!(out, "bus endpoint: {}", config.bus.endpoint)?;
    writeln!(out, "  from: {}", config.bus.endpoint_origin)?;
    writeln!(out, "running as: {}", current_user())?;
    if args.no_environment {
        writeln!(out, "bus: not tried (--no-environment)")?;
    } else {
        match probe_bus(&config.bus.endpoint).await {
            Ok(()) => writeln!(out, "bus: connected")?,
            Err((status, why)) => {
                writeln!(out, "bus: cannot connect: {why}")?;
                unreachable.push((status, "the event bus".into(), why));
            }
        }
    }
    writeln!(out, "max frame bytes: {}", config.bus.max_frame_bytes)?;
    writeln!(
        out,
        "queue: {} frames, {} bytes",
        config.bus.queue_frames, config.bus.queue_bytes
    )?;
    write_jobs(config, out)?;
    write_presence(config, args.no_environment, out)?;
    write_checkouts(config, out)?;
    write_drift(config, out)?;
    write_metrics(config, out)?;
    if let Some(why) = write_reactor(config, args.no_environment, out)? {
        unreachable.push((exit::UNAVAILABLE, "the master's pull socket".into(), why));
    }
    if config.state.checkpoint {
        writeln!(
            out,
            "state: checkpoint in {} every {}",
            config.state.dir.display(),
            format_duration(config.state.checkpoint_interval)
        )?;
    } else {
        writeln!(out, "state: no checkpoint (state.checkpoint = false)")?;
    }
    for output in outputs {
        let what = output.settings.describe(&output.name, &config.spool);
        writeln!(out, "output {}: {what}", output.name)?;
        let Some(probe) = output.settings.probe(PROBE_TIMEOUT) else {
            continue;
        };
        if args.no_environment {
            writeln!(out, "  not tried (--no-environment)")?;
            continue;
        }
        match probe.await {
            Ok(answer) => writeln!(out, "  reachable: {answer}")?,
            Err(why) => {
                writeln!(out, "  cannot be reached: {why}")?;
                unreachable.push((exit::UNAVAILABLE, format!("output {}", output.name), why));
            }
        }
    }
    for warning in &config.warnings {
        writeln!(out, "warning: {warning}")?;
    }
    if unreachable.is_empty() {
        writeln!(out, "config OK")?;
        return Ok(None);
    }
    let names: Vec<&str> = unreachable
        .iter()
        .map(|(_, what, _)| what.as_str())
        .collect();
    writeln!(out, "config valid, but cannot reach: {}", names.join(", "))?;
    // 77 when this user may not open the bus; otherwise 69.
    let status = unreachable
        .iter()
        .map(|(status, _, _)| *status)
        .find(|s| *s == exit::NO_PERMISSION)
        .unwrap_or(exit::UNAVAILABLE);
    let reasons: Vec<String> = unreachable
        .into_iter()
        .map(|(_, what, why)| format!("cannot reach {what}: {why}"))
        .collect();
    Ok(Some(Failure::new(status, reasons.join("; "))))
}

/// Connects once (and closes at once): what `run` would meet.
async fn probe_bus(endpoint: &Endpoint) -> Result<(), (exit::Status, String)> {
    match tokio::time::timeout(PROBE_TIMEOUT, endpoint.connect()).await {
        Ok(Ok(_stream)) => Ok(()),
        Ok(Err(error)) => Err((connect_status(&error), error.to_string())),
        Err(_) => Err((
            exit::UNAVAILABLE,
            format!("no connection to {endpoint} within {PROBE_TIMEOUT:?}"),
        )),
    }
}

fn write_jobs(config: &Config, out: &mut impl Write) -> std::io::Result<()> {
    let jobs = &config.jobs;
    let mut deadlines = format!("{} by default", format_duration(jobs.default_deadline));
    for (pattern, deadline) in &jobs.deadlines {
        deadlines.push_str(&format!("; {pattern} {}", format_duration(*deadline)));
    }
    writeln!(out, "deadlines: {deadlines}")?;
    writeln!(
        out,
        "late returns: taken for {} after a job closes",
        format_duration(jobs.late_window)
    )
}

/// Which presence source tells down from hung, and what it sees now.
fn write_presence(
    config: &Config,
    no_environment: bool,
    out: &mut impl Write,
) -> std::io::Result<()> {
    use crate::config::presence::ConnectionsSource;
    use crate::master_connections::Seen;
    let (publish_port, cachedir, origin) = match &config.presence.connections {
        ConnectionsSource::On {
            publish_port,
            cachedir,
            origin,
        } => (*publish_port, cachedir, origin),
        ConnectionsSource::Off { why } => {
            return writeln!(
                out,
                "presence: salt/presence events only, when the master fires them (connections off: {why})"
            );
        }
    };
    writeln!(
        out,
        "presence: the master's connections to port {publish_port}, minions by the grains in {} (from {origin}); and salt/presence events when the master fires them",
        cachedir.display()
    )?;
    if no_environment {
        return writeln!(out, "  not read (--no-environment)");
    }
    let Some(mut watch) = config.presence.connection_watch(config.jobs.max_minions) else {
        return Ok(());
    };
    match watch.sample() {
        Ok(view) => {
            let layout = match watch.cache().layout() {
                Some(crate::master_connections::Layout::GrainsBank) => "grains/ (Salt 3007+)",
                Some(crate::master_connections::Layout::MinionsData) => "minions/ (Salt 3006)",
                None => "none",
            };
            let counts = watch.cache().counts;
            writeln!(
                out,
                "  now: {} connections; {} minions in the cache ({layout}): {} connected, {} not connected, {} not told (an address shared by several minions: {}){}",
                view.connections,
                counts.minions,
                view.count(|s| matches!(s, Seen::Connected { .. })),
                view.count(|s| *s == Seen::NotConnected),
                view.count(|s| *s == Seen::Unclear),
                view.shared_addresses,
                if counts.unreadable + counts.refused > 0 {
                    format!(
                        "; {} cache files unreadable, {} refused",
                        counts.unreadable, counts.refused
                    )
                } else {
                    String::new()
                }
            )
        }
        Err(error) => writeln!(
            out,
            "  cannot read it now: {error} (verdicts fall back to presence events and find_job)"
        ),
    }
}

fn write_checkouts(config: &Config, out: &mut impl Write) -> std::io::Result<()> {
    if config.correlate.repos.is_empty() {
        return writeln!(
            out,
            "git checkouts: none (no file_roots or pillar_roots in a git checkout, no gitfs cache, none configured)"
        );
    }
    writeln!(out, "git checkouts:")?;
    for repo in &config.correlate.repos {
        writeln!(
            out,
            "  {}: {} at {}{}",
            repo.name,
            repo.dir.display(),
            repo.reference,
            if repo.states { "" } else { " (pillar)" }
        )?;
    }
    Ok(())
}

/// Whether drift is judged, and against which state tree.
fn write_drift(config: &Config, out: &mut impl Write) -> std::io::Result<()> {
    let tree = config.correlate.repos.iter().find(|r| r.states);
    match (config.drift.enabled, tree) {
        (false, _) => writeln!(out, "drift: off (drift.enabled = false)"),
        (true, None) => writeln!(
            out,
            "drift: not judged (no watched state tree says which commit a run applied)"
        ),
        (true, Some(repo)) => writeln!(
            out,
            "drift: each state run's changes judged against the commits of {} ({} runs in a row make a state non-idempotent)",
            repo.name, config.drift.never_settles_after
        ),
    }
}

/// What `[reactor]` fires, where, and whether the pull socket is there (a
/// unix socket is looked at, never connected to); why not, if it is not.
fn write_reactor(
    config: &Config,
    no_environment: bool,
    out: &mut impl Write,
) -> std::io::Result<Option<String>> {
    let reactor = &config.reactor;
    if !reactor.enabled {
        writeln!(
            out,
            "reactor: off (nothing is written to the master's bus; reactor.enabled = false)"
        )?;
        return Ok(None);
    }
    let kinds: Vec<&str> = reactor.fire.iter().map(|k| k.as_str()).collect();
    writeln!(
        out,
        "reactor: fires {} through {} ({}), at most {}/s (burst {})",
        if kinds.is_empty() {
            "no verdicts".to_string()
        } else {
            kinds.join(", ")
        },
        reactor.endpoint,
        reactor.endpoint_origin,
        reactor.max_per_second,
        reactor.burst
    )?;
    if reactor.alerts {
        writeln!(
            out,
            "reactor alerts: Alertmanager's webhook at POST {} on {} (at most {} bytes)",
            crate::metrics::server::ALERTS_PATH,
            config.metrics.listen,
            reactor.alerts_max_bytes
        )?;
    }
    let crate::bus::Endpoint::Unix(path) = &reactor.endpoint else {
        writeln!(out, "  pull socket: TCP, not tried")?;
        return Ok(None);
    };
    if no_environment {
        writeln!(out, "  pull socket: not tried (--no-environment)")?;
        return Ok(None);
    }
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            writeln!(out, "  pull socket: present")?;
            Ok(None)
        }
        Ok(_) => {
            let why = format!("{} is not a socket", path.display());
            writeln!(out, "  pull socket: {why}")?;
            Ok(Some(why))
        }
        Err(e) => {
            let why = format!("{}: {e}", path.display());
            writeln!(out, "  pull socket: {why}")?;
            Ok(Some(why))
        }
    }
}

fn write_metrics(config: &Config, out: &mut impl Write) -> std::io::Result<()> {
    let metrics = &config.metrics;
    if !metrics.enabled {
        return writeln!(out, "metrics: off (metrics.enabled = false)");
    }
    let scope = match metrics.listen {
        ListenAddress::Any(_) => "every interface, IPv6 and IPv4".to_string(),
        ListenAddress::Addr(addr) if addr.ip().is_loopback() => "loopback only".to_string(),
        ListenAddress::Addr(addr) if addr.ip().is_unspecified() => "every interface".to_string(),
        ListenAddress::Addr(addr) => format!("{} only", addr.ip()),
    };
    let web = match &metrics.web {
        None => "no TLS, no basic auth".to_string(),
        Some(web) => format!(
            "{}, {} (web config {})",
            if web.tls.is_some() { "TLS" } else { "no TLS" },
            if web.basic_auth_users.is_empty() {
                "no basic auth"
            } else {
                "basic auth"
            },
            web.path.display()
        ),
    };
    writeln!(
        out,
        "metrics: /metrics on {} ({scope}; {web})",
        metrics.listen
    )?;
    let functions = match &metrics.functions {
        LabelChoice::Listed(list) => format!("the {} listed in metrics.functions", list.len()),
        LabelChoice::Learned { max, .. } => {
            format!("each function seen, up to {max} (metrics.max_functions)")
        }
    };
    writeln!(out, "metrics: function labels: {functions}, then \"other\"")?;
    let Some(compat) = &metrics.salt_exporter else {
        return Ok(());
    };
    let keys = match &compat.minion_keys {
        None => "no accepted keys (health_minions off, or no master config)".to_string(),
        Some(dir) => match crate::master_keys::accepted(dir, metrics.max_minions) {
            Ok(keys) => format!("{} accepted keys in {}", keys.len(), dir.display()),
            Err(error) => format!(
                "accepted keys unreadable in {} ({error}): salt_health_minions_total stays 0",
                dir.display()
            ),
        },
    };
    writeln!(out, "metrics: salt-exporter's series on; {keys}")
}

impl super::Action for CheckConfigArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.bus.apply(o);
        self.web.apply(o);
        self.state.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<super::Outcome, Failure> {
        if self.example {
            print!("{}", crate::config::example::example());
            return Ok(super::Outcome::Ok);
        }
        let rt = super::async_runtime()?;
        let loaded = super::Loaded::read(&overrides)?;
        let report = rt.block_on(run(
            &self,
            &loaded.config,
            &loaded.outputs,
            &mut std::io::stdout().lock(),
        ));
        match report {
            Ok(None) => Ok(super::Outcome::Ok),
            Ok(Some(failure)) => Err(failure),
            Err(e) => Err(Failure::runtime(e.to_string())),
        }
    }
}
