//! One way to build the agent: a subcommand says what it wants in one
//! [`AgentOptions`] (where frames come from, which outputs, which history,
//! whether the stages' memory is kept, what is watched live), and
//! [`Assembly`] builds the rest the same way for every one of them: the
//! outputs and their senders, the stages, the history, the checkpoint, the
//! master's watches, then the [`Agent`] and its [`Consumer`].
//!
//! It is built in two steps because `run`'s metrics registry needs every
//! part's counts before the agent's observer exists: [`Assembly::open`]
//! makes the parts, [`Assembly::counts`] lists their counts, and
//! [`Assembly::agent`] puts them together with the observer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::checkpoint::{Checkpointer, Restored};
use super::clock::Clock;
use super::consumer::Consumer;
use super::outputs::{OutputChoice, open_outputs};
use super::source::Source;
use super::{Agent, Stages};
use crate::bus::ReaderStats;
use crate::bus::reader::Delivery;
use crate::config::Config;
use crate::config::history::HistoryConfig;
use crate::config::presence::ConnectionsSource;
use crate::counter::Counts;
use crate::master_connections::ConnectionWatch;
use crate::master_processes::MasterProcesses;
use crate::metrics::server::AlertWebhook;
use crate::metrics::{Metrics, Observer};
use crate::reactor::alerts::Alerts;
use crate::reactor::verdicts::VerdictOutput;
use crate::reactor::{Firer, ReactorCounts};
use crate::record::redact::Redactor;
use crate::sink::history::{AgeFrom, HistoryOutput};
use crate::sink::output::Output;
use crate::sink::stdout::StdoutFormat;
use crate::sink::{OutputSpec, Outputs, Senders};

/// Where frames come from; the clock follows from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceChoice {
    /// The master's publisher (`run`, `demo`, `top`): wall time.
    Live,
    /// A recording (`replay`): event time, as fast as it reads.
    Recording { path: PathBuf },
}

/// Which history the agent writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryChoice {
    /// None.
    Off,
    /// `[history]`, if enabled; one that cannot be opened is logged and the
    /// agent runs without it (the service keeps watching).
    Config,
    /// A history of the subcommand's own at `path` (the demo's recap, top's
    /// drill-down), batched at most `batch_max_age` when given; one that
    /// cannot be opened is an error.
    At {
        path: PathBuf,
        batch_max_age: Option<Duration>,
    },
}

/// What a subcommand chooses; everything else is built the same way.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub source: SourceChoice,
    pub outputs: OutputChoice,
    pub stdout_format: StdoutFormat,
    pub history: HistoryChoice,
    /// Keep the stages' memory on disk (`[state]`), and take it back at start.
    pub checkpoint: bool,
    /// Sample the master's processes for its pressure (`[pressure]`): only
    /// where the config's master is the one watched.
    pub master_processes: bool,
    /// Read the master's connections for presence (`[presence]`): live only.
    pub presence: bool,
    /// Fire verdicts onto the master's bus when `[reactor]` is enabled: only
    /// the service (`run`), the one agent a Reactor should hear.
    pub reactor: bool,
}

impl AgentOptions {
    /// The clock the stages run on: wall time live, event time on a recording.
    pub fn clock(&self) -> Clock {
        match self.source {
            SourceChoice::Live => Clock::Wall,
            SourceChoice::Recording { .. } => Clock::EventTime,
        }
    }

    /// The options of `run`: live, the given outputs, the config's history and
    /// checkpoint, every watch.
    pub fn service(outputs: OutputChoice, stdout_format: StdoutFormat) -> Self {
        Self {
            source: SourceChoice::Live,
            outputs,
            stdout_format,
            history: HistoryChoice::Config,
            checkpoint: true,
            master_processes: true,
            presence: true,
            reactor: true,
        }
    }

    /// The options of `replay`: the recording at `path`, on event time, the
    /// given outputs, a history at `history` when given; nothing watched.
    pub fn replay(
        path: PathBuf,
        outputs: OutputChoice,
        stdout_format: StdoutFormat,
        history: Option<PathBuf>,
    ) -> Self {
        Self {
            source: SourceChoice::Recording { path },
            outputs,
            stdout_format,
            history: history.map_or(HistoryChoice::Off, |path| HistoryChoice::At {
                path,
                batch_max_age: None,
            }),
            checkpoint: false,
            master_processes: false,
            presence: false,
            reactor: false,
        }
    }

