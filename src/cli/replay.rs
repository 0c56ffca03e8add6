//! `saltsight replay FILE`: a recording through the same pipeline as live, as fast
//! as it reads, on event time. A summary of what went through goes to stderr.

use std::path::PathBuf;

use clap::Args;

use super::flags::{FrameArgs, MasterArgs, Output};
use super::{Outcome, Session};
use crate::metrics::Observer;
use crate::pipeline::{AgentOptions, Assembly, Summary};
use crate::shutdown;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A saltsight capture file, or a raw dump of the publisher's socket bytes
    pub file: PathBuf,
    /// Where records go
    #[arg(long, value_enum, default_value = "none")]
    pub output: Output,
    /// Also write the records into a history at FILE (made when missing), as
    /// `run` writes its own: a config whose `[history] path` is FILE has
    /// `job`, `jobs`, `failures` and the rest answer from it
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    #[command(flatten)]
    pub format: super::flags::FormatArgs,
    #[command(flatten, next_help_heading = "Event bus")]
    pub master: MasterArgs,
    #[command(flatten, next_help_heading = "Event bus")]
    pub frames: FrameArgs,
}

pub async fn run(args: ReplayArgs, session: Session) -> anyhow::Result<Outcome> {
    let Session {
        config,
        outputs,
        redactor,
        cancel,
    } = session;
    let assembly = Assembly::open(
        &config,
        &outputs,
        AgentOptions::replay(
            args.file.clone(),
            args.output.into(),
            args.format.stdout_format(),
            args.history.clone(),
        ),
    )?;
    let consumer = assembly.consumer(&config, cancel.clone());
    let (agent, senders) =
        assembly.agent(&config, redactor, Observer::unregistered(&config.metrics))?;
    let sending = senders.spawn();
    let result = shutdown::within_grace(&cancel, consumer.run(agent)).await;
    // A replay into an HTTP output ends when upstream has it all (or on a
    // signal: the spool keeps the rest for the next start).
    if result.is_ok() {
        sending.drain(&cancel).await;
    }
    sending.stop().await;
    let (summary, _) = result?;
    eprintln!("{}", describe(&summary));
    Ok(Outcome::of(&summary))
}

/// A one-paragraph summary for stderr.
fn describe(summary: &Summary) -> String {
    let classes: Vec<String> = summary
        .events_by_class
        .iter()
        .map(|(class, n)| format!("{class}={n}"))
        .collect();
    let errors: Vec<String> = summary
        .decode_errors
        .iter()
        .map(|(reason, n)| format!("{reason}={n}"))
        .collect();
    format!(
        "replayed {} frames: {} events ({}); decode errors: {}; gaps: {}; frames skipped: {}; desyncs: {} ({} bytes set aside); trailing bytes: {}",
        summary.frames,
        summary.events(),
        classes.join(" "),
        if errors.is_empty() {
            "none".into()
        } else {
            errors.join(" ")
        },
        summary.gaps,
        summary.recording_skipped_frames,
        summary.recording_desyncs,
        summary.recording_discarded_bytes,
        summary.recording_trailing_bytes
    ) + if summary.recording_damaged {
        "; the recording is damaged after that (exit 3)"
    } else {
        ""
    }
}

impl super::Action for ReplayArgs {
    fn overrides(&self, o: &mut crate::config::Overrides) {
        self.master.apply(o);
        self.frames.apply(o);
    }

    fn execute(self, overrides: crate::config::Overrides) -> Result<Outcome, super::Failure> {
        super::on_bus(&overrides, |session| run(self, session))
    }
}
