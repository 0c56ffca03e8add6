//! The `saltsight` binary: parse the command line, load the config (exit 64 when it
//! is invalid, before any task starts), set up logging, run the subcommand.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use saltsight::app::{self, Source, Summary};
use saltsight::bus::ReaderStats;
use saltsight::bus::reader::Delivery;
use saltsight::cli::capture::CaptureHandler;
use saltsight::cli::log::LogLevel;
use saltsight::cli::reload::{self, Reloader};
use saltsight::cli::run::{Clock, Pipeline, RecordHandler, open_outputs};
use saltsight::cli::tail::TailHandler;
use saltsight::cli::{Cli, Command, Outcome, check_config, exit, log, privilege};
use saltsight::config::{self, Config, Overrides};
use saltsight::metrics::catalog::EventMetrics;
use saltsight::metrics::server::MetricsServer;
use saltsight::metrics::{Metrics, Observer};
use saltsight::record::redact::Redactor;
use saltsight::service::ServiceManager;
use saltsight::shutdown;
use tokio::signal::unix::Signal;
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Generate(args) = &cli.command {
        return match saltsight::cli::generate::run(args) {
            Ok(written) => {
                for path in written {
                    println!("{}", path.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("saltsight: {e:#}");
                ExitCode::from(exit::RUNTIME as u8)
            }
        };
    }
    if let Command::CheckConfig(args) = &cli.command {
        if args.example {
            print!("{}", config::file::example());
            return ExitCode::SUCCESS;
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("saltsight: cannot start the async runtime: {e}");
            return ExitCode::from(exit::RUNTIME as u8);
        }
    };
    // From here on a SIGHUP to `run` is a reload (handled once it runs), never
    // the default's exit.
    let hangups = match &cli.command {
        Command::Run(_) => {
            let _runtime = runtime.enter();
            Some(reload::listen_for_hangups())
        }
        _ => None,
    };
    let config = match config::load(&cli.global.overrides()) {
        Ok(config) => config,
        Err(errors) => {
            // A config error may quote a value (an upstream URL with its password).
            let text = errors.to_string();
            eprintln!("saltsight: {}", default_redactor().line(&text));
            return ExitCode::from(exit::CONFIG as u8);
        }
    };
    let redactor = match Redactor::new(&config.redact) {
        Ok(redactor) => redactor,
        Err(e) => {
            eprintln!("saltsight: {e}");
            return ExitCode::from(exit::CONFIG as u8);
        }
    };
    let log_level = log::init(&config, &redactor);
    if let Command::Run(args) = &cli.command {
        if let Some(why) = privilege::refuse_root(&config.bus.endpoint, args.allow_root) {
            tracing::error!("{why}");
            return ExitCode::from(exit::NO_PERMISSION as u8);
        }
    }
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    if let Command::CheckConfig(_) = cli.command {
        return match check_config::run(&config, &mut std::io::stdout().lock()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("saltsight: {e}");
                ExitCode::from(exit::RUNTIME as u8)
            }
        };
    }
    let reload = Reload {
        overrides: cli.global.overrides(),
        log_level,
        hangups,
    };
    match runtime.block_on(dispatch(cli.command, config, redactor.clone(), reload)) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::BadInput) => ExitCode::from(exit::BAD_INPUT as u8),
        Err(error) => {
            let text = format!("{error:#}");
            let text = redactor.line(&text);
            tracing::error!(error = %text, "Exiting on error.");
            eprintln!("saltsight: {text}");
            ExitCode::from(exit::RUNTIME as u8)
        }
    }
}

/// The built-in rules, for what is said before the config is read.
fn default_redactor() -> Redactor {
    Redactor::new(&config::redact::RedactConfig::default())
        .expect("the built-in redaction rules compile (a unit test builds them)")
}

/// What `run` needs to reload its config on SIGHUP.
struct Reload {
    overrides: Overrides,
    log_level: LogLevel,
    /// SIGHUP, registered before the config was read; `None` for other commands.
    hangups: Option<std::io::Result<Signal>>,
}

