//! The command line: clap types and one file per subcommand.

pub mod exit;
pub mod flags;
pub mod live;
pub mod log;
pub mod manual;
pub mod present;
pub mod privilege;
pub mod reach;
pub mod recap;
pub mod reload;
pub mod tail_format;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Overrides};
use crate::pipeline::Summary;
use crate::record::redact::Redactor;
use crate::shutdown;
use crate::sink::OutputSpec;
pub use flags::{GlobalArgs, LegacyArgs};

/// Watches a Salt master's event bus, read-only, and reports on jobs, returns and
/// failures. It never sends a command to the master; with `[reactor]` on, it
/// fires its own `saltsight/` events for Salt's Reactor.
#[derive(Debug, Parser)]
#[command(name = "saltsight", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(flatten)]
    pub legacy: LegacyArgs,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the command line; a usage error exits [`exit::USAGE`], `--help`
    /// and `--version` 0.
    pub fn parse_or_exit() -> Cli {
        match Cli::try_parse_from(std::env::args_os()) {
            Ok(cli) => cli,
            Err(error) => {
                let _ = error.print();
                let code = if error.use_stderr() {
                    exit::USAGE.code
                } else {
                    exit::OK.code
                };
                std::process::exit(i32::from(code));
            }
        }
    }

    /// [`Parser::try_parse_from`], with an earlier release's flags before the
    /// subcommand settled against the subcommand's own.
    pub fn try_parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Cli::command().try_get_matches_from(args)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        cli.legacy.settle(matches.subcommand().map(|(_, m)| m));
        Ok(cli)
    }

    /// What the flags and `SALTSIGHT_*` variables say, for the config loader.
    pub fn overrides(&self) -> Overrides {
        let mut o = Overrides::default();
        self.global.apply(&mut o);
        self.command.overrides(&mut o);
        self.legacy.apply(&mut o);
        o
    }
}

/// What a subcommand's arguments do: the config-key flags they set, and
/// how the subcommand runs. Each `cli/<subcommand>.rs` implements it for its
/// args type; [`subcommands!`] lists them once.
pub trait Action {
    /// Its config-key flag groups, onto `o` (none by default).
    fn overrides(&self, _o: &mut Overrides) {}
    /// Runs it with the command line's `overrides` (its own among them).
    fn execute(self, overrides: Overrides) -> Result<Outcome, Failure>;
}

