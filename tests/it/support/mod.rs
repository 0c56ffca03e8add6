//! Test support: the saltsight binary as a child process whose output lines are
//! read as they come, and a lock that keeps real-Salt labs from running at once on
//! a 2-core machine.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub mod clickhouse;
pub mod nspawn;
pub mod prometheus;
pub mod publisher;
pub mod replay;
pub mod upstream;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_saltsight")
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// What saltsight logs when it has connected to the bus.
pub const CONNECTED: &str = "Connected to the event bus.";

static LAB_LOCK: Mutex<()> = Mutex::new(());

/// One real-Salt lab at a time (each is a master and 3 minions).
pub fn lab_lock() -> LabTurn {
    let guard = LAB_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    LabTurn {
        _guard: guard,
        since: Instant::now(),
    }
}

/// A test's turn with the lab. With `SALTSIGHT_LAB_TIMES=FILE`, how long each
/// test held it is appended to FILE when the turn ends (the live tests run one
/// at a time, so these add up to the suite's time: what to make leaner).
pub struct LabTurn {
    _guard: MutexGuard<'static, ()>,
    since: Instant,
}

impl Drop for LabTurn {
    fn drop(&mut self) {
        let Some(file) = std::env::var_os("SALTSIGHT_LAB_TIMES") else {
            return;
        };
        let test = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_owned();
        let line = format!("{:.1} {test}\n", self.since.elapsed().as_secs_f64());
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
    }
}

/// A line read from the child, with when it was read.
pub struct Line {
    pub text: String,
    pub at: Instant,
    /// The same moment on the wall clock (records carry wall-clock times).
    pub wall: SystemTime,
}

/// A running saltsight. Dropping it kills exactly this process, by pid.
pub struct Saltsight {
    child: Option<Child>,
    pub stdout: Receiver<Line>,
    pub stderr: Receiver<Line>,
    /// Its own state directory (checkpoints), unless the test gave one.
    _state: Option<tempfile::TempDir>,
}

impl Saltsight {
    pub fn spawn(args: &[&str]) -> Saltsight {
        Saltsight::spawn_with_env(args, &[])
    }

    /// As [`Saltsight::spawn`], with more environment variables. Without a
    /// `SALTSIGHT_STATE_DIR` among them, it gets a state directory of its own
    /// (tests never share a checkpoint, nor write the system's).
    pub fn spawn_with_env(args: &[&str], env: &[(&str, &str)]) -> Saltsight {
        let state = (!env.iter().any(|(k, _)| *k == "SALTSIGHT_STATE_DIR"))
            .then(|| tempfile::tempdir().expect("state dir"));
        let mut command = Command::new(bin());
        if let Some(state) = &state {
            command.env("SALTSIGHT_STATE_DIR", state.path());
        }
        let mut child = command
            .args(args)
            .envs(env.iter().copied())
            .env_remove("SALTSIGHT_CONFIG")
            // Tests listen on loopback only, on a port the kernel picks.
            .env("SALTSIGHT_WEB_LISTEN_ADDRESS", "127.0.0.1:0")
            // Real Salt runs as root here, and so do the tests (tests/it/cli.rs
            // checks the refusal itself).
            .env("SALTSIGHT_ALLOW_ROOT", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn saltsight");
        let stdout = lines(child.stdout.take().expect("stdout"));
        let stderr = lines(child.stderr.take().expect("stderr"));
        Saltsight {
            child: Some(child),
            stdout,
            stderr,
            _state: state,
        }
    }

    /// Spawns and waits (10 s at most) until it has connected to the bus.
    pub fn spawn_connected(args: &[&str]) -> Saltsight {
        Saltsight::spawn_connected_with_env(args, &[])
    }

    /// As [`Saltsight::spawn_connected`], with more environment variables.
    pub fn spawn_connected_with_env(args: &[&str], env: &[(&str, &str)]) -> Saltsight {
        let run = Saltsight::spawn_with_env(args, env);
        let mut log = Vec::new();
        wait_line(&run.stderr, &mut log, Duration::from_secs(10), |l| {
            l.contains(CONNECTED)
        })
        .unwrap_or_else(|e| panic!("saltsight {args:?} did not connect: {e}"));
        run
    }

    /// The process id (to signal it).
    pub fn pid(&self) -> Option<Pid> {
        self.child.as_ref().map(|c| Pid::from_raw(c.id() as i32))
    }

    /// The exit status, if it has exited.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        self.child = None;
        Some(status)
    }

    /// SIGKILL, by pid, and reaps it. Its output lines stay readable.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits up to `timeout` for it to exit by itself (signalled by the caller).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.try_exit() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// SIGTERM, then waits up to `grace` for a graceful exit.
    pub fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

impl Drop for Saltsight {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn lines(stream: impl std::io::Read + Send + 'static) -> Receiver<Line> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(text) = line else { break };
            let (at, wall) = (Instant::now(), SystemTime::now());
            if tx.send(Line { text, at, wall }).is_err() {
                break;
            }
        }
    });
    rx
}