async fn dispatch(
    command: Command,
    config: Config,
    redactor: Redactor,
    reload: Reload,
) -> anyhow::Result<Outcome> {
    let cancel = shutdown::on_signals().context("cannot install signal handlers")?;
    let stats = Arc::new(ReaderStats::default());
    let queue = config.bus.queue_frames;
    let summary = match command {
        Command::Run(args) => {
            let (outputs, senders) = open_outputs(&config, args.output, Clock::Wall)?;
            let metrics = Metrics::new(
                &config.metrics,
                stats.clone(),
                senders.spools(),
                redactor.clone(),
            );
            // Bound before the pipeline starts: a port in use is an error now.
            let (server, web) = if config.metrics.enabled {
                let server =
                    MetricsServer::bind(&config.metrics, metrics.registry.clone(), stats.clone())
                        .await?;
                let web = server.web_switch();
                (Some(tokio::spawn(server.serve(cancel.clone()))), Some(web))
            } else {
                (None, None)
            };
            let service = ServiceManager::from_env();
            let reloader = Reloader::new(
                reload.overrides,
                config.clone(),
                reload.log_level,
                web,
                metrics.reloads.clone(),
            );
            match reload.hangups {
                Some(Ok(hangups)) => {
                    tokio::spawn(reloader.on_hangups(hangups, service.clone(), cancel.clone()));
                }
                Some(Err(error)) => {
                    tracing::warn!(%error, "Cannot listen for SIGHUP; config reloads are off.");
                }
                None => {}
            }
            tokio::spawn(
                service
                    .clone()
                    .follow_the_bus(stats.clone(), config.bus.endpoint.clone()),
            );
            let stopping = service.clone();
            let stop_signal = cancel.clone();
            tokio::spawn(async move {
                stop_signal.cancelled().await;
                stopping.stopping("Stopping: draining the pipeline and flushing the outputs.");
            });
            let watchdog = service.watchdog();
            let sending = senders.spawn();
            let handler = RecordHandler::new(
                Pipeline::from_config(&config),
                Clock::Wall,
                outputs,
                redactor,
                metrics.observer,
            );
            let source = Source::live(&config.bus, Delivery::Frames);
            let result = shutdown::within_grace(
                &cancel,
                app::run(
                    source,
                    queue,
                    handler,
                    cancel.clone(),
                    stats,
                    metrics.events.clone(),
                    watchdog,
                ),
            )
            .await;
            sending.stop().await;
            if let Some(server) = server {
                server.abort();
            }
            result?.0
        }
        Command::Tail(args) => {
            let handler = TailHandler::new(std::io::stdout(), &args, cancel.clone(), &redactor);
            let source = match &args.from {
                Some(path) => Source::Recording {
                    path: path.clone(),
                    max_frame_bytes: config.bus.max_frame_bytes,
                    progress: false,
                },
                None => Source::live(&config.bus, Delivery::Frames),
            };
            shutdown::within_grace(
                &cancel,
                app::run(
                    source,
                    queue,
                    handler,
                    cancel.clone(),
                    stats,
                    EventMetrics::default(),
                    None,
                ),
            )
            .await?
            .0
        }
        Command::Capture(args) => {
            let handler = CaptureHandler::create(&args.file)
                .with_context(|| format!("cannot create capture file {}", args.file.display()))?;
            if let Some(duration) = args.duration {
                stop_after(cancel.clone(), duration);
            }
            let source = Source::live(&config.bus, Delivery::RawChunks);
            let (summary, handler) = shutdown::within_grace(
                &cancel,
                app::run(
                    source,
                    queue,
                    handler,
                    cancel.clone(),
                    stats.clone(),
                    EventMetrics::default(),
                    None,
                ),
            )
            .await?;
            eprintln!(
                "captured {} bytes to {}",
                handler.bytes,
                args.file.display()
            );
            summary
        }
        Command::Replay(args) => {
            let (outputs, senders) = open_outputs(&config, args.output, Clock::EventTime)?;
            let sending = senders.spawn();
            let handler = RecordHandler::new(
                Pipeline::from_config(&config),
                Clock::EventTime,
                outputs,
                redactor,
                Observer::unregistered(&config.metrics),
            );
            let source = Source::Recording {
                path: args.file.clone(),
                max_frame_bytes: config.bus.max_frame_bytes,
                progress: true,
            };
            let result = shutdown::within_grace(
                &cancel,
                app::run(
                    source,
                    queue,
                    handler,
                    cancel.clone(),
                    stats,
                    EventMetrics::default(),
                    None,
                ),
            )
            .await;
            // A replay into an HTTP output ends when upstream has it all (or on a
            // signal: the spool keeps the rest for the next start).
            if result.is_ok() {
                sending.drain(&cancel).await;
            }
            sending.stop().await;
            let (summary, _) = result?;
            eprintln!("{}", describe(&summary));
            summary
        }
        Command::Demo(args) => {
            saltsight::cli::demo::run(args, &config, &redactor, cancel).await?;
            return Ok(Outcome::Ok);
        }
        Command::CheckConfig(_) | Command::Generate(_) => return Ok(Outcome::Ok),
    };
    let bad = !summary.decode_errors.is_empty()
        || summary.recording_desyncs > 0
        || summary.recording_trailing_bytes > 0;
    Ok(if bad { Outcome::BadInput } else { Outcome::Ok })
}

fn stop_after(cancel: CancellationToken, duration: std::time::Duration) {
    tokio::spawn(async move {
        tokio::time::sleep(duration).await;
        cancel.cancel();
    });
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
    )
}