    /// A live view of its own (`demo`, `top`): records to `outputs`, a history
    /// of its own at `history` (batched at most `batch_max_age` when given),
    /// presence; no checkpoint, no pressure, no Reactor (the service's).
    pub fn view(
        outputs: OutputChoice,
        stdout_format: StdoutFormat,
        history: PathBuf,
        batch_max_age: Option<Duration>,
    ) -> Self {
        Self {
            source: SourceChoice::Live,
            outputs,
            stdout_format,
            history: HistoryChoice::At {
                path: history,
                batch_max_age,
            },
            checkpoint: false,
            master_processes: false,
            presence: true,
            reactor: false,
        }
    }
}

/// The agent's parts, opened and not yet put together.
pub struct Assembly {
    options: AgentOptions,
    stages: Stages,
    outputs: Outputs,
    senders: Senders,
    counts: Vec<Arc<dyn Counts>>,
    checkpoint: Option<(Checkpointer, Option<Restored>)>,
    processes: Option<MasterProcesses>,
    connections: Option<ConnectionWatch>,
    firer: Option<Arc<Firer>>,
}

impl Assembly {
    /// Opens every part `options` asks for, from `config` and its resolved
    /// outputs `specs`.
    pub fn open(
        config: &Config,
        specs: &[OutputSpec],
        options: AgentOptions,
    ) -> anyhow::Result<Self> {
        let (mut outputs, senders) = open_outputs(
            specs,
            &config.spool,
            options.outputs,
            options.stdout_format,
            options.clock(),
        )?;
        let stages = Stages::from_config(config);
        let mut counts = stages.counts();
        counts.push(outputs.counts());
        // A history's ages count on the pipeline's own clock: a replay's
        // recording is not old for being replayed late.
        let age_from = match options.clock() {
            Clock::Wall => AgeFrom::Now,
            Clock::EventTime => AgeFrom::NewestRecord,
        };
        match &options.history {
            HistoryChoice::Off => {}
            HistoryChoice::Config if !config.history.enabled => {}
            HistoryChoice::Config => match HistoryOutput::open(&config.history, age_from) {
                Ok((history, stats)) => {
                    outputs.add(Box::new(history));
                    counts.push(stats);
                }
                // Without its history the agent still watches: said once.
                Err(error) => {
                    tracing::error!(%error, "Cannot open the history; running without it.")
                }
            },
            HistoryChoice::At {
                path,
                batch_max_age,
            } => {
                let (history, stats) = HistoryOutput::open(
                    &HistoryConfig {
                        enabled: true,
                        path: path.clone(),
                        batch_max_age: batch_max_age.unwrap_or(config.history.batch_max_age),
                        ..config.history.clone()
                    },
                    age_from,
                )?;
                outputs.add(Box::new(history));
                counts.push(stats);
            }
        }
        let checkpoint = (options.checkpoint && config.state.checkpoint).then(|| {
            let checkpointer = Checkpointer::new(
                &config.state.dir,
                &config.master_id,
                config.state.checkpoint_interval,
            );
            counts.push(checkpointer.stats.clone());
            let restored = checkpointer.read();
            (checkpointer, restored)
        });
        let live = options.source == SourceChoice::Live;
        let processes = (live && options.master_processes && config.pressure.sample_processes)
            .then(|| MasterProcesses::new(&config.pressure.pidfile));
        let connections = if live && options.presence {
            connection_watch(config)
        } else {
            None
        };
        if let Some(watch) = &connections {
            counts.push(watch.counts.clone());
        }
        let firer = if live && options.reactor && config.reactor.enabled {
            let reactor_counts = Arc::new(ReactorCounts::default());
            counts.push(reactor_counts.clone());
            let firer = Firer::start(&config.reactor, reactor_counts)?;
            outputs.add(Box::new(VerdictOutput::new(&config.reactor, firer.clone())));
            Some(firer)
        } else {
            None
        };
        Ok(Self {
            options,
            stages,
            outputs,
            senders,
            counts,
            checkpoint,
            processes,
            connections,
            firer,
        })
    }