/// Every subcommand, once: its module (`cli/<module>.rs`), its variant and
/// its args type, with the help clap shows. The module, the [`Command`]
/// variant and the one dispatch are made from this list: a new subcommand is
/// its file (an args type implementing [`Action`]) and a line here.
macro_rules! subcommands {
    ($( $(#[$meta:meta])* $variant:ident($module:ident::$args:ident), )*) => {
        $( pub mod $module; )*

        #[derive(Debug, Subcommand)]
        pub enum Command {
            $( $(#[$meta])* $variant($module::$args), )*
        }

        impl Command {
            fn overrides(&self, o: &mut Overrides) {
                match self {
                    $( Command::$variant(args) => args.overrides(o), )*
                }
            }

            fn execute(self, overrides: Overrides) -> Result<Outcome, Failure> {
                match self {
                    $( Command::$variant(args) => args.execute(overrides), )*
                }
            }
        }
    };
}

subcommands! {
    /// Run the agent: watch the bus and emit records (logs go to stderr).
    Run(run::RunArgs),
    /// Show live events, like `salt-run state.event pretty=True`.
    Tail(tail::TailArgs),
    /// A live view of the bus: jobs in flight with their returns against
    /// expected, verdicts as they fall, failure groups, the bus and its lag;
    /// Enter on a job shows its recap. Follows the bus itself, as `tail` does,
    /// so it needs no running agent.
    Top(top::TopArgs),
    /// Record the raw bus bytes, with receive times, to a file for later replay.
    Capture(capture::CaptureArgs),
    /// Feed a recording (a capture or a raw socket dump) through the pipeline.
    Replay(replay::ReplayArgs),
    /// Validate the configuration and print the resolved bus endpoint.
    CheckConfig(check_config::CheckConfigArgs),
    /// Start a local Salt master with 3 minions, run a few jobs, and tail its bus.
    Demo(demo::DemoArgs),
    /// One job's recap from the history: minions, reasons, root causes, commit.
    Job(job::JobArgs),
    /// Recent jobs from the history, one line each.
    Jobs(jobs::JobsArgs),
    /// Root causes across jobs from the history, by fingerprint.
    Failures(failures::FailuresArgs),
    /// States that drifted from the commit their minion had applied, and
    /// states that never settle, from the history.
    Drift(drift::DriftArgs),
    /// Wait for a job to finish and exit with the truth: 0 only when every
    /// expected minion returned and succeeded (for CI: `salt --async`, then this).
    Wait(wait::WaitArgs),
    /// What is wrong now, from the history: incidents, master pressure,
    /// rollouts, failures, missing minions, drift, bus gaps. Exit 1 when
    /// anything is.
    Status(status::StatusArgs),
    /// External incidents from the history, open and closed, newest first.
    Incidents(incidents::IncidentsArgs),
    /// Each commit of the watched state trees on its way to the fleet, from
    /// the history: status, applied/failed/pending, release delay.
    Rollouts(rollouts::RolloutsArgs),
    /// One commit's rollout from the history: its pull request, the failed
    /// minions with their root causes, the pending ones with why.
    Rollout(rollout::RolloutArgs),
    /// One minion's recent jobs, successes, misses and failures from the history.
    Minion(minion::MinionArgs),
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

/// Why a subcommand stopped early: its exit code and the reason, redacted
/// already.
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub struct Failure {
    pub status: exit::Status,
    text: String,
    /// Said already, through the log: `main` does not print it again.
    logged: bool,
}

impl Failure {
    pub fn new(status: exit::Status, text: impl Into<String>) -> Self {
        Self {
            status,
            text: text.into(),
            logged: false,
        }
    }

    /// The configuration is invalid (nothing started).
    pub fn config(text: impl Into<String>) -> Self {
        Self::new(exit::CONFIG, text)
    }

    /// It ran and failed.
    pub fn runtime(text: impl Into<String>) -> Self {
        Self::new(exit::RUNTIME, text)
    }

    /// Logs it at error level, once: `main` will not print it again.
    pub(crate) fn log(mut self, message: &'static str) -> Self {
        tracing::error!(error = %self.text, "{message}");
        self.logged = true;
        self
    }

    pub fn exit_code(&self) -> u8 {
        self.status.code
    }

    /// Whether the log has said it (then only the exit code is left to give).
    pub fn logged(&self) -> bool {
        self.logged
    }

    pub fn text(&self) -> &str {
        &self.text
    }
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

/// Runs the command (its [`Action`]); every error leaves here redacted.
pub fn execute(cli: Cli) -> Result<Outcome, Failure> {
    let overrides = cli.overrides();
    cli.command.execute(overrides)
}

/// A subcommand that answers from the config alone (the query commands:
/// they read the history, and need no runtime).
pub(crate) fn answer(
    overrides: &Overrides,
    answer: impl FnOnce(&Config, &mut dyn std::io::Write) -> Result<Outcome, Failure>,
) -> Result<Outcome, Failure> {
    answer(&Loaded::read(overrides)?.config, &mut stdout())
}

/// A subcommand that reads the bus: the runtime, the config, its session.
pub(crate) fn on_bus<F>(
    overrides: &Overrides,
    command: impl FnOnce(Session) -> F,
) -> Result<Outcome, Failure>
where
    F: std::future::Future<Output = anyhow::Result<Outcome>>,
{
    let rt = async_runtime()?;
    Loaded::read(overrides)?.serve(&rt, command)
}

fn stdout() -> std::io::StdoutLock<'static> {
    std::io::stdout().lock()
}

/// The runtime of the subcommands that read the bus (two workers: the agent
/// is one consumer task, the reader, and the outputs' senders).
pub(crate) fn async_runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(format!("cannot start the async runtime: {e}")))
}

/// The config read and checked, logging set up from it, its warnings said.
pub(crate) struct Loaded {
    pub(crate) config: Config,
    pub(crate) outputs: Vec<OutputSpec>,
    redactor: Redactor,
    pub(crate) log_level: log::LogLevel,
}

impl Loaded {
    pub(crate) fn read(overrides: &Overrides) -> Result<Self, Failure> {
        let (config, outputs) = crate::pipeline::load_config(overrides)
            // A config error may quote a value (an upstream URL with its password).
            .map_err(|errors| Failure::config(default_redactor().line(&errors.to_string())))?;
        let redactor = Redactor::new(&config.redact).map_err(|e| Failure::config(e.to_string()))?;
        let log_level = log::init(&config, &redactor);
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        Ok(Self {
            config,
            outputs,
            redactor,
            log_level,
        })
    }

    /// Runs a subcommand that reads the bus on `rt`, with SIGINT/SIGTERM
    /// cancelling it.
    pub(crate) fn serve<F>(
        self,
        rt: &tokio::runtime::Runtime,
        command: impl FnOnce(Session) -> F,
    ) -> Result<Outcome, Failure>
    where
        F: std::future::Future<Output = anyhow::Result<Outcome>>,
    {
        let gate = self.redactor.clone();
        let result = rt.block_on(async move {
            let cancel = shutdown::on_signals().context("cannot install signal handlers")?;
            command(Session {
                config: self.config,
                outputs: self.outputs,
                redactor: self.redactor,
                cancel,
            })
            .await
        });
        result.map_err(|error| {
            let status = status_of(&error);
            let text = gate.line(&format!("{error:#}")).into_owned();
            Failure::new(status, text).log("Exiting on error.")
        })
    }
}

/// The exit code an error calls for, from the first typed cause in its chain
/// (a bus that cannot be reached), else a runtime failure.
fn status_of(error: &anyhow::Error) -> exit::Status {
    error
        .chain()
        .find_map(|cause| cause.downcast_ref::<crate::bus::endpoint::ConnectError>())
        .map_or(exit::RUNTIME, connect_status)
}

/// A connect error's exit code: this user may not, or nothing is there.
pub fn connect_status(error: &crate::bus::endpoint::ConnectError) -> exit::Status {
    if error.source.kind() == std::io::ErrorKind::PermissionDenied {
        exit::NO_PERMISSION
    } else {
        exit::UNAVAILABLE
    }
}

pub(crate) fn runtime(error: anyhow::Error) -> Failure {
    Failure::runtime(format!("{error:#}"))
}

/// The built-in rules, for what is said before the config is read.
fn default_redactor() -> Redactor {
    Redactor::new(&crate::config::redact::RedactConfig::default())
        .expect("the built-in redaction rules compile (a unit test builds them)")
}