/// Spawns `salt ARGS` against `lab` without waiting (its output is not needed).
pub fn salt_bg(lab: &saltsight::lab::Lab, args: &[&str]) -> Child {
    lab.salt_command(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn salt")
}

/// Reads lines until one satisfies `pred`; every line read is kept in `seen`.
pub fn wait_line(
    rx: &Receiver<Line>,
    seen: &mut Vec<String>,
    timeout: Duration,
    mut pred: impl FnMut(&str) -> bool,
) -> Result<Instant, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let hit = pred(&line.text);
                seen.push(line.text);
                if hit {
                    return Ok(line.at);
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                return Err(format!(
                    "timed out after {timeout:?}; read:\n{}",
                    seen.join("\n")
                ));
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(format!("the stream closed; read:\n{}", seen.join("\n")));
            }
        }
    }
}

/// Waits (10 s at most) for a `--log-format json` saltsight to log where it serves
/// /metrics, and returns that address; the lines read are kept in `log`.
pub fn metrics_address(run: &Saltsight, log: &mut Vec<String>) -> std::net::SocketAddr {
    wait_line(&run.stderr, log, Duration::from_secs(10), |l| {
        l.contains(SERVING_METRICS)
    })
    .expect("the metrics endpoint is up");
    serving_address(log.last().expect("line"))
}

/// Waits (10 s at most) for a `--log-format json` saltsight both to serve /metrics and to
/// connect to the bus, in whichever order they happen (the reader and the server start
/// side by side), and returns the metrics address; the lines read are kept in `log`.
pub fn metrics_address_once_connected(
    run: &Saltsight,
    log: &mut Vec<String>,
) -> std::net::SocketAddr {
    let (mut serving, mut connected) = (None, false);
    wait_line(&run.stderr, log, Duration::from_secs(10), |l| {
        if l.contains(SERVING_METRICS) {
            serving = Some(serving_address(l));
        }
        connected |= l.contains(CONNECTED);
        serving.is_some() && connected
    })
    .expect("serving metrics and connected to the bus");
    serving.expect("the predicate saw it")
}

const SERVING_METRICS: &str = "Serving metrics.";

/// The address in a JSON "Serving metrics." log line.
fn serving_address(line: &str) -> std::net::SocketAddr {
    let serving: serde_json::Value = serde_json::from_str(line).expect("JSON log");
    serving["fields"]["address"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {serving}"))
}

/// The jid a `salt` CLI printed with `--show-jid` (`jid: <id>` on its own
/// line) or `--async` (`Executed command with job ID: <id>`).
pub fn jid_from(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_prefix("jid: ")
                .or_else(|| l.strip_prefix("Executed command with job ID: "))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("no jid in {}", String::from_utf8_lossy(&out.stdout)))
}

/// A JSON record line and the wall-clock moment it was read.
pub struct Received {
    pub record: serde_json::Value,
    pub wall: SystemTime,
}

/// The `id`s of the records read.
pub fn record_ids(seen: &[Received]) -> std::collections::BTreeSet<String> {
    seen.iter()
        .map(|r| r.record["id"].as_str().expect("id").to_owned())
        .collect()
}

/// Reads JSON record lines into `seen` until `done(seen)` holds or `timeout` passes.
pub fn read_records(
    rx: &Receiver<Line>,
    seen: &mut Vec<Received>,
    timeout: Duration,
    done: impl Fn(&[Received]) -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while !done(seen) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Ok(record) = serde_json::from_str(&line.text) {
                    seen.push(Received {
                        record,
                        wall: line.wall,
                    });
                }
            }
            Err(_) => {
                let kinds: Vec<String> = seen.iter().map(|r| r.record.to_string()).collect();
                return Err(format!(
                    "timed out after {timeout:?}; records:\n{}",
                    kinds.join("\n")
                ));
            }
        }
    }
    Ok(())
}

/// `saltsight <args>` against a test's config and state dir: its exit code,
/// and its stdout then stderr.
pub fn ask(config: &Path, state: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(bin())
        .args(["--config", config.to_str().expect("utf-8")])
        .args(args)
        .env("SALTSIGHT_STATE_DIR", state)
        .env("NO_COLOR", "1")
        .output()
        .expect("saltsight runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// `saltsight <args> --json`, exit 0, its answer.
pub fn json(config: &Path, state: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let (code, text) = ask(config, state, &all);
    assert_eq!(code, 0, "{args:?}: {text}");
    let start = text.find(['{', '[']).expect("JSON");
    serde_json::from_str(&text[start..]).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `git <args>` in `dir` as alice (a state tree the tests commit to): its
/// stdout, trimmed; a failure fails the test.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "alice")
        .env("GIT_AUTHOR_EMAIL", "alice@example.com")
        .env("GIT_COMMITTER_NAME", "alice")
        .env("GIT_COMMITTER_EMAIL", "alice@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
