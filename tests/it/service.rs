//! saltsight under a service manager, without systemd as PID 1: the notify
//! protocol is a datagram socket, so the tests play systemd's side of it
//! (`NOTIFY_SOCKET`, `WATCHDOG_USEC`) and read what saltsight says. Also the
//! shipped unit through `systemd-analyze verify` and `security`, and SIGHUP
//! reloads (log level, web config, what needs a restart, a broken config).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{Signal, kill};
use nix::sys::stat::Mode;
use nix::unistd::mkfifo;

use crate::support::upstream::get_as;
use crate::support::{Saltsight, bin, metrics_address, wait_line};

/// systemd's end of `NOTIFY_SOCKET`, read as datagrams arrive by a thread of its
/// own (as systemd does: a reader that lagged would fill the socket's queue of 10
/// and block saltsight's sends, which is not what is under test).
pub struct Notifications {
    pub path: PathBuf,
    received: Receiver<(Instant, String)>,
    stop: Arc<AtomicBool>,
    /// Every datagram taken from `received`, in order.
    pub seen: Vec<String>,
}

impl Notifications {
    pub fn bind(dir: &Path) -> Notifications {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind the notify socket");
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("timeout");
        let (sender, received) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 4096];
            while !stopped.load(Ordering::Relaxed) {
                if let Ok(n) = socket.recv(&mut buf) {
                    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                    if sender.send((Instant::now(), text)).is_err() {
                        return;
                    }
                }
            }
        });
        Notifications {
            path,
            received,
            stop,
            seen: Vec::new(),
        }
    }

    pub fn env(&self) -> String {
        self.path.display().to_string()
    }

    /// Takes datagrams until one satisfies `pred` (it is returned) or `timeout`.
    pub fn wait(&mut self, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok((_, text)) = self.received.recv_timeout(left) else {
                panic!(
                    "no such notification within {timeout:?}; got {:?}",
                    self.seen
                );
            };
            self.seen.push(text.clone());
            if pred(&text) {
                return text;
            }
        }
    }

    /// Waits out `period` and returns when each watchdog ping in it arrived.
    pub fn pings_during(&mut self, period: Duration) -> Vec<Instant> {
        let from = Instant::now();
        std::thread::sleep(period);
        self.pings_since(from)
    }

    /// When each watchdog ping since `from` arrived (up to now).
    pub fn pings_since(&mut self, from: Instant) -> Vec<Instant> {
        let mut pings = Vec::new();
        while let Ok((at, text)) = self.received.try_recv() {
            if at >= from && text.lines().any(|l| l == "WATCHDOG=1") {
                pings.push(at);
            }
            self.seen.push(text);
        }
        pings
    }
}

impl Drop for Notifications {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The longest stretch in `from..to` without a ping (what systemd's watchdog judges).
pub fn longest_silence(from: Instant, pings: &[Instant], to: Instant) -> Duration {
    let mut last = from;
    let mut longest = Duration::ZERO;
    let within = pings.iter().filter(|&&at| at <= to);
    for &at in within.chain(std::iter::once(&to)) {
        longest = longest.max(at.saturating_duration_since(last));
        last = last.max(at);
    }
    longest
}

pub fn has_line(datagram: &str, line: &str) -> bool {
    datagram.lines().any(|l| l == line)
}

pub fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
}

fn config(dir: &Path, level: &str, queue_frames: u32) -> String {
    format!(
        "[bus]\nendpoint = \"unix:{}\"\nreconnect_min = \"100ms\"\nreconnect_max = \"200ms\"\nqueue_frames = {queue_frames}\n[metrics]\nweb_config_file = {:?}\n[log]\nlevel = {level:?}\n",
        dir.join("absent/master_event_pub.ipc").display(),
        dir.join("web.yml").display().to_string(),
    )
}

/// `run --output none` on `config`, JSON logs, under the played service manager.
fn run_notified(config: &Path, notify: &Notifications, env: &[(&str, &str)]) -> Saltsight {
    let config = config.display().to_string();
    let socket = notify.env();
    let mut all = vec![("NOTIFY_SOCKET", socket.as_str())];
    all.extend_from_slice(env);
    Saltsight::spawn_with_env(
        &[
            "--config",
            &config,
            "--log-format",
            "json",
            "run",
            "--output",
            "none",
        ],
        &all,
    )
}

fn web_config(user: &str, password: &str) -> String {
    let hash = bcrypt::hash(password, 4).expect("bcrypt");
    format!("basic_auth_users:\n  {user}: {hash}\n")
}

fn status(addr: std::net::SocketAddr, user: &str, password: &str) -> u16 {
    get_as(addr, "/healthz", user, password)
        .expect("GET /healthz")
        .0
}

#[test]
fn with_the_master_down_run_is_ready_and_reloads_on_sighup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config_path = dir.path().join("saltsight.toml");
    write(&config_path, &config(dir.path(), "info", 16384));
    write(
        &dir.path().join("web.yml"),
        &web_config("alice", "alice-pw"),
    );
    let mut notify = Notifications::bind(dir.path());
    let mut run = run_notified(
        &config_path,
        &notify,
        // A watchdog meant for another process is not this one's to feed.
        &[("WATCHDOG_USEC", "200000"), ("WATCHDOG_PID", "1")],
    );
    let pid = run.pid().expect("running");
    let mut log = Vec::new();
    let addr = metrics_address(&run, &mut log);

