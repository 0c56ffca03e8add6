//! A real Prometheus (Debian's 2.42) and Alertmanager (0.25) for the tests: each
//! in its own temp dir, on free loopback ports, with Alertmanager's cluster
//! listener off. Stopped by pid when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::clickhouse::free_port;
use super::upstream::get;

pub const PROMETHEUS: &str = "/usr/bin/prometheus";
pub const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";
pub const PROMTOOL: &str = "/usr/bin/promtool";

pub fn packaging(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("packaging")
        .join(path)
}

/// A server process; dropping it kills exactly it, by pid.
pub struct Daemon {
    pub addr: SocketAddr,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(program: &str, args: &[String], dir: tempfile::TempDir, addr: SocketAddr) -> Daemon {
    assert!(
        Path::new(program).exists(),
        "{program} is missing: install Debian's prometheus and prometheus-alertmanager (scripts/setup-debs does)"
    );
    let log = std::fs::File::create(dir.path().join("log")).expect("log file");
    let child = Command::new(program)
        .args(args)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
    let mut daemon = Daemon {
        addr,
        child,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if matches!(get(addr, "/-/ready"), Ok((200, _))) {
            return daemon;
        }
        if let Ok(Some(status)) = daemon.child.try_wait() {
            let log = std::fs::read_to_string(daemon._dir.path().join("log")).unwrap_or_default();
            panic!("{program} exited ({status}) before it was ready:\n{log}");
        }
        assert!(Instant::now() < deadline, "{program} not ready in 30 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], free_port()))
}

/// Alertmanager sending every alert to `webhook` (a URL) at once.
pub fn alertmanager(webhook: &str) -> Daemon {
    let dir = tempfile::Builder::new()
        .prefix("saltsight-alertmanager-")
        .tempdir()
        .expect("tempdir");
    std::fs::write(
        dir.path().join("alertmanager.yml"),
        format!(
            "route:\n  receiver: hook\n  group_by: [alertname]\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n    webhook_configs:\n      - url: {webhook:?}\n        send_resolved: false\n"
        ),
    )
    .expect("alertmanager.yml");
    let addr = loopback();
    let args = vec![
        "--config.file=alertmanager.yml".to_owned(),
        format!("--storage.path={}", dir.path().join("data").display()),
        format!("--web.listen-address={addr}"),
        "--cluster.listen-address=".to_owned(),
    ];
    spawn(ALERTMANAGER, &args, dir, addr)
}

/// Prometheus scraping `target` every second, with `rules` loaded, evaluating
/// every second and alerting to `alertmanager`.
pub fn prometheus(target: SocketAddr, rules: &Path, alertmanager: SocketAddr) -> Daemon {
    let dir = tempfile::Builder::new()
        .prefix("saltsight-prometheus-")
        .tempdir()
        .expect("tempdir");
    std::fs::write(
        dir.path().join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {rules:?}\nalerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [\"{alertmanager}\"]\nscrape_configs:\n  - job_name: saltsight\n    static_configs:\n      - targets: [\"{target}\"]\n",
            rules = rules.display().to_string(),
        ),
    )
    .expect("prometheus.yml");
    let addr = loopback();
    let args = vec![
        "--config.file=prometheus.yml".to_owned(),
        format!("--storage.tsdb.path={}", dir.path().join("data").display()),
        format!("--web.listen-address={addr}"),
    ];
    spawn(PROMETHEUS, &args, dir, addr)
}
