//! The command line: clap types and one file per subcommand.

pub mod capture;
pub mod check_config;
pub mod demo;
pub mod generate;
pub mod log;
pub mod privilege;
pub mod reload;
pub mod replay;
pub mod run;
pub mod tail;
pub mod tail_format;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Overrides};
use crate::pipeline::Summary;
use crate::record::redact::Redactor;
use crate::shutdown;
use crate::sink::OutputSpec;

/// Watches a Salt master's event bus, read-only, and reports on jobs, returns and
/// failures. It never sends anything to the master.
#[derive(Debug, Parser)]
#[command(name = "saltsight", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// saltsight's config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]
    #[arg(long, global = true, env = "SALTSIGHT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The Salt master's config, read for sock_dir, root_dir, ipc_mode and
    /// tcp_master_pub_port (master.d/*.conf beside it too) [default: /etc/salt/master]
    #[arg(
        long,
        global = true,
        env = "SALTSIGHT_MASTER_CONFIG",
        value_name = "FILE"
    )]
    pub master_config: Option<PathBuf>,
    /// The master's event publisher, overriding its config:
    /// unix:/var/run/salt/master/master_event_pub.ipc or tcp:127.0.0.1:4512
    #[arg(
        long,
        global = true,
        env = "SALTSIGHT_ENDPOINT",
        value_name = "ENDPOINT"
    )]
    pub endpoint: Option<String>,
    /// Largest frame accepted, in bytes (highstate returns of several MB are normal)
    /// [default: 67108864]
    #[arg(
        long,
        global = true,
        env = "SALTSIGHT_MAX_FRAME_BYTES",
        value_name = "BYTES"
    )]
    pub max_frame_bytes: Option<u64>,
    /// Log level or tracing filter (error, warn, info, debug, trace) [default: info]
    #[arg(long, global = true, env = "SALTSIGHT_LOG_LEVEL", value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Log format on stderr: text or json [default: text]
    #[arg(
        long,
        global = true,
        env = "SALTSIGHT_LOG_FORMAT",
        value_name = "FORMAT"
    )]
    pub log_format: Option<String>,
    /// Where /metrics is served: host:port, [v6]:port, or :port for every
    /// interface [default: :10097]
    #[arg(
        long = "web.listen-address",
        global = true,
        env = "SALTSIGHT_WEB_LISTEN_ADDRESS",
        value_name = "ADDRESS"
    )]
    pub web_listen_address: Option<String>,
    /// TLS and basic auth for /metrics, in the Prometheus exporter-toolkit
    /// web-config format
    #[arg(
        long = "web.config.file",
        global = true,
        env = "SALTSIGHT_WEB_CONFIG_FILE",
        value_name = "FILE"
    )]
    pub web_config_file: Option<PathBuf>,
    /// Where the checkpoint of jobs in flight is kept across restarts
    /// [default: /var/lib/saltsight/state]
    #[arg(
        long = "state-dir",
        global = true,
        env = "SALTSIGHT_STATE_DIR",
        value_name = "DIR"
    )]
    pub state_dir: Option<PathBuf>,
}

impl GlobalArgs {
    pub fn overrides(&self) -> Overrides {
        Overrides {
            config: self.config.clone(),
            master_config: self.master_config.clone(),
            endpoint: self.endpoint.clone(),
            max_frame_bytes: self.max_frame_bytes,
            log_level: self.log_level.clone(),
            log_format: self.log_format.clone(),
            web_listen_address: self.web_listen_address.clone(),
            web_config_file: self.web_config_file.clone(),
            state_dir: self.state_dir.clone(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent: watch the bus and emit records (logs go to stderr).
    Run(run::RunArgs),
    /// Show live events, like `salt-run state.event pretty=True`.
    Tail(tail::TailArgs),
    /// Record the raw bus bytes, with receive times, to a file for later replay.
    Capture(capture::CaptureArgs),
    /// Feed a recording (a capture or a raw socket dump) through the pipeline.
    Replay(replay::ReplayArgs),
    /// Validate the configuration and print the resolved bus endpoint.
    CheckConfig(check_config::CheckConfigArgs),
    /// Start a local Salt master with 3 minions, run a few jobs, and tail its bus.
    Demo(demo::DemoArgs),
    /// Write man pages and shell completions (for packaging).
    #[command(hide = true)]
    Generate(generate::GenerateArgs),
}

/// How a subcommand ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Ran, but some input was bad (undecodable frames, a damaged recording).
    BadInput,
}

impl Outcome {
    /// `BadInput` when the source held anything undecodable.
    pub fn of(summary: &Summary) -> Outcome {
        let bad = !summary.decode_errors.is_empty()
            || summary.recording_damaged
            || summary.recording_desyncs > 0
            || summary.recording_trailing_bytes > 0;
        if bad { Outcome::BadInput } else { Outcome::Ok }
    }
}

/// Why a subcommand stopped early, by exit code; the text is redacted already.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The configuration is invalid (nothing started).
    #[error("{0}")]
    Config(String),
    /// `run` as root without `--allow-root`.
    #[error("{0}")]
    NoPermission(String),
    /// It ran and failed.
    #[error("{0}")]
    Runtime(String),
}

impl Failure {
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Config(_) => exit::CONFIG,
            Failure::NoPermission(_) => exit::NO_PERMISSION,
            Failure::Runtime(_) => exit::RUNTIME,
        }
    }
}