    // Ready though the bus is absent, saying so.
    let ready = notify.wait(Duration::from_secs(10), |d| has_line(d, "READY=1"));
    assert!(
        ready.contains("STATUS=Not connected to the event bus at unix:"),
        "{ready}"
    );
    assert_eq!(notify.pings_during(Duration::from_millis(600)), []);
    assert_eq!(status(addr, "alice", "alice-pw"), 200);
    assert_eq!(status(addr, "bob", "bob-pw"), 401);
    assert!(
        !log.iter().any(|l| l.contains("Still cannot connect")),
        "debug lines at info: {log:?}"
    );

    // Live: the log level and the web config (a new user, the old one gone).
    write(&config_path, &config(dir.path(), "debug", 16384));
    write(&dir.path().join("web.yml"), &web_config("bob", "bob-pw"));
    kill(pid, Signal::SIGHUP).expect("SIGHUP");
    notify.wait(Duration::from_secs(10), |d| has_line(d, "RELOADING=1"));
    let reloaded = notify.wait(Duration::from_secs(10), |d| has_line(d, "READY=1"));
    // The status still says what the bus is doing.
    assert!(
        reloaded.contains("STATUS=Not connected to the event bus at unix:")
            && !reloaded.contains("failed"),
        "{reloaded}"
    );
    wait_line(&run.stderr, &mut log, Duration::from_secs(10), |l| {
        l.contains("Reloaded the config") && l.contains("log.level")
    })
    .expect("the reload is logged");
    wait_line(&run.stderr, &mut log, Duration::from_secs(10), |l| {
        l.contains("Still cannot connect")
    })
    .expect("debug lines after the reload to debug");
    assert_eq!(status(addr, "alice", "alice-pw"), 401);
    assert_eq!(status(addr, "bob", "bob-pw"), 200);

    // Needs a restart: said, not applied.
    write(&config_path, &config(dir.path(), "debug", 1000));
    kill(pid, Signal::SIGHUP).expect("SIGHUP");
    wait_line(&run.stderr, &mut log, Duration::from_secs(10), |l| {
        l.contains("restart saltsight") && l.contains("\"changed\":\"bus\"")
    })
    .expect("the restart-only change is named");

    // Broken: the running config stays, and the metric says so.
    write(&config_path, "[bus]\nno_such_key = 1\n");
    kill(pid, Signal::SIGHUP).expect("SIGHUP");
    let failed = notify.wait(Duration::from_secs(10), |d| {
        has_line(d, "READY=1") && d.contains("failed")
    });
    assert!(
        failed.contains("STATUS=Not connected to the event bus at unix:")
            && failed.contains("The last config reload failed; the running config stays"),
        "{failed}"
    );
    wait_line(&run.stderr, &mut log, Duration::from_secs(10), |l| {
        l.contains("Config reload failed") && l.contains("no_such_key")
    })
    .expect("the reload error names the key");
    let (code, body) = get_as(addr, "/metrics", "bob", "bob-pw").expect("GET /metrics");
    assert_eq!(code, 200);
    assert!(
        body.contains("saltsight_config_last_reload_successful 0"),
        "{body}"
    );

    // SIGTERM: STOPPING=1, then a clean exit within the 5 s grace.
    let asked = Instant::now();
    kill(pid, Signal::SIGTERM).expect("SIGTERM");
    notify.wait(Duration::from_secs(5), |d| has_line(d, "STOPPING=1"));
    let exit = run.wait_exit(Duration::from_secs(6)).expect("exits");
    assert!(exit.success(), "{exit:?}: {log:?}");
    assert!(asked.elapsed() < Duration::from_secs(5));
}

/// Whether `pid` catches SIGHUP (`SigCgt` in /proc/PID/status).
fn catches_sighup(pid: nix::unistd::Pid) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (Signal::SIGHUP as i32 - 1)) != 0)
}

/// Hands `text` to the reader that has the FIFO at `path` open (within `timeout`).
fn feed_fifo(path: &Path, text: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut fifo = loop {
        // Non-blocking, so "no reader yet" is ENXIO and not a hang.
        match OpenOptions::new()
            .write(true)
            .custom_flags(OFlag::O_NONBLOCK.bits())
            .open(path)
        {
            Ok(fifo) => break fifo,
            Err(e)
                if e.raw_os_error() == Some(Errno::ENXIO as i32) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("nothing read {} within {timeout:?}: {e}", path.display()),
        }
    };
    fifo.write_all(text.as_bytes())
        .expect("write into the FIFO");
}