    /// What `POST /alerts` hands Alertmanager's webhooks to, when
    /// `reactor.alerts` asks for it.
    pub fn alert_webhook(
        &self,
        config: &Config,
        redactor: &Redactor,
    ) -> Option<Arc<dyn AlertWebhook>> {
        let firer = self.firer.as_ref().filter(|_| config.reactor.alerts)?;
        Some(Arc::new(Alerts::new(
            firer.clone(),
            redactor.clone(),
            config.reactor.alerts_max_bytes,
        )))
    }

    /// An output of the subcommand's own beside the configured ones (top's
    /// screen feed).
    pub fn add_output(&mut self, output: Box<dyn Output>) {
        self.outputs.add(output);
    }

    /// The metrics registry of every part opened (the one `/metrics`
    /// serves, and the one the docs and the rules are checked against), the
    /// reader's figures read from `reader`.
    pub fn metrics(
        &self,
        config: &Config,
        reader: Arc<ReaderStats>,
        redactor: Redactor,
    ) -> Metrics {
        let metrics = Metrics::new(
            &config.metrics,
            reader,
            self.senders.spools(),
            self.counts.clone(),
            redactor,
        );
        metrics
            .observer
            .expect_state_trees(&config.correlate.state_trees());
        metrics
    }

    pub fn senders(&self) -> &Senders {
        &self.senders
    }

    /// The agent, observed by `metrics`, and the senders of its durable
    /// outputs (to spawn).
    pub fn agent(
        self,
        config: &Config,
        redactor: Redactor,
        metrics: Observer,
    ) -> anyhow::Result<(Agent, Senders)> {
        let clock = self.options.clock();
        let mut agent = Agent::new(self.stages, clock, self.outputs, redactor, metrics);
        if self.options.source == SourceChoice::Live && self.options.master_processes {
            agent = agent.with_master_watch(self.processes, config.pressure.sample_interval);
        }
        if let Some(watch) = self.connections {
            agent = agent.with_connection_watch(watch);
        }
        if let Some((checkpointer, restored)) = self.checkpoint {
            agent = agent.with_checkpoint(checkpointer, restored)?;
        }
        Ok((agent, self.senders))
    }

    /// The consumer that feeds it, from the chosen source.
    pub fn consumer(&self, config: &Config, cancel: CancellationToken) -> Consumer {
        consumer(config, &self.options.source, cancel)
    }
}

/// The consumer of `source`, bounded by `[bus]` (also for handlers other than
/// the agent: `tail`), a recording's progress shown.
pub fn consumer(config: &Config, source: &SourceChoice, cancel: CancellationToken) -> Consumer {
    consumer_of(config, source, Delivery::Frames, true, cancel)
}

/// The consumer of `source` as `delivery` wants it (`capture`: raw chunks),
/// with a recording's progress shown or not (`tail --from` prints events).
pub fn consumer_of(
    config: &Config,
    source: &SourceChoice,
    delivery: Delivery,
    progress: bool,
    cancel: CancellationToken,
) -> Consumer {
    let source = match source {
        SourceChoice::Live => Source::live(&config.bus, delivery),
        SourceChoice::Recording { path } => Source::Recording {
            path: path.clone(),
            max_frame_bytes: config.bus.max_frame_bytes,
            progress,
        },
    };
    Consumer::new(source, config.bus.queue_frames, cancel)
}

/// The master's connections where `[presence]` has them on; why not, logged.
fn connection_watch(config: &Config) -> Option<ConnectionWatch> {
    let watch = config.presence.connection_watch(config.jobs.max_minions);
    match &config.presence.connections {
        ConnectionsSource::On {
            publish_port,
            cachedir,
            ..
        } => {
            tracing::debug!(publish_port, cachedir = %cachedir.display(), "Reading the master's connections for presence.");
        }
        ConnectionsSource::Off { why } => {
            tracing::info!(why = %why, "Presence from the master's connections is off: a minion that did not return is told down from hung only by presence events.");
        }
    }
    watch
}
