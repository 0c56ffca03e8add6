//! The flags that set config keys, in groups, each on the subcommands it
//! applies to: named `--<section>.<key>` after the config key they override, as
//! Prometheus and its exporters name theirs (`--web.listen-address`,
//! `--log.level`), with an earlier release's names (`--log-level`,
//! `--endpoint`...) kept as hidden aliases.
//!
//! Only `--config.file`, `--log.level` and `--log.format` apply everywhere (and
//! are global). The earlier release took every flag before the subcommand too:
//! [`LegacyArgs`] still does, hidden, and a flag given there beats the
//! environment but not the same flag after the subcommand.

use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args};

use crate::config::Overrides;

/// Flags for every subcommand.
#[derive(Debug, Default, Args)]
pub struct GlobalArgs {
    /// saltsight's config file (TOML) [default: /etc/saltsight/saltsight.toml, if present]
    #[arg(
        long = "config.file",
        alias = "config",
        global = true,
        env = "SALTSIGHT_CONFIG",
        value_name = "FILE"
    )]
    pub config: Option<PathBuf>,
    /// Log level or tracing filter (error, warn, info, debug, trace) [default: info]
    #[arg(
        long = "log.level",
        alias = "log-level",
        global = true,
        env = "SALTSIGHT_LOG_LEVEL",
        value_name = "LEVEL"
    )]
    pub log_level: Option<String>,
    /// Log format on stderr: text or json [default: text]
    #[arg(
        long = "log.format",
        alias = "log-format",
        global = true,
        env = "SALTSIGHT_LOG_FORMAT",
        value_name = "FORMAT"
    )]
    pub log_format: Option<String>,
}

/// The Salt master's config: where its bus is, and its git checkouts.
#[derive(Debug, Default, Clone, Args)]
pub struct MasterArgs {
    /// The Salt master's config, read for its id, the bus (sock_dir, root_dir,
    /// ipc_mode, tcp_master_pub_port) and its state tree (master.d/*.conf beside
    /// it too) [default: /etc/salt/master]
    #[arg(
        long = "bus.master-config",
        alias = "master-config",
        env = "SALTSIGHT_MASTER_CONFIG",
        value_name = "FILE"
    )]
    pub master_config: Option<PathBuf>,
}

/// The largest frame read.
#[derive(Debug, Default, Clone, Args)]
pub struct FrameArgs {
    /// Largest frame accepted, in bytes (highstate returns of several MB are normal)
    /// [default: 67108864]
    #[arg(
        long = "bus.max-frame-bytes",
        alias = "max-frame-bytes",
        env = "SALTSIGHT_MAX_FRAME_BYTES",
        value_name = "BYTES"
    )]
    pub max_frame_bytes: Option<u64>,
}

/// Where the live bus is: for the subcommands that connect to it.
#[derive(Debug, Default, Clone, Args)]
pub struct BusArgs {
    #[command(flatten)]
    pub master: MasterArgs,
    /// The master's event publisher, overriding its config:
    /// unix:/var/run/salt/master/master_event_pub.ipc or tcp:127.0.0.1:4512
    #[arg(
        long = "bus.endpoint",
        alias = "endpoint",
        env = "SALTSIGHT_ENDPOINT",
        value_name = "ENDPOINT"
    )]
    pub endpoint: Option<String>,
    #[command(flatten)]
    pub frames: FrameArgs,
}

/// The metrics endpoint, for `run` (and `check-config`, which checks run's config).
#[derive(Debug, Default, Clone, Args)]
pub struct WebArgs {
    /// Where /metrics is served: host:port, [v6]:port, or :port for every
    /// interface [default: :10097, every interface]
    #[arg(
        long = "web.listen-address",
        env = "SALTSIGHT_WEB_LISTEN_ADDRESS",
        value_name = "ADDRESS"
    )]
    pub web_listen_address: Option<String>,
    /// TLS and basic auth for /metrics, in the Prometheus exporter-toolkit
    /// web-config format
    #[arg(
        long = "web.config.file",
        env = "SALTSIGHT_WEB_CONFIG_FILE",
        value_name = "FILE"
    )]
    pub web_config_file: Option<PathBuf>,
}

/// The checkpoint, for `run` (and `check-config`).
#[derive(Debug, Default, Clone, Args)]
pub struct StateArgs {
    /// Where the checkpoint of jobs in flight is kept across restarts
    /// [default: /var/lib/saltsight/state]
    #[arg(
        long = "state.dir",
        alias = "state-dir",
        env = "SALTSIGHT_STATE_DIR",
        value_name = "DIR"
    )]
    pub state_dir: Option<PathBuf>,
}