#[test]
fn a_sighup_while_the_config_is_read_is_a_reload_not_an_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        &dir.path().join("web.yml"),
        &web_config("alice", "alice-pw"),
    );
    // The config is a FIFO: run blocks reading it until the test writes, so the
    // SIGHUP below comes while the config is read, deterministically.
    let config_path = dir.path().join("saltsight.toml");
    mkfifo(&config_path, Mode::S_IRUSR | Mode::S_IWUSR).expect("mkfifo");
    let mut notify = Notifications::bind(dir.path());
    let mut run = run_notified(&config_path, &notify, &[]);
    let pid = run.pid().expect("running");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !catches_sighup(pid) {
        assert!(
            Instant::now() < deadline,
            "run does not catch SIGHUP before it has read its config"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    kill(pid, Signal::SIGHUP).expect("SIGHUP");
    let text = config(dir.path(), "info", 16384);
    feed_fifo(&config_path, &text, Duration::from_secs(10));
    // Up, it takes the SIGHUP as a reload, which reads the file again (once the
    // first read is over, or the two writes would be read as one).
    let mut log = Vec::new();
    metrics_address(&run, &mut log);
    feed_fifo(&config_path, &text, Duration::from_secs(10));
    wait_line(&run.stderr, &mut log, Duration::from_secs(10), |l| {
        l.contains("Reloaded the config (SIGHUP).")
    })
    .expect("the early SIGHUP is a reload");
    notify.wait(Duration::from_secs(10), |d| has_line(d, "READY=1"));
    kill(pid, Signal::SIGTERM).expect("SIGTERM");
    let exit = run.wait_exit(Duration::from_secs(6)).expect("exits");
    assert!(exit.success(), "{exit:?}: {log:?}");
}

/// The shipped unit with `ExecStart=` pointed at this build.
fn unit_for_this_build(dir: &Path) -> PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/saltsight.service");
    let text = std::fs::read_to_string(shipped).expect("read the unit");
    for directive in [
        "Type=notify",
        "WatchdogSec=",
        "Restart=on-failure",
        "User=salt",
        "ExecReload=",
    ] {
        assert!(text.contains(directive), "the unit lacks {directive}");
    }
    let unit = dir.join("saltsight.service");
    write(&unit, &text.replace("/usr/bin/saltsight", bin()));
    unit
}

#[test]
fn the_shipped_unit_verifies_and_rates_2_0_or_lower() {
    let dir = tempfile::tempdir().expect("tempdir");
    let unit = unit_for_this_build(dir.path());
    // Its man page is checked where it is installed (scripts/check-packages).
    let verify = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit)
        .current_dir(dir.path())
        .output()
        .expect("systemd-analyze (Debian's systemd package)");
    let said = String::from_utf8_lossy(&verify.stderr);
    // verify exits 0 on unknown keys; any word from it is a finding.
    assert!(verify.status.success() && said.trim().is_empty(), "{said}");

    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--threshold=20", "--no-pager"])
        .arg(&unit)
        .current_dir(dir.path())
        .output()
        .expect("systemd-analyze security");
    let table = String::from_utf8_lossy(&security.stdout);
    let exposure: f64 = table
        .lines()
        .find_map(|l| l.split("saltsight.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no overall exposure in {table}"));
    assert!(exposure <= 2.0, "exposure {exposure}:\n{table}");
    assert!(security.status.success(), "over the threshold:\n{table}");
}

/// The first `run` log line on a stderr that `JOURNAL_STREAM` names (or not).
fn first_log_line(journal: impl Fn(u64, u64) -> String) -> String {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let (reader, writer) = nix::unistd::pipe().expect("pipe");
    let stat = nix::sys::stat::fstat(&writer).expect("fstat");
    let reader = std::fs::File::from(reader);
    let state = tempfile::tempdir().expect("state dir");
    let mut child = Command::new(bin())
        .args([
            "--endpoint",
            "unix:/nonexistent/saltsight-test/master_event_pub.ipc",
            "run",
            "--output",
            "none",
        ])
        .env_remove("SALTSIGHT_CONFIG")
        .env("SALTSIGHT_WEB_LISTEN_ADDRESS", "127.0.0.1:0")
        .env("SALTSIGHT_ALLOW_ROOT", "true")
        .env("JOURNAL_STREAM", journal(stat.st_dev, stat.st_ino))
        .env("SALTSIGHT_STATE_DIR", state.path())
        .stdout(Stdio::null())
        .stderr(Stdio::from(writer))
        .spawn()
        .expect("spawn");
    let line = BufReader::new(reader)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.contains("Cannot connect to the event bus"))
        .expect("the connect warning");
    kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let _ = child.wait();
    line
}

#[test]
fn log_lines_drop_their_timestamp_only_when_stderr_is_the_journal() {
    let journal = first_log_line(|dev, ino| format!("{dev}:{ino}"));
    assert!(journal.trim_start().starts_with("WARN"), "{journal}");
    // Inherited by a process whose stderr went elsewhere: not the journal.
    let elsewhere = first_log_line(|dev, ino| format!("{dev}:{}", ino + 1));
    assert!(
        elsewhere.starts_with(|c: char| c.is_ascii_digit()),
        "a timestamp first: {elsewhere}"
    );
}
