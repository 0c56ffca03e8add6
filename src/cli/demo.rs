//! `saltsight demo`: starts a real Salt master with three minions on loopback (the
//! test harness's lab, Salt from PyPI in a cached venv), makes its state tree a git
//! checkout, runs a few jobs (one of them a failing state.apply) and prints the
//! records `saltsight run` makes of them (or, with `--events`, the bus as
//! `saltsight tail` shows it), then ends with the answer: `saltsight job` for
//! the failing job, from a history in the lab. Stops by itself and removes
//! the lab.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::present::Style;
use super::tail::{TailArgs, TailHandler};
use super::{Outcome, Session};
use crate::config::master::MasterBusSettings;
use crate::config::{BusConfig, RepoSpec};
use crate::history::Store;
use crate::history::query::{self, JobFilter};
use crate::lab::{Lab, LabOptions};
use crate::metrics::Observer;
use crate::pipeline::assembly::consumer;
use crate::pipeline::{AgentOptions, Assembly, OutputChoice, SourceChoice};
use crate::sink::stdout::StdoutFormat;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Show the bus's events as `saltsight tail` does, instead of the records
    #[arg(long)]
    pub events: bool,
    /// With --events: events as JSON lines instead of the readable form
    #[arg(long)]
    pub json: bool,
    /// Keep the lab running after the jobs, until Ctrl-C (try `salt` yourself: the
    /// command to use is printed)
    #[arg(long)]
    pub keep: bool,
    #[command(flatten)]
    pub format: super::flags::FormatArgs,
}

/// The jobs the demo runs, as `salt` arguments.
const JOBS: &[&[&str]] = &[
    &["*", "test.ping"],
    &["*", "cmd.run", "echo hello from $(hostname)"],
    &["*", "state.apply", "ok"],
    &["*", "state.apply", "fail"],
];

pub async fn run(args: DemoArgs, session: Session) -> anyhow::Result<Outcome> {
    let Session {
        config: template,
        redactor,
        cancel,
        ..
    } = session;
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
    let mut config = template.clone();
    config.bus = BusConfig {
        endpoint: lab.endpoint(),
        endpoint_origin: "the demo lab".into(),
        ..template.bus.clone()
    };
    // The lab's master is the one watched: its connections, its data cache
    // and its accepted keys, not this machine's master's.
    if let Ok(master) = MasterBusSettings::load(&lab.master_config(), false) {
        config.presence = crate::config::presence::resolve(
            &crate::config::presence::PresenceSection::default(),
            Some((&master).into()),
        );
        config.rollouts.minions_dir = master.pki_dir.join("minions");
    }
    // Only the lab's state tree is watched (not this machine's master's).
    let states = lab.root().join("states");
    config.correlate.repos = match commit_state_tree(&states) {
        Ok(()) => vec![RepoSpec {
            name: "states".into(),
            dir: states,
            reference: "HEAD".into(),
            states: true,
        }],
        Err(e) => {
            eprintln!("Not correlating with git: {e:#}");
            Vec::new()
        }
    };
    let history_path = lab.root().join("history.db");
    let pipeline = if args.events {
        let consumer = consumer(&config, &SourceChoice::Live, cancel.clone());
        let tail_args = TailArgs {
            bus: Default::default(),
            wait: false,
            json: args.json,
            tags: Vec::new(),
            from: None,
            count: None,
            no_redact: false,
        };
        let handler = TailHandler::new(std::io::stdout(), &tail_args, cancel.clone(), &redactor);
        tokio::spawn(async move { consumer.run(handler).await.map(|(summary, _)| summary) })
    } else {
        // Stdout only (no spool, so no senders to start), and a history of
        // its own, in the lab, for the recap at the end.
        let assembly = Assembly::open(
            &config,
            &[],
            AgentOptions::view(
                OutputChoice::Stdout,
                args.format.stdout_format(),
                history_path.clone(),
                None,
            ),
        )?;
        let consumer = assembly.consumer(&config, cancel.clone());
        let (agent, _) = assembly.agent(
            &config,
            redactor.clone(),
            Observer::unregistered(&config.metrics),
        )?;
        tokio::spawn(async move { consumer.run(agent).await.map(|(summary, _)| summary) })
    };
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
    if !args.events {
        recap_failing_job(&history_path, args.format.stdout_format())?;
    }
    eprintln!("\nStopping the lab.");
    // The lab's Drop stops its processes by process group.
    tokio::task::spawn_blocking(move || drop(lab))
        .await
        .context("lab teardown")?;
    Ok(Outcome::Ok)
}

/// The answer the demo ends with: `saltsight job` for the newest job that
/// failed, read back from the history the pipeline wrote. Below readable
/// records on stdout; on stderr when stdout carries JSON lines, which stay
/// JSON lines.
fn recap_failing_job(history: &std::path::Path, records: StdoutFormat) -> anyhow::Result<()> {
    let store = Store::open_reader(history)?;
    let filter = JobFilter {
        failed_only: true,
        ..JobFilter::default()
    };
    let Some(failed) = query::jobs(&store, &filter)?.into_iter().next() else {
        eprintln!("\nNo job failed.");
        return Ok(());
    };
    let Some(recap) = query::job(&store, &failed.jid)? else {
        return Ok(());
    };
    eprintln!("\n>>> saltsight job {}", failed.jid);
    let (mut out, style): (Box<dyn Write>, Style) = match records {
        StdoutFormat::Text => (Box::new(std::io::stdout().lock()), Style::for_stdout()),
        StdoutFormat::Json => (Box::new(std::io::stderr().lock()), Style::plain()),
    };
    super::recap::show(&recap, style, &mut out)?;
    out.flush()?;
    Ok(())
}

/// Makes the lab's state tree a git checkout with one commit, so the records
/// show the commits each job ran under and `introduced_by`.
fn commit_state_tree(dir: &std::path::Path) -> anyhow::Result<()> {
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=saltsight demo",
            "-c",
            "user.email=demo@localhost",
            "commit",
            "-q",
            "-m",
            "The demo's state tree",
        ],
    ] {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .context("cannot run git")?;
        anyhow::ensure!(
            out.status.success(),
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl super::Action for DemoArgs {
    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, super::Failure> {
        super::on_bus(&overrides, |session| run(self, session))
    }
}