/// An earlier release's flags before the subcommand (`saltsight --endpoint X
/// tail`): still taken, hidden, for one release.
#[derive(Debug, Default, Clone, Args)]
pub struct LegacyArgs {
    #[arg(long = "master-config", hide = true, value_name = "FILE")]
    pub master_config: Option<PathBuf>,
    #[arg(long = "endpoint", hide = true, value_name = "ENDPOINT")]
    pub endpoint: Option<String>,
    #[arg(long = "max-frame-bytes", hide = true, value_name = "BYTES")]
    pub max_frame_bytes: Option<u64>,
    #[arg(long = "web.listen-address", hide = true, value_name = "ADDRESS")]
    pub web_listen_address: Option<String>,
    #[arg(long = "web.config.file", hide = true, value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,
    #[arg(long = "state-dir", hide = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

impl LegacyArgs {
    /// Keeps only what beats the subcommand's own value: a flag there, or a value
    /// it took from the environment, wins over nothing / loses to a flag.
    pub fn settle(&mut self, subcommand: Option<&ArgMatches>) {
        let given_after = |id: &str| {
            subcommand.is_some_and(|m| {
                m.try_contains_id(id).unwrap_or(false)
                    && m.value_source(id) == Some(ValueSource::CommandLine)
            })
        };
        macro_rules! settle {
            ($($field:ident),+) => {$(
                if given_after(stringify!($field)) {
                    self.$field = None;
                }
            )+};
        }
        settle!(
            master_config,
            endpoint,
            max_frame_bytes,
            web_listen_address,
            web_config_file,
            state_dir
        );
    }

    /// Its values over `overrides` (after [`LegacyArgs::settle`]).
    pub fn apply(&self, o: &mut Overrides) {
        fn pick<T: Clone>(mine: &Option<T>, theirs: &mut Option<T>) {
            if mine.is_some() {
                theirs.clone_from(mine);
            }
        }
        pick(&self.master_config, &mut o.master_config);
        pick(&self.endpoint, &mut o.endpoint);
        pick(&self.max_frame_bytes, &mut o.max_frame_bytes);
        pick(&self.web_listen_address, &mut o.web_listen_address);
        pick(&self.web_config_file, &mut o.web_config_file);
        pick(&self.state_dir, &mut o.state_dir);
    }
}

impl GlobalArgs {
    pub fn apply(&self, o: &mut Overrides) {
        o.config.clone_from(&self.config);
        o.log_level.clone_from(&self.log_level);
        o.log_format.clone_from(&self.log_format);
    }
}

impl MasterArgs {
    pub fn apply(&self, o: &mut Overrides) {
        o.master_config.clone_from(&self.master_config);
    }
}

impl FrameArgs {
    pub fn apply(&self, o: &mut Overrides) {
        o.max_frame_bytes = self.max_frame_bytes;
    }
}

impl BusArgs {
    pub fn apply(&self, o: &mut Overrides) {
        self.master.apply(o);
        o.endpoint.clone_from(&self.endpoint);
        self.frames.apply(o);
    }
}

impl WebArgs {
    pub fn apply(&self, o: &mut Overrides) {
        o.web_listen_address.clone_from(&self.web_listen_address);
        o.web_config_file.clone_from(&self.web_config_file);
    }
}

impl StateArgs {
    pub fn apply(&self, o: &mut Overrides) {
        o.state_dir.clone_from(&self.state_dir);
    }
}

/// How records look on standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecordFormat {
    /// JSON lines (the default when stdout is not a terminal)
    Json,
    /// One readable line per record (the default on a terminal)
    Text,
}

#[derive(Debug, Default, Clone, Args)]
pub struct FormatArgs {
    /// How records look on stdout: readable lines on a terminal, JSON lines
    /// otherwise, unless this says
    #[arg(long, value_enum)]
    pub format: Option<RecordFormat>,
}

impl FormatArgs {
    pub fn stdout_format(&self) -> crate::sink::stdout::StdoutFormat {
        use crate::sink::stdout::StdoutFormat;
        let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
        match self.format {
            Some(RecordFormat::Json) => StdoutFormat::Json,
            Some(RecordFormat::Text) => StdoutFormat::Text,
            None if on_terminal => StdoutFormat::Text,
            None => StdoutFormat::Json,
        }
    }
}

/// Where records go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The config's `[[output]]`s (stdout when it has none).
    Config,
    /// Records as JSON lines on stdout only.
    Stdout,
    /// No records (logs and counters only).
    None,
}

impl From<Output> for crate::pipeline::OutputChoice {
    fn from(output: Output) -> Self {
        match output {
            Output::Config => Self::Config,
            Output::Stdout => Self::Stdout,
            Output::None => Self::None,
        }
    }
}
