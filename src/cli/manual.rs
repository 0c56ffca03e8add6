//! The man pages: clap's NAME, SYNOPSIS, DESCRIPTION and OPTIONS (from the same
//! definitions `--help` prints), then the sections a man page is read for —
//! EXIT STATUS (from [`super::exit::ALL`], the codes `main` exits with),
//! ENVIRONMENT (from each flag's `env`, as clap reads it), FILES (from the
//! defaults the config loader uses), SIGNALS and EXAMPLES (below, per
//! subcommand). Nothing is written twice, so a page cannot drift from the
//! binary.

use std::io::Write;

use clap::Command;
use clap_mangen::Man;
use roff::{Roff, bold, italic, roman};

use super::exit;
use crate::config::defaults::{DEFAULT_CONFIG_PATH, DEFAULT_SPOOL_DIR, DEFAULT_STATE_DIR};
use crate::config::master::DEFAULT_MASTER_CONFIG;

/// What a page says beyond clap's sections.
struct Extra {
    signals: &'static [(&'static str, &'static str)],
    examples: &'static [(&'static str, &'static str)],
    /// Files besides the config, the master's config and the bus socket.
    files: &'static [(&'static str, &'static str)],
    /// Whether it reads the live bus (the socket is among its FILES).
    reads_bus: bool,
}

const STOP: (&str, &str) = (
    "SIGINT, SIGTERM",
    "Stop reading the bus, handle what is queued, flush the outputs and exit 0 within 5 s. A second signal exits at once (130).",
);

const NONE: Extra = Extra {
    signals: &[],
    examples: &[],
    files: &[],
    reads_bus: false,
};

/// The extra sections of `subcommand` (`None`: the top-level page).
fn extra(subcommand: Option<&str>) -> Extra {
    match subcommand {
        None => Extra {
            signals: &[STOP],
            examples: &[
                (
                    "saltsight check-config",
                    "Check the config and whether the bus and the outputs can be reached.",
                ),
                (
                    "saltsight tail --tag 'salt/job/*/ret/*'",
                    "Watch job returns as they come.",
                ),
                ("saltsight run", "Run the agent (as the systemd unit does)."),
            ],
            files: &[
                (DEFAULT_SPOOL_DIR, "The HTTP outputs' spools (spool.dir)."),
                (
                    DEFAULT_STATE_DIR,
                    "The checkpoint of jobs in flight (state.dir).",
                ),
            ],
            reads_bus: true,
        },
        Some("run") => Extra {
            signals: &[
                STOP,
                (
                    "SIGHUP",
                    "Reload the config: log.level and the metrics web config are applied, every other change is named for a restart. A config that does not load changes nothing.",
                ),
            ],
            examples: &[
                (
                    "saltsight run",
                    "Records to the config's outputs, metrics on :10097.",
                ),
                (
                    "saltsight run --output stdout --web.listen-address 127.0.0.1:10097",
                    "Records on stdout only, metrics on loopback only.",
                ),
                (
                    "systemctl reload saltsight",
                    "Reload the config of the running service (SIGHUP).",
                ),
            ],
            files: &[
                (
                    DEFAULT_SPOOL_DIR,
                    "The HTTP outputs' spools: records not yet delivered (spool.dir).",
                ),
                (
                    DEFAULT_STATE_DIR,
                    "The checkpoint of jobs in flight, written every 60 s and at stop (state.dir).",
                ),
            ],
            reads_bus: true,
        },
        Some("tail") => Extra {
            signals: &[STOP],
            examples: &[
                (
                    "saltsight tail",
                    "Events as they come, readable, secrets masked.",
                ),
                (
                    "saltsight tail --json --tag 'salt/job/*/ret/*'",
                    "Job returns as JSON lines.",
                ),
                (
                    "saltsight tail --from /tmp/bus.cap --count 10",
                    "The first ten events of a recording.",
                ),
                (
                    "saltsight tail --wait",
                    "Wait for a master that is not up yet.",
                ),
            ],
            files: &[],
            reads_bus: true,
        },
        Some("capture") => Extra {
            signals: &[STOP],
            examples: &[(
                "saltsight capture /tmp/bus.cap --duration 10m",
                "Ten minutes of the bus, for replay (0600: it holds secrets).",
            )],
            files: &[],
            reads_bus: true,
        },
        Some("replay") => Extra {
            signals: &[STOP],
            examples: &[
                (
                    "saltsight replay /tmp/bus.cap --output stdout",
                    "The records a recording makes, on its event time.",
                ),
                (
                    "saltsight replay /tmp/bus.cap --output config",
                    "The same into the config's outputs (backfill); exits once delivered.",
                ),
            ],
            files: &[(
                DEFAULT_SPOOL_DIR,
                "The HTTP outputs' spools, with --output config.",
            )],
            reads_bus: false,
        },
        Some("check-config") => Extra {
            signals: &[],
            examples: &[
                (
                    "saltsight check-config",
                    "The resolved config; connects to the bus and each output once.",
                ),
                (
                    "saltsight check-config --no-environment",
                    "The config alone, connecting to nothing.",
                ),
                (
                    "saltsight check-config --example > /etc/saltsight/saltsight.toml",
                    "Every key at its default, documented.",
                ),
            ],
            files: &[],
            reads_bus: true,
        },
        Some("demo") => Extra {
            signals: &[STOP],
            examples: &[
                (
                    "saltsight demo",
                    "A Salt master and 3 minions on loopback, a few jobs, their records.",
                ),
                (
                    "saltsight demo --events --keep",
                    "The bus instead of the records; keep the lab until Ctrl-C.",
                ),
            ],
            files: &[],
            reads_bus: false,
        },
        Some(_) => NONE,
    }
}