/// Exit codes: 0 ok; 1 runtime failure; 2 usage (clap); 3 ran but saw bad input;
/// 64 invalid configuration; 77 refused to run as root.
pub mod exit {
    pub const RUNTIME: i32 = 1;
    pub const BAD_INPUT: i32 = 3;
    /// `run` as root without `--allow-root` (sysexits' EX_NOPERM).
    pub const NO_PERMISSION: i32 = 77;
    pub const CONFIG: i32 = 64;
}

/// What every subcommand that reads the bus starts with: the validated config,
/// the redactor made from it, and the token the first SIGINT/SIGTERM cancels.
pub struct Session {
    pub config: Config,
    /// The config's `[[output]]`s, resolved by their kinds.
    pub outputs: Vec<OutputSpec>,
    pub redactor: Redactor,
    pub cancel: CancellationToken,
}

/// Loads the config, sets up logging and runs the command; every error leaves
/// here redacted.
pub fn execute(cli: Cli) -> Result<Outcome, Failure> {
    let Cli { global, command } = cli;
    match &command {
        Command::Generate(args) => return generate::run(args).map_err(runtime),
        Command::CheckConfig(args) if args.example => {
            print!("{}", crate::config::example::example());
            return Ok(Outcome::Ok);
        }
        _ => {}
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the async runtime: {e}")))?;
    // From here on a SIGHUP to `run` is a reload (handled once it runs), never
    // the default's exit.
    let hangups = matches!(command, Command::Run(_)).then(|| {
        let _runtime = runtime.enter();
        reload::listen_for_hangups()
    });
    let overrides = global.overrides();
    let (config, outputs) = crate::pipeline::load_config(&overrides)
        // A config error may quote a value (an upstream URL with its password).
        .map_err(|errors| {
            Failure::Config(default_redactor().line(&errors.to_string()).into_owned())
        })?;
    let redactor = Redactor::new(&config.redact).map_err(|e| Failure::Config(e.to_string()))?;
    let log_level = log::init(&config, &redactor);
    if let Command::Run(args) = &command {
        if let Some(why) = privilege::refuse_root(&config.bus.endpoint, args.allow_root) {
            tracing::error!("{why}");
            return Err(Failure::NoPermission(why));
        }
    }
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    if let Command::CheckConfig(_) = command {
        return check_config::run(&config, &outputs, &mut std::io::stdout().lock())
            .map(|()| Outcome::Ok)
            .map_err(|e| Failure::Runtime(e.to_string()));
    }
    let gate = redactor.clone();
    let result = runtime.block_on(async move {
        let cancel = shutdown::on_signals().context("cannot install signal handlers")?;
        let session = Session {
            config,
            outputs,
            redactor,
            cancel,
        };
        match command {
            Command::Run(args) => {
                let reload = run::Reload {
                    overrides,
                    log_level,
                    hangups,
                };
                run::run(args, session, reload).await
            }
            Command::Tail(args) => tail::run(args, session).await,
            Command::Capture(args) => capture::run(args, session).await,
            Command::Replay(args) => replay::run(args, session).await,
            Command::Demo(args) => demo::run(args, session).await,
            Command::CheckConfig(_) | Command::Generate(_) => Ok(Outcome::Ok),
        }
    });
    result.map_err(|error| {
        let text = gate.line(&format!("{error:#}")).into_owned();
        tracing::error!(error = %text, "Exiting on error.");
        Failure::Runtime(text)
    })
}

fn runtime(error: anyhow::Error) -> Failure {
    Failure::Runtime(format!("{error:#}"))
}

/// The built-in rules, for what is said before the config is read.
fn default_redactor() -> Redactor {
    Redactor::new(&crate::config::redact::RedactConfig::default())
        .expect("the built-in redaction rules compile (a unit test builds them)")
}
