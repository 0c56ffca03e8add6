//! `saltsight check-config`: validate, then say where the bus is and whether this
//! user can reach it. Run after editing the config (`run` checks the same at start
//! and exits 64, before anything starts); an absent socket is reported, not
//! fatal (the master may start after saltsight).

use std::io::Write;

use clap::Args;

use crate::bus::Endpoint;
use crate::bus::endpoint::current_user;
use crate::config::Config;
use crate::sink::OutputSpec;

#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// Print a documented example config with every key at its default, and exit
    #[arg(long)]
    pub example: bool,
}

pub fn run(config: &Config, outputs: &[OutputSpec], out: &mut impl Write) -> std::io::Result<()> {
    match &config.file {
        Some(path) => writeln!(out, "config file: {}", path.display())?,
        None => writeln!(out, "config file: none (defaults)")?,
    }
    writeln!(out, "bus endpoint: {}", config.bus.endpoint)?;
    writeln!(out, "  from: {}", config.bus.endpoint_origin)?;
    writeln!(out, "max frame bytes: {}", config.bus.max_frame_bytes)?;
    writeln!(
        out,
        "queue: {} frames, {} bytes",
        config.bus.queue_frames, config.bus.queue_bytes
    )?;
    writeln!(out, "running as: {}", current_user())?;
    if let Endpoint::Unix(path) = &config.bus.endpoint {
        let status = match nix::unistd::access(
            path.as_path(),
            nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK,
        ) {
            Ok(()) => "present and connectable by this user".to_string(),
            Err(nix::errno::Errno::ENOENT) => "not present (is salt-master running?)".to_string(),
            Err(nix::errno::Errno::EACCES) => format!(
                "present but not connectable by this user ({})",
                config.bus.endpoint.who_can_read()
            ),
            Err(e) => format!("cannot be checked: {e}"),
        };
        writeln!(out, "socket: {status}")?;
    }
    for output in outputs {
        let what = output.settings.describe(&output.name, &config.spool);
        writeln!(out, "output {}: {what}", output.name)?;
    }
    for warning in &config.warnings {
        writeln!(out, "warning: {warning}")?;
    }
    writeln!(out, "config OK")
}