/// Every page: `saltsight.1` and one per visible subcommand.
pub fn pages(cli: Command) -> Vec<(String, Vec<u8>)> {
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    let mut pages = vec![page(&cli, None)];
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        pages.push(page(sub, Some(sub.get_name())));
    }
    pages
}

fn page(cmd: &Command, subcommand: Option<&str>) -> (String, Vec<u8>) {
    let name = match subcommand {
        Some(sub) => format!("saltsight-{sub}"),
        None => "saltsight".to_string(),
    };
    let man = Man::new(cmd.clone()).manual("saltsight");
    let mut out = Vec::new();
    let written: std::io::Result<()> = (|| {
        man.render_title(&mut out)?;
        man.render_name_section(&mut out)?;
        man.render_synopsis_section(&mut out)?;
        man.render_description_section(&mut out)?;
        man.render_options_section(&mut out)?;
        if subcommand.is_none() {
            man.render_subcommands_section(&mut out)?;
        }
        out.write_all(sections(cmd, subcommand).render().as_bytes())?;
        man.render_version_section(&mut out)
    })();
    written.expect("writing into a Vec cannot fail");
    (format!("{name}.1"), out)
}

/// EXIT STATUS, ENVIRONMENT, FILES, SIGNALS and EXAMPLES.
fn sections(cmd: &Command, subcommand: Option<&str>) -> Roff {
    let extra = extra(subcommand);
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for status in exit::ALL {
        roff.control("TP", []);
        roff.text([bold(status.code.to_string())]);
        roff.text([roman(format!("{} ({})", status.meaning, status.name))]);
    }
    let mut env: Vec<(String, String)> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let var = a.get_env()?.to_string_lossy().into_owned();
            let flag = a.get_long().map_or_else(String::new, |l| format!("--{l}"));
            Some((var, flag))
        })
        .collect();
    env.sort();
    env.dedup();
    if !env.is_empty() {
        roff.control("SH", ["ENVIRONMENT"]);
        for (var, flag) in env {
            roff.control("TP", []);
            roff.text([bold(var)]);
            roff.text([roman(format!("As {flag}; the flag wins."))]);
        }
        roff.control("TP", []);
        roff.text([bold("JOURNAL_STREAM")]);
        roff.text([roman(
            "Set by systemd: when it names stderr, log lines carry no timestamp (the journal adds one).",
        )]);
    }
    roff.control("SH", ["FILES"]);
    let mut files: Vec<(String, String)> = vec![
        (
            DEFAULT_CONFIG_PATH.to_string(),
            "saltsight's config (--config.file), read if present. Every key: saltsight check-config --example.".to_string(),
        ),
        (
            DEFAULT_MASTER_CONFIG.to_string(),
            "The Salt master's config and master.d/*.conf, read for its id, the bus and its state tree (--bus.master-config).".to_string(),
        ),
    ];
    if extra.reads_bus {
        files.push((
            "/var/run/salt/master/master_event_pub.ipc".to_string(),
            "The master's event publisher (its sock_dir), only read: 0600 on Salt 3006, 0660 on 3007+. Or 127.0.0.1:4512 with ipc_mode: tcp.".to_string(),
        ));
    }
    files.extend(
        extra
            .files
            .iter()
            .map(|(path, what)| (path.to_string(), what.to_string())),
    );
    for (path, what) in files {
        roff.control("TP", []);
        roff.text([italic(path)]);
        roff.text([roman(what)]);
    }
    if !extra.signals.is_empty() {
        roff.control("SH", ["SIGNALS"]);
        for (signal, what) in extra.signals {
            roff.control("TP", []);
            roff.text([bold(*signal)]);
            roff.text([roman(*what)]);
        }
    }
    if !extra.examples.is_empty() {
        roff.control("SH", ["EXAMPLES"]);
        for (command, what) in extra.examples {
            roff.control("TP", []);
            roff.text([bold(*command)]);
            roff.text([roman(*what)]);
        }
    }
    roff.control("SH", ["SEE ALSO"]);
    roff.text([roman(
        "/usr/share/doc/saltsight/README.md, install.md (the service), metrics.md, records.md, security.md",
    )]);
    roff
}
