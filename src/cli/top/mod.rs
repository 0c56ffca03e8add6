//! `saltsight top`: a live view of the bus on the terminal. It runs a pipeline
//! of its own over the live bus (as `tail` follows it: with or without the
//! daemon), keeps a history in a temporary directory for the drill-down (the
//! recap `saltsight job` shows), and hands each redacted record to the
//! screen (`ui`, on a thread of its own) through `feed`, never waiting on it.
//! The view's state is `model`.

mod feed;
pub mod model;
mod ui;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::flags::BusArgs;
use super::log::LogLevel;
use super::{Outcome, Session};
use crate::metrics::Observer;
use crate::pipeline::{AgentOptions, Assembly, OutputChoice};
use crate::shutdown;
use crate::sink::stdout::StdoutFormat;

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Wait for the bus when it cannot be reached (retrying with backoff), instead
    /// of saying why and exiting (69: nothing there, 77: not allowed)
    #[arg(long)]
    pub wait: bool,
    #[command(flatten, next_help_heading = "Event bus")]
    pub bus: BusArgs,
}

/// How often the drill-down's history is written: short, so a job's recap is
/// there soon after its records.
const HISTORY_BATCH_AGE: Duration = Duration::from_millis(200);

/// `saltsight top`: the screen until q, Ctrl-C, SIGTERM or SIGHUP; then the
/// pipeline drained, the terminal restored and the temporary history removed.
pub async fn run(args: TopArgs, session: Session, log_level: LogLevel) -> anyhow::Result<Outcome> {
    let Session {
        config,
        redactor,
        cancel,
        ..
    } = session;
    if !args.wait {
        super::reach::reachable_or_exit(&config.bus.endpoint).await?;
    }
    // A hangup (the terminal closed) ends it as SIGTERM does.
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("cannot install the SIGHUP handler")?;
    let on_hangup = cancel.clone();
    tokio::spawn(async move {
        if hangup.recv().await.is_some() {
            on_hangup.cancel();
        }
    });

    // Log lines would tear the screen: none while it is up.
    let quiet = Quiet::new(log_level, &config.log.level);
    let dir = tempfile::Builder::new()
        .prefix("saltsight-top-")
        .tempdir()
        .context("cannot make a temporary directory for the history")?;
    let history = dir.path().join("history.db");
    let mut assembly = Assembly::open(
        &config,
        &[],
        AgentOptions::view(
            OutputChoice::None,
            StdoutFormat::Json,
            history.clone(),
            Some(HISTORY_BATCH_AGE),
        ),
    )?;
    let watch = Arc::new(feed::BusWatch::default());
    let (screen_output, records) = feed::channel(watch.clone());
    assembly.add_output(Box::new(screen_output));
    let consumer = assembly.consumer(&config, cancel.clone());
    let (agent, _) = assembly.agent(&config, redactor, Observer::unregistered(&config.metrics))?;
    let handler = feed::Watched::new(agent, watch.clone());
    let pipeline_cancel = cancel.clone();
    let pipeline = tokio::spawn(async move {
        let result = consumer.run(handler).await.map(|(summary, _)| summary);
        // A pipeline that ends (an error) ends the screen too.
        pipeline_cancel.cancel();
        result
    });

    let screen = ui::Screen::new(
        model::Model::new(model::Limits::default()),
        records,
        watch,
        history,
        config.master_id.clone(),
    );
    let ui_cancel = cancel.clone();
    let shown = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        let mut terminal = ratatui::try_init()?;
        let result = screen.run(&mut terminal, &ui_cancel);
        ratatui::try_restore()?;
        result
    })
    .await;
    drop(quiet);
    cancel.cancel();
    let summary =
        shutdown::within_grace(&cancel, async { pipeline.await.context("pipeline task")? }).await;
    shown.context("screen task")?.context("the terminal")?;
    let summary = summary?;
    drop(dir);
    Ok(Outcome::of(&summary))
}

/// Logs off until dropped, then back at `level` (before any error of the
/// command is logged).
struct Quiet {
    log: LogLevel,
    level: String,
}

impl Quiet {
    fn new(log: LogLevel, level: &str) -> Self {
        let _ = log.set("off");
        Self {
            log,
            level: level.to_owned(),
        }
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        let _ = self.log.set(&self.level);
    }
}

impl super::Action for TopArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.bus.apply(o);
    }

    /// Its logging is quieted while the screen is up: it keeps the level.
    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, super::Failure> {
        let rt = super::async_runtime()?;
        let loaded = super::Loaded::read(&overrides)?;
        let log_level = loaded.log_level.clone();
        loaded.serve(&rt, |session| run(self, session, log_level))
    }
}
