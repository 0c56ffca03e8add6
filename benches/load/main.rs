//! The load test: the whole agent at the master's full publish rate, in CPU per
//! event, beside Salt's own subscriber and a bare Python reader on the same bus.
//!
//! For each ipc mode (`ipc`, `tcp`) it starts a real Salt 3008.3 master on
//! loopback (`saltsight::lab`, no minions), makes the lab's state tree a git
//! checkout (the correlator watches it), and for each mix (`ping`, `failing`,
//! `highstate`, see `traffic.rs`) and round:
//!
//! 1. starts `saltsight run` (its default outputs: records to stdout, into a
//!    file, and the history; `--outputs durable`: a file output and an http
//!    output to a local sink beside the history; `--outputs none`: no output
//!    and no history, what reading, decoding and the stages cost alone, its
//!    end seen in its count of job events; metrics on, checkpoints on,
//!    deadlines of 10 s), Salt's own subscriber
//!    (`salt.utils.event.get_event`, the way engines and the reactor read) and a
//!    bare Python reader (a socket and `msgpack.Unpacker`), each attached to the
//!    master's event publisher;
//! 2. fires `load/hello` events until all three have seen one;
//! 3. writes the mix's jobs into the master's pull socket (`master_event_pull.ipc`
//!    or its TCP port) the way `fire_event` does, as fast as the master takes
//!    them, then one last job whose return marks the end;
//! 4. takes each subscriber's CPU time and context switches from /proc when it
//!    has the end (saltsight: when a record of the end job's return is in its
//!    file; with no outputs, when its count of job events has them all), so
//!    each is measured over the same traffic;
//! 5. reads saltsight's counters from /metrics (events, drops, gaps,
//!    reconnects), its peak RSS, then, once it has settled (no wake-up for
//!    65 s: the last deadlines passed, a rollout's coalesced revision (30 s)
//!    and the checkpoint (60 s after a change) out, its batches sealed), its
//!    wake-ups and
//!    RSS idle (idle before traffic is measured the same way, once its start
//!    has settled); then SIGTERM, and it must drain and exit 0.
//!
//! Run by hand, not in CI (figures depend on the machine; nothing here passes
//! or fails on a time):
//!
//! ```text
//! cargo bench --bench load                                  # all mixes, both modes, 3 rounds
//! cargo bench --bench load -- --mix ping --ipc ipc --rounds 1 --events 100000
//! ```
//!
//! Options: `--mix ping,failing,highstate`, `--ipc ipc,tcp`, `--events N` (job
//! events per run, default 150,000), `--rounds N` (default 3), `--idle SECS`
//! (default 10), `--json FILE` (one JSON line per run, appended), `--attach CMD`
//! (a command attached to saltsight over each run's traffic, `{pid}` and `{run}`
//! replaced, stopped by SIGINT: `'perf record -g -o /tmp/{run}.data -p {pid}'`,
//! `'strace -c -f -o /tmp/{run}.txt -p {pid}'`; it costs saltsight CPU, so not
//! with figures that count), `--saltsight PATH` (another build, for A/B),
//! `--outputs default|durable|none` (default: saltsight's own defaults),
//! `--minions N` (each `big` job's, default 50,000), `--alone true` (saltsight
//! the only subscriber), `--deadline SECS` (jobs' deadline, default 10),
//! `--dump FILE` (write the first mix's traffic to FILE as a raw bus dump and
//! start nothing: `saltsight replay FILE` under a profiler). It
//! prints one line per run and a table of medians (min–max) at the end, a
//! row group per ipc mode, mix and the bare reader's mode (`waking` or
//! `quiet`: over tcp it runs in one of two, see [`BARE_WAKING_SWITCHES`]). The
//! README's and docs/performance.md's figures are its lines, one round each,
//! with the command of each. Everything it starts is stopped by pid, and it stops
//! by itself: every wait has a deadline.

mod procfs;
mod sink;
mod traffic;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use saltsight::bus::Endpoint;
use saltsight::lab::{Lab, LabOptions};

use procfs::Usage;
use sink::Sink;
use traffic::{LOAD_SLS, Mix, Traffic};

struct Options {
    mixes: Vec<Mix>,
    tcp: Vec<bool>,
    events: u64,
    rounds: usize,
    idle: Duration,
    json: Option<PathBuf>,
    /// A command attached to saltsight over each run's traffic (`{pid}` and
    /// `{run}` replaced), stopped with SIGINT: a profiler, strace.
    attach: Option<String>,
    /// The saltsight binary (default: this build's).
    saltsight: PathBuf,
    /// Where saltsight's records go.
    outputs: Outputs,
    /// Minions of each `big` job.
    big_minions: usize,
    /// saltsight the only subscriber (no Salt or bare reader beside it).
    alone: bool,
    /// Jobs' deadline in saltsight's config.
    deadline: Duration,
    /// Write the first mix's traffic (`--events` of it) to this file as a
    /// raw bus dump, and start nothing: for `saltsight replay` under a
    /// profiler.
    dump: Option<PathBuf>,
}

