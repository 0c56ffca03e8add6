//! `saltsight demo`: starts a real Salt master with three minions on loopback (the
//! test harness's lab, Salt from PyPI in a cached venv), runs a few jobs (one of
//! them a failing state.apply) and shows the bus as `saltsight tail` does. Stops by
//! itself and removes the lab.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tokio_util::sync::CancellationToken;

use super::tail::{TailArgs, TailHandler};
use crate::app::{self, Source};
use crate::bus::ReaderStats;
use crate::bus::reader::Delivery;
use crate::config::BusConfig;
use crate::lab::{Lab, LabOptions};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print events as JSON lines instead of the readable form
    #[arg(long)]
    pub json: bool,
    /// Keep the lab running after the jobs, until Ctrl-C (try `salt` yourself: the
    /// command to use is printed)
    #[arg(long)]
    pub keep: bool,
}

/// The jobs the demo runs, as `salt` arguments.
const JOBS: &[&[&str]] = &[
    &["*", "test.ping"],
    &["*", "cmd.run", "echo hello from $(hostname)"],
    &["*", "state.apply", "ok"],
    &["*", "state.apply", "fail"],
];

pub async fn run(
    args: DemoArgs,
    template: &BusConfig,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    eprintln!("Starting a Salt master and 3 minions on loopback (about 10 s)...");
    let lab = tokio::task::spawn_blocking(|| Lab::start(LabOptions::default()))
        .await
        .context("lab task")??;
    let lab = Arc::new(lab);
    eprintln!(
        "Lab ready in {}. Watching its bus at {}.",
        lab.root().display(),
        lab.endpoint()
    );
    let bus = BusConfig {
        endpoint: lab.endpoint(),
        endpoint_origin: "the demo lab".into(),
        ..template.clone()
    };
    let tail_args = TailArgs {
        json: args.json,
        tags: Vec::new(),
        from: None,
        count: None,
    };
    let handler = TailHandler::new(std::io::stdout(), &tail_args, cancel.clone());
    let pipeline = tokio::spawn(app::run(
        Source::live(&bus, Delivery::Frames),
        bus.queue_frames,
        handler,
        cancel.clone(),
        Arc::new(ReaderStats::default()),
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;

    let jobs_lab = lab.clone();
    let jobs = tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        for job in JOBS {
            eprintln!(
                "\n>>> salt {}",
                job.iter()
                    .map(|a| format!("'{a}'"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            let mut argv = job.to_vec();
            argv.extend(["--out", "quiet"]);
            jobs_lab.salt(&argv)?;
            std::thread::sleep(Duration::from_secs(1));
        }
        Ok(())
    });
    tokio::select! {
        r = jobs => r.context("jobs task")??,
        () = cancel.cancelled() => {}
    }
    if args.keep && !cancel.is_cancelled() {
        eprintln!(
            "\nThe lab keeps running; try: {} -c {} '*' test.ping    (Ctrl-C ends the demo)",
            crate::lab::default_venv().join("bin/salt").display(),
            lab.root().join("etc").display()
        );
        cancel.cancelled().await;
    } else {
        tokio::time::sleep(Duration::from_secs(2)).await;
        cancel.cancel();
    }
    pipeline.await.context("pipeline task")??;
    eprintln!("\nStopping the lab.");
    // The lab's Drop stops its processes by process group.
    tokio::task::spawn_blocking(move || drop(lab))
        .await
        .context("lab teardown")?;
    Ok(())
}