/// Where saltsight's records go in a run (`--outputs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outputs {
    /// saltsight's defaults: records to stdout (into a file), the history.
    Default,
    /// A file output and an http output to a local sink, beside the history.
    Durable,
    /// None at all, and no history: what reading, decoding and the stages
    /// cost alone (`run --output none`, `[history] enabled = false`).
    None,
}

fn options() -> anyhow::Result<Option<Options>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` adds `--bench`; `cargo test --benches` does not: then only
    // say what this is.
    let Some(at) = args.iter().position(|a| a == "--bench") else {
        println!("load test: run it with `cargo bench --bench load` (see benches/load/main.rs)");
        return Ok(None);
    };
    args.remove(at);
    let mut o = Options {
        mixes: vec![Mix::Ping, Mix::Failing, Mix::Highstate],
        tcp: vec![false, true],
        events: 150_000,
        rounds: 3,
        idle: Duration::from_secs(10),
        json: None,
        attach: None,
        saltsight: PathBuf::from(env!("CARGO_BIN_EXE_saltsight")),
        outputs: Outputs::Default,
        big_minions: 50_000,
        alone: false,
        deadline: Duration::from_secs(10),
        dump: None,
    };
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--mix" => {
                o.mixes = value
                    .split(',')
                    .map(|m| Mix::parse(m).with_context(|| format!("no mix {m}")))
                    .collect::<anyhow::Result<_>>()?;
            }
            "--ipc" => {
                o.tcp = value
                    .split(',')
                    .map(|m| match m {
                        "ipc" => Ok(false),
                        "tcp" => Ok(true),
                        _ => bail!("--ipc takes ipc and/or tcp"),
                    })
                    .collect::<anyhow::Result<_>>()?;
            }
            "--events" => o.events = value.parse()?,
            "--rounds" => o.rounds = value.parse()?,
            "--idle" => o.idle = Duration::from_secs(value.parse()?),
            "--json" => o.json = Some(value.into()),
            "--attach" => o.attach = Some(value),
            "--minions" => o.big_minions = value.parse()?,
            "--alone" => o.alone = value.parse()?,
            "--deadline" => o.deadline = Duration::from_secs(value.parse()?),
            "--dump" => o.dump = Some(value.into()),
            "--saltsight" => o.saltsight = value.into(),
            "--outputs" => {
                o.outputs = match value.as_str() {
                    "default" => Outputs::Default,
                    "durable" => Outputs::Durable,
                    "none" => Outputs::None,
                    _ => bail!("--outputs takes default, durable or none"),
                }
            }
            _ => bail!("unknown option {flag}"),
        }
    }
    Ok(Some(o))
}

fn main() -> anyhow::Result<()> {
    let Some(options) = options()? else {
        return Ok(());
    };
    if let Some(path) = &options.dump {
        return dump(path, &options);
    }
    let mut runs = Vec::new();
    for &tcp in &options.tcp {
        let lab = Lab::start(LabOptions {
            minions: Vec::new(),
            ipc_mode_tcp: tcp,
            ..LabOptions::default()
        })?;
        commit_states(lab.root())?;
        for round in 0..options.rounds {
            for &mix in &options.mixes {
                let run = run_once(&lab, tcp, mix, &options)
                    .with_context(|| format!("{} {} round {round}", ipc_name(tcp), mix.name()))?;
                println!("{}", run.line());
                if let Some(path) = &options.json {
                    let mut file = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)?;
                    writeln!(file, "{}", run.json())?;
                }
                runs.push(run);
            }
        }
    }
    println!("\n{}", table(&runs));
    Ok(())
}

fn ipc_name(tcp: bool) -> &'static str {
    if tcp { "tcp" } else { "ipc" }
}

/// `--dump FILE`: the first mix's traffic as the publisher sends it (each
/// frame behind its 4-byte length), `--events` of it, then the end job.
fn dump(path: &Path, options: &Options) -> anyhow::Result<()> {
    let mix = *options.mixes.first().context("a mix")?;
    let mut traffic = Traffic::new(mix, options.big_minions);
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let (mut sent, mut frames) = (0u64, Vec::new());
    while sent < options.events {
        frames.clear();
        traffic.next_job(&mut frames);
        for f in &frames {
            out.write_all(f)?;
        }
        sent += frames.len() as u64;
    }
    let end = traffic.jid();
    frames.clear();
    traffic.end_job(&end, &mut frames);
    for f in &frames {
        out.write_all(f)?;
    }
    out.flush()?;
    println!(
        "{sent} events of {} written to {}",
        mix.name(),
        path.display()
    );
    Ok(())
}

/// The lab's state tree as a git checkout with the load SLS committed.
fn commit_states(root: &Path) -> anyhow::Result<()> {
    let states = root.join("states");
    std::fs::write(states.join("load.sls"), LOAD_SLS)?;
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &[
            "-c",
            "user.name=load",
            "-c",
            "user.email=load@localhost",
            "commit",
            "-qm",
            "load test states",
        ],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(&states)
            .status()?;
        if !status.success() {
            bail!("git {args:?} failed in {}", states.display());
        }
    }
    Ok(())
}

/// A child stopped by its pid when dropped (SIGKILL, if it has not exited).
struct Proc {
    child: Child,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, signal: Signal) {
        let _ = kill(Pid::from_raw(self.child.id() as i32), signal);
    }

    /// Waits for it to exit, up to `timeout`.
    fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal(Signal::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// A Python subscriber: its process, its stdin (closed to let it exit), the
/// lines it says.
struct Subscriber {
    name: &'static str,
    proc: Proc,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    hello: bool,
    done: Option<(u64, String, Usage)>,
}

impl Subscriber {
    fn spawn(name: &'static str, venv: &Path, args: &[&str]) -> anyhow::Result<Subscriber> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/load/subscribers.py");
        let mut child = Command::new(venv.join("bin/python"))
            .arg(script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start the {name} subscriber"))?;
        let stdout = child.stdout.take().context("stdout")?;
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Ok(Subscriber {
            name,
            proc: Proc { child },
            stdin,
            lines,
            hello: false,
            done: None,
        })
    }

    /// Takes what it said so far; at `done`, its /proc reading, taken at once.
    fn poll(&mut self, start: Usage) {
        while let Ok(line) = self.lines.try_recv() {
            if line == "hello" {
                self.hello = true;
            } else if let Some(rest) = line.strip_prefix("done ") {
                let usage = Usage::of(self.proc.pid()).unwrap_or_default().since(start);
                let mut words = rest.split(' ');
                let n = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
                let reason = words.next().unwrap_or("").to_string();
                self.done = Some((n, reason, usage));
            }
        }
    }

    fn stop(&mut self) {
        drop(self.stdin.take());
        if self.proc.wait(Duration::from_secs(5)).is_none() {
            self.proc.signal(Signal::SIGKILL);
        }
    }
}

/// One subscriber's figures over one run.
#[derive(Debug, Clone)]
struct Figures {
    name: &'static str,
    received: u64,
    /// How its stream ended: `end`, `eof` (the master dropped it), `term`
    /// (it never had the end).
    ended: String,
    usage: Usage,
}

#[derive(Debug, Clone, Default)]
struct AgentFigures {
    dropped: u64,
    /// Times the reader held for the consumer past a burst, and for how long.
    holds: u64,
    held_ms: f64,
    /// Frames that waited in the spill on disk.
    spilled: u64,
    /// Pipeline steps over 20 ms and the bound of the longest, by step
    /// (`saltsight_pipeline_step_seconds`): `event 2 (≤ 0.1 s), tick 0 ...`.
    steps: String,
    gaps: u64,
    disconnects: u64,
    /// Times the master's log says it dropped a slow subscriber.
    discards: u64,
    records: u64,
    peak_rss: u64,
    /// Idle before the traffic.
    fresh_wakeups: f64,
    fresh_rss: u64,
    /// Idle after it.
    idle_rss: u64,
    idle_wakeups: f64,
    idle_cpu_ms: f64,
    exit: String,
    posts: u64,
}

struct Run {
    tcp: bool,
    mix: Mix,
    sent: u64,
    bytes: u64,
    secs: f64,
    load_before: String,
    load_after: String,
    subscribers: Vec<Figures>,
    agent: AgentFigures,
    master: Usage,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// How long the agent must not wake before idle is measured: longer than
/// anything it still owes after a change (the checkpoint, written
/// `state.checkpoint_interval` (60 s) after the change; a rollout's
/// coalesced revision, 30 s; the last deadlines and seals).
const QUIET: Duration = Duration::from_secs(65);

/// Waits until `pid` has not woken for [`QUIET`] (its work after the traffic
/// done), at most two minutes: then idle is idle.
fn settled(pid: u32) {
    let give_up = Instant::now() + Duration::from_secs(120);
    let (mut last, mut since) = (Usage::of(pid).map(|u| u.voluntary), Instant::now());
    while Instant::now() < give_up && since.elapsed() < QUIET {
        std::thread::sleep(Duration::from_millis(250));
        let now = Usage::of(pid).map(|u| u.voluntary);
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
}

fn run_once(lab: &Lab, tcp: bool, mix: Mix, options: &Options) -> anyhow::Result<Run> {
    let venv = saltsight::lab::default_venv();
    let mut dir = tempfile::Builder::new()
        .prefix("saltsight-load-")
        .tempdir()?;
    if std::env::var_os("LOAD_KEEP").is_some() {
        eprintln!("keeping {}", dir.path().display());
        dir.disable_cleanup(true);
    }
    let sink = Sink::start()?;
    let metrics_port = free_port()?;
    let records = dir.path().join("records.jsonl");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"load\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndefault_deadline = \"{}s\"\n\
             [spool]\ndir = {:?}\n[state]\ndir = {:?}\n\
             [metrics]\nlisten_address = \"127.0.0.1:{metrics_port}\"\n\
             [log]\nlevel = \"warn,saltsight::pipeline::consumer=info\"\n{}",
            lab.master_config().display().to_string(),
            options.deadline.as_secs(),
            dir.path().join("spool").display().to_string(),
            dir.path().join("state").display().to_string(),
            match options.outputs {
                Outputs::Durable => format!(
                    "[[output]]\ntype = \"file\"\npath = {:?}\nmax_bytes = 100000000000\n\
                     [[output]]\ntype = \"http\"\nname = \"sink\"\nurl = {:?}\n",
                    records.display().to_string(),
                    sink.url,
                ),
                Outputs::None => "[history]\nenabled = false\n".into(),
                Outputs::Default => String::new(),
            },
        ),
    )?;
    // The defaults write records to stdout (JSON lines, not a terminal).
    let stdout = match options.outputs {
        Outputs::Default => Stdio::from(std::fs::File::create(&records)?),
        Outputs::Durable | Outputs::None => Stdio::null(),
    };
    let log = std::fs::File::create(dir.path().join("saltsight.log"))?;
    let mut agent = Proc {
        child: Command::new(&options.saltsight)
            .arg("--config")
            .arg(&config)
            .args(["run", "--allow-root"])
            .args(match options.outputs {
                Outputs::None => &["--output", "none"][..],
                Outputs::Default | Outputs::Durable => &[],
            })
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(log)
            .spawn()
            .context("cannot start saltsight run")?,
    };
    let endpoint = match lab.endpoint() {
        Endpoint::Unix(path) => path.display().to_string(),
        Endpoint::Tcp(addr) => addr.to_string(),
    };
    let end_jid = Traffic::new(mix, 0).jid();
    let master_config = lab.master_config().display().to_string();
    let mut subscribers = if options.alone {
        Vec::new()
    } else {
        vec![
            Subscriber::spawn("salt", &venv, &["salt", &master_config, &end_jid])?,
            Subscriber::spawn("bare", &venv, &["bare", &endpoint, &end_jid])?,
        ]
    };
    let mut pull = connect_pull(lab)?;

    // Everyone listening: a hello seen by all three.
    let metrics = std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, metrics_port));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        pull.write_all(&traffic::hello())?;
        std::thread::sleep(Duration::from_millis(100));
        for s in &mut subscribers {
            s.poll(Usage::default());
        }
        let agent_hello = scrape(metrics)
            .ok()
            .is_some_and(|m| sample(&m, "saltsight_events_total{class=\"other\"}") > 0.0);
        if agent_hello && subscribers.iter().all(|s| s.hello) {
            break;
        }
        let exited = matches!(agent.child.try_wait(), Ok(Some(_)));
        if exited || Instant::now() > deadline {
            let log = std::fs::read_to_string(dir.path().join("saltsight.log")).unwrap_or_default();
            bail!(
                "not every subscriber saw a hello within 60 s (saltsight: {agent_hello}, {}); saltsight's log:\n{log}",
                subscribers
                    .iter()
                    .map(|s| format!("{}: {}", s.name, s.hello))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    // Idle before any traffic: wake-ups and memory of a fresh agent, once
    // its start's own work is done.
    settled(agent.pid());
    let fresh_start = Usage::of(agent.pid()).context("saltsight is gone")?;
    std::thread::sleep(options.idle);
    let fresh = Usage::of(agent.pid())
        .unwrap_or_default()
        .since(fresh_start);
    let fresh_rss = procfs::rss(agent.pid()).map_or(0, |r| r.1);
    let before = scrape(metrics)?;

    // The traffic, from its own thread, as fast as the master takes it.
    let discards_before = master_discards(lab);
    let master_pgid = master_pgid(lab)?;
    let load_before = procfs::loadavg();
    let agent_start = Usage::of(agent.pid()).context("saltsight is gone")?;
    let starts: Vec<Usage> = subscribers
        .iter()
        .map(|s| Usage::of(s.proc.pid()).unwrap_or_default())
        .collect();
    let master_start = Usage::of_group(master_pgid);
    let mut perf = match &options.attach {
        Some(command) => {
            let command = command
                .replace("{pid}", &agent.pid().to_string())
                .replace("{run}", &format!("{}-{}", ipc_name(tcp), mix.name()));
            let mut words = command.split_whitespace();
            Some(Proc {
                child: Command::new(words.next().context("--attach is empty")?)
                    .args(words)
                    .stdout(Stdio::null())
                    .spawn()
                    .with_context(|| format!("cannot start {command}"))?,
            })
        }
        None => None,
    };
    let started = Instant::now();
    let events = options.events;
    let big_minions = options.big_minions;
    let end = end_jid.clone();
    let generator = std::thread::spawn(move || -> anyhow::Result<(u64, u64, String)> {
        let mut traffic = Traffic::new(mix, big_minions);
        let mut out = std::io::BufWriter::with_capacity(256 * 1024, pull);
        let (mut sent, mut bytes) = (0u64, 0u64);
        let mut frames = Vec::new();
        let mut last_jid = String::new();
        while sent < events {
            frames.clear();
            traffic.next_job(&mut frames);
            last_jid = last_job_jid(&frames);
            for f in &frames {
                out.write_all(f)?;
                bytes += f.len() as u64;
            }
            sent += frames.len() as u64;
        }
        frames.clear();
        traffic.end_job(&end, &mut frames);
        for f in &frames {
            out.write_all(f)?;
            bytes += f.len() as u64;
        }
        sent += frames.len() as u64;
        out.flush()?;
        Ok((sent, bytes, last_jid))
    });
    let mut generator = Some(generator);

    // Each subscriber measured when it has the end.
    let mut agent_done: Option<Usage> = None;
    let mut tail = Tail::new(&records);
    let deadline = Instant::now() + Duration::from_secs(600);
    // When the generator was done, and what it wrote.
    let (mut generated, mut written) = (None, None);
    // With no outputs, the end is in the agent's count of job events, asked
    // for only once the generator is done and then every 50 ms (a scrape
    // costs the agent CPU too).
    let mut asked = Instant::now();
    // With outputs, the end is a record of the end job's return, as the
    // Python subscribers end at that return: its `job_published` comes from
    // the `new` event before it, and taken as the end it could leave the
    // return uncounted at the scrape.
    let end_line = format!("\"jid\":\"{end_jid}\"");
    let is_end = |l: &str| l.contains(&end_line) && !l.starts_with("{\"kind\":\"job_published\"");
    while agent_done.is_none() || subscribers.iter().any(|s| s.done.is_none()) {
        std::thread::sleep(Duration::from_millis(10));
        if let Some(done) = generator.take_if(|g| g.is_finished()) {
            generated = Some(started.elapsed());
            written = Some(joined(done));
        }
        let has_end = agent_done.is_none()
            && match options.outputs {
                Outputs::None => match &written {
                    Some(Ok((all, ..))) if asked.elapsed() >= Duration::from_millis(50) => {
                        asked = Instant::now();
                        let now = scrape(metrics)?;
                        job_events(&now) - job_events(&before) >= *all as f64
                    }
                    _ => false,
                },
                Outputs::Default | Outputs::Durable => tail.find(is_end)?,
            };
        if has_end {
            agent_done = Some(
                Usage::of(agent.pid())
                    .unwrap_or_default()
                    .since(agent_start),
            );
            if let Some(mut perf) = perf.take() {
                perf.signal(Signal::SIGINT);
                perf.wait(Duration::from_secs(30));
            }
        }
        for (s, start) in subscribers.iter_mut().zip(&starts) {
            s.poll(*start);
        }
        if Instant::now() > deadline {
            // Whoever never had the end says what it had (SIGTERM).
            for (s, start) in subscribers.iter_mut().zip(&starts) {
                if s.done.is_none() {
                    let usage = Usage::of(s.proc.pid()).unwrap_or_default().since(*start);
                    s.proc.signal(Signal::SIGTERM);
                    if let Ok(line) = s.lines.recv_timeout(Duration::from_secs(5)) {
                        let n = line
                            .split(' ')
                            .nth(1)
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(0);
                        s.done = Some((n, "term".into(), usage));
                    }
                }
            }
            if agent_done.is_none() {
                agent_done = Some(
                    Usage::of(agent.pid())
                        .unwrap_or_default()
                        .since(agent_start),
                );
            }
            break;
        }
    }
    let master = Usage::of_group(master_pgid).since(master_start);
    let load_after = procfs::loadavg();
    let secs = generated.unwrap_or_else(|| started.elapsed()).as_secs_f64();
    let (sent, bytes, last_jid) = match (written, generator) {
        (Some(written), _) => written?,
        (None, Some(generator)) => joined(generator)?,
        (None, None) => unreachable!("the generator is joined once"),
    };

    let after = scrape(metrics)?;
    let discarded: Vec<String> = master_discards(lab)
        .into_iter()
        .skip(discards_before.len())
        .collect();
    for line in &discarded {
        eprintln!("  master: {line}");
    }
    eprintln!(
        "  saltsight checkpoint: {:.0} KB, encoded in {:.1} ms, written in {:.1} ms (the last)",
        sample(&after, "saltsight_checkpoint_bytes") / 1e3,
        sample(&after, "saltsight_checkpoint_pause_duration_seconds") * 1e3,
        sample(&after, "saltsight_checkpoint_write_duration_seconds") * 1e3,
    );
    // What saltsight says of the steps that held its pipeline.
    if let Ok(log) = std::fs::read_to_string(dir.path().join("saltsight.log")) {
        for line in log.lines().filter(|l| l.contains("held the pipeline")) {
            eprintln!("  saltsight: {line}");
        }
    }
    let discards = discarded.len() as u64;
    let count = |m: &str, series: &str| sample(m, series);
    let agent_received = (job_events(&after) - job_events(&before)) as u64;
    let mut figures = AgentFigures {
        dropped: sum(&after, "saltsight_events_dropped_total{"),
        holds: count(&after, "saltsight_bus_holds_total") as u64,
        held_ms: count(&after, "saltsight_bus_held_seconds_total") * 1e3,
        spilled: count(&after, "saltsight_bus_spilled_frames_total") as u64,
        steps: steps(&after),
        gaps: sum(&after, "saltsight_bus_gaps_total{"),
        disconnects: (count(&after, "saltsight_bus_connects_total") as u64).saturating_sub(1),
        discards,
        records: sum(&after, "saltsight_records_total{"),
        peak_rss: procfs::rss(agent.pid()).map_or(0, |r| r.0),
        fresh_wakeups: fresh.voluntary as f64 / options.idle.as_secs_f64(),
        fresh_rss,
        ..AgentFigures::default()
    };

    // Idle: once the last job's verdicts are out and its batch sealed.
    let settle = Instant::now() + Duration::from_secs(60);
    let last = format!("\"jid\":\"{last_jid}\"");
    while options.outputs != Outputs::None
        && !tail.find(|l| l.starts_with("{\"kind\":\"job_completed\"") && l.contains(&last))?
    {
        if Instant::now() > settle {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The other jobs' deadlines (their missing minions) and the last seal.
    settled(agent.pid());
    let idle_start = Usage::of(agent.pid()).unwrap_or_default();
    std::thread::sleep(options.idle);
    let idle = Usage::of(agent.pid()).unwrap_or_default().since(idle_start);
    figures.idle_wakeups = idle.voluntary as f64 / options.idle.as_secs_f64();
    figures.idle_cpu_ms = idle.cpu * 1e3;
    figures.idle_rss = procfs::rss(agent.pid()).map_or(0, |r| r.1);
    figures.posts = sink.requests();

    agent.signal(Signal::SIGTERM);
    figures.exit = match agent.wait(Duration::from_secs(10)) {
        Some(status) => status.code().map_or("signal".into(), |c| c.to_string()),
        None => "did not exit in 10 s".into(),
    };
    let mut all = vec![Figures {
        name: "saltsight",
        received: agent_received,
        ended: "end".into(),
        usage: agent_done.unwrap_or_default(),
    }];
    for s in &mut subscribers {
        let (received, ended, usage) =
            s.done
                .clone()
                .unwrap_or((0, "none".into(), Usage::default()));
        all.push(Figures {
            name: s.name,
            received,
            ended,
            usage,
        });
        s.stop();
    }
    Ok(Run {
        tcp,
        mix,
        sent,
        bytes,
        secs,
        load_before,
        load_after,
        subscribers: all,
        agent: figures,
        master,
    })
}

/// The jid of the last job in `frames` (its `new` comes first).
fn last_job_jid(frames: &[Vec<u8>]) -> String {
    frames
        .iter()
        .rev()
        .find_map(|f| {
            let text = String::from_utf8_lossy(&f[..f.len().min(80)]).into_owned();
            let at = text.find("salt/job/")? + 9;
            Some(text[at..at + 20].to_string())
        })
        .unwrap_or_default()
}

/// The master's pull socket (it is the one write the load test makes).
fn connect_pull(lab: &Lab) -> anyhow::Result<Box<dyn Write + Send>> {
    Ok(match lab.endpoint() {
        Endpoint::Unix(path) => {
            let pull = path.with_file_name("master_event_pull.ipc");
            Box::new(
                std::os::unix::net::UnixStream::connect(&pull)
                    .with_context(|| format!("cannot connect to {}", pull.display()))?,
            )
        }
        Endpoint::Tcp(_) => {
            let text = std::fs::read_to_string(lab.master_config())?;
            let port: u16 = text
                .lines()
                .find_map(|l| l.strip_prefix("tcp_master_pull_port:"))
                .context("no tcp_master_pull_port in the lab's master config")?
                .trim()
                .parse()?;
            Box::new(TcpStream::connect((Ipv4Addr::LOCALHOST, port))?)
        }
    })
}

/// The master's process group (its pidfile names the leader).
fn master_pgid(lab: &Lab) -> anyhow::Result<u32> {
    let pidfile = lab.root().join("var/run/salt-master.pid");
    let pid = std::fs::read_to_string(&pidfile)
        .with_context(|| format!("cannot read {}", pidfile.display()))?;
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))?;
    stat[stat.rfind(')').context("stat")? + 2..]
        .split(' ')
        .nth(2)
        .context("pgrp")?
        .parse()
        .context("pgrp")
}

/// Follows a growing file of lines.
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: String,
}

impl Tail {
    fn new(path: &Path) -> Tail {
        Tail {
            path: path.to_path_buf(),
            offset: 0,
            partial: String::new(),
        }
    }

    /// Reads what was appended since, line by line, until a line for which
    /// `found` holds (the lines after it are left for the next call).
    fn find(&mut self, found: impl Fn(&str) -> bool) -> anyhow::Result<bool> {
        use std::io::Seek;
        let Ok(file) = std::fs::File::open(&self.path) else {
            return Ok(false);
        };
        let mut reader = BufReader::new(file);
        reader.seek(std::io::SeekFrom::Start(self.offset))?;
        loop {
            let n = reader.read_line(&mut self.partial)?;
            if n == 0 || !self.partial.ends_with('\n') {
                // Half a line: the rest is read next time.
                self.offset += n as u64;
                return Ok(false);
            }
            self.offset += n as u64;
            let hit = found(&self.partial);
            self.partial.clear();
            if hit {
                return Ok(true);
            }
        }
    }
}

fn scrape(addr: std::net::SocketAddr) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: load\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    Ok(text)
}

/// What the generator thread wrote: events, bytes, the last job's jid.
fn joined(
    generator: std::thread::JoinHandle<anyhow::Result<(u64, u64, String)>>,
) -> anyhow::Result<(u64, u64, String)> {
    generator
        .join()
        .map_err(|_| anyhow::anyhow!("the generator panicked"))?
}

/// The lines of the master's log that say it dropped a slow subscriber
/// (Salt 3008.3's `salt/transport/tcp.py`: "Publisher discarding slow
/// subscriber <address> (<why>)").
fn master_discards(lab: &Lab) -> Vec<String> {
    std::fs::read_to_string(lab.root().join("log/master.out"))
        .map(|log| {
            log.lines()
                .filter(|l| l.contains("discarding slow subscriber"))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The job events (new, publish, return) an exposition counts.
fn job_events(exposition: &str) -> f64 {
    ["job_new", "job_publish", "job_return"]
        .iter()
        .map(|c| {
            sample(
                exposition,
                &format!("saltsight_events_total{{class=\"{c}\"}}"),
            )
        })
        .sum()
}

/// The value of the series named exactly `series`.
/// Each step kind of `saltsight_pipeline_step_seconds`: how many took over
/// 20 ms, and the smallest bucket bound that holds them all.
fn steps(exposition: &str) -> String {
    // (step, le, cumulative count) of each bucket line.
    let buckets: Vec<(String, String, f64)> = exposition
        .lines()
        .filter_map(|l| l.strip_prefix("saltsight_pipeline_step_seconds_bucket{"))
        .filter_map(|l| {
            let (labels, value) = l.split_once("} ")?;
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix("=\""))
                    .map(|v| v.trim_end_matches('"').to_owned())
            };
            let value = value.split(' ').next()?.parse().ok()?;
            Some((label("step")?, label("le")?, value))
        })
        .collect();
    let mut kinds: Vec<&str> = buckets.iter().map(|(s, _, _)| s.as_str()).collect();
    kinds.dedup();
    kinds
        .iter()
        .map(|kind| {
            let of = || buckets.iter().filter(move |(s, _, _)| s == kind);
            let total = of().map(|(_, _, v)| *v).fold(0.0, f64::max);
            let within = of()
                .find(|(_, le, _)| le == "0.02")
                .map_or(0.0, |(_, _, v)| *v);
            let longest = of()
                .find(|(_, _, v)| *v >= total)
                .map_or("?", |(_, le, _)| le.as_str());
            format!("{kind} {} (≤ {longest} s)", (total - within) as u64)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn sample(exposition: &str, series: &str) -> f64 {
    exposition
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The sum of every series whose line starts with `prefix`.
fn sum(exposition: &str, prefix: &str) -> u64 {
    exposition
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The bare reader's wake-ups per event above which it ran "waking", below
/// which "quiet". Over tcp the same master, traffic and machine put it in
/// one of two modes (how the master's writes fall together decides): about
/// 0.10–0.12 switches an event at 10–11 µs, or 0.32–0.47 at 20–26 µs. A
/// ratio to it means little without saying which.
const BARE_WAKING_SWITCHES: f64 = 0.2;

impl Run {
    /// The bare reader's mode in this run: `waking` or `quiet`.
    fn bare_mode(&self) -> &'static str {
        match self.subscribers.iter().find(|f| f.name == "bare") {
            Some(f) if Run::switches_per_event(f) >= BARE_WAKING_SWITCHES => "waking",
            Some(_) => "quiet",
            None => "–",
        }
    }

    fn per_event_us(f: &Figures) -> f64 {
        f.usage.cpu * 1e6 / f.received.max(1) as f64
    }

    fn switches_per_event(f: &Figures) -> f64 {
        f.usage.switches() as f64 / f.received.max(1) as f64
    }

    fn line(&self) -> String {
        let mut s = format!(
            "{} {}: {} events ({:.1} MB) in {:.1} s = {:.0}/s, load {} -> {}; master {:.1} µs/event",
            ipc_name(self.tcp),
            self.mix.name(),
            self.sent,
            self.bytes as f64 / 1e6,
            self.secs,
            self.sent as f64 / self.secs,
            self.load_before,
            self.load_after,
            self.master.cpu * 1e6 / self.sent.max(1) as f64,
        );
        for f in &self.subscribers {
            s += &format!(
                "\n  {:<9} received {} lost {} ({}) | {:.2} µs CPU/event, {:.3} switches/event ({} voluntary, {} involuntary){}",
                f.name,
                f.received,
                self.sent as i64 - f.received as i64,
                f.ended,
                Run::per_event_us(f),
                Run::switches_per_event(f),
                f.usage.voluntary,
                f.usage.involuntary,
                if f.name == "bare" {
                    format!(", {} mode", self.bare_mode())
                } else {
                    String::new()
                },
            );
        }
        let a = &self.agent;
        s += &format!(
            "\n  saltsight: dropped {} holds {} ({:.0} ms) spilled {} steps over 20 ms: {} | gaps {} disconnects {} (master discards {}) records {} posts {} | idle before: {:.1} wake-ups/s, RSS {:.1} MB | peak RSS {:.1} MB | idle after: {:.1} wake-ups/s, {:.1} ms CPU, RSS {:.1} MB | exit on SIGTERM: {}",
            a.dropped,
            a.holds,
            a.held_ms,
            a.spilled,
            a.steps,
            a.gaps,
            a.disconnects,
            a.discards,
            a.records,
            a.posts,
            a.fresh_wakeups,
            a.fresh_rss as f64 / 1e6,
            a.peak_rss as f64 / 1e6,
            a.idle_wakeups,
            a.idle_cpu_ms,
            a.idle_rss as f64 / 1e6,
            a.exit,
        );
        s
    }

    fn json(&self) -> String {
        let subscribers: Vec<serde_json::Value> = self
            .subscribers
            .iter()
            .map(|f| {
                serde_json::json!({
                    "name": f.name, "received": f.received, "ended": f.ended,
                    "cpu_s": f.usage.cpu, "voluntary": f.usage.voluntary,
                    "involuntary": f.usage.involuntary,
                    "us_per_event": Run::per_event_us(f),
                    "switches_per_event": Run::switches_per_event(f),
                })
            })
            .collect();
        let a = &self.agent;
        serde_json::json!({
            "ipc": ipc_name(self.tcp), "mix": self.mix.name(), "sent": self.sent,
            "bytes": self.bytes, "secs": self.secs, "load_before": self.load_before,
            "load_after": self.load_after, "master_cpu_s": self.master.cpu,
            "subscribers": subscribers, "bare_mode": self.bare_mode(),
            "saltsight": {"dropped": a.dropped, "holds": a.holds, "held_ms": a.held_ms, "spilled": a.spilled, "steps": a.steps, "gaps": a.gaps, "disconnects": a.disconnects, "discards": a.discards,
                "records": a.records, "posts": a.posts, "peak_rss": a.peak_rss,
                "fresh_wakeups_per_s": a.fresh_wakeups, "fresh_rss": a.fresh_rss,
                "idle_rss": a.idle_rss, "idle_wakeups_per_s": a.idle_wakeups,
                "idle_cpu_ms": a.idle_cpu_ms, "exit": a.exit},
        })
        .to_string()
    }
}

/// Medians (min–max) over the rounds, by ipc mode, mix and the bare
/// reader's mode (rounds of one mode are not mixed with the other's).
fn table(runs: &[Run]) -> String {
    let mut groups: BTreeMap<(&str, &str, &str), Vec<&Run>> = BTreeMap::new();
    for r in runs {
        groups
            .entry((ipc_name(r.tcp), r.mix.name(), r.bare_mode()))
            .or_default()
            .push(r);
    }
    let mut out = String::from(
        "| ipc | mix | bare's mode | rounds | events/s | subscriber | µs CPU/event | switches/event | lost | saltsight ÷ |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for ((ipc, mix, bare_mode), runs) in groups {
        let rate = spread(runs.iter().map(|r| r.sent as f64 / r.secs).collect(), 0);
        for (i, name) in ["saltsight", "bare", "salt"].iter().enumerate() {
            let of = |r: &Run| r.subscribers.iter().find(|f| f.name == *name).cloned();
            let us: Vec<f64> = runs
                .iter()
                .filter_map(|r| of(r))
                .map(|f| Run::per_event_us(&f))
                .collect();
            let sw: Vec<f64> = runs
                .iter()
                .filter_map(|r| of(r))
                .map(|f| Run::switches_per_event(&f))
                .collect();
            let lost: i64 = runs
                .iter()
                .filter_map(|r| of(r).map(|f| r.sent as i64 - f.received as i64))
                .sum();
            // How many times saltsight's CPU per event this one's is, per round.
            let ratio: Vec<f64> = runs
                .iter()
                .filter_map(|r| {
                    let own = Run::per_event_us(&of(r)?);
                    let agent = Run::per_event_us(r.subscribers.first()?);
                    Some(own / agent)
                })
                .collect();
            out += &format!(
                "| {} | {} | {} | {} | {} | {name} | {} | {} | {lost} | {} |\n",
                if i == 0 { ipc } else { "" },
                if i == 0 { mix } else { "" },
                if i == 0 { bare_mode } else { "" },
                if i == 0 {
                    runs.len().to_string()
                } else {
                    String::new()
                },
                if i == 0 { rate.clone() } else { String::new() },
                spread(us, 2),
                spread(sw, 3),
                if i == 0 {
                    "1".into()
                } else {
                    format!("{}×", spread(ratio, 1))
                },
            );
        }
    }
    out
}

/// `median (min–max)`, or the value alone for one.
fn spread(mut values: Vec<f64>, digits: usize) -> String {
    if values.is_empty() {
        return "–".into();
    }
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    if values.len() == 1 {
        return format!("{median:.digits$}");
    }
    format!(
        "{median:.digits$} ({:.digits$}–{:.digits$})",
        values[0],
        values[values.len() - 1]
    )
}
