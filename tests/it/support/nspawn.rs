//! A real systemd as PID 1, booted by `systemd-nspawn` (Debian's
//! `systemd-container`) in a throwaway container: the root is a tmpfs, `/usr` is
//! the host's, read-only (`--volatile=yes`), and the host's network is shared, so
//! loopback reaches the test's servers. What the test needs in the container
//! (users, units, the binary, the bus socket) is bind-mounted in. It boots one
//! target and nothing else, and is powered off (then killed by pid, if it must
//! be) when dropped.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Units the container must not run, masked on systemd's command line: the
/// first-boot prompts (an empty /etc is a first boot; they would wait on the
/// console), and networkd, which would manage the host's interfaces (the network
/// is shared), with what waits for it.
const MASKED: [&str; 3] = [
    "systemd-firstboot.service",
    "systemd-networkd.service",
    "systemd-networkd-wait-online.service",
];

/// A bind mount into the container.
pub struct Bind<'a> {
    pub host: &'a Path,
    pub inside: &'a str,
    pub writable: bool,
}

pub struct Container {
    nspawn: Child,
    /// The container's PID 1 (systemd), as the host sees it.
    leader: u32,
    /// nspawn's console output (the container's boot messages), for failures.
    console: std::path::PathBuf,
}

impl Container {
    /// Boots `target` (a unit among the binds) and waits (30 s at most) until the
    /// container's systemd answers (its units may still be starting).
    pub fn boot(dir: &Path, target: &str, binds: &[Bind<'_>]) -> Container {
        let console = dir.join("console.log");
        let mut nspawn = Command::new("systemd-nspawn");
        nspawn
            .args(["--directory=/", "--volatile=yes", "--register=no"])
            // No host systemd to ask for a scope: stay in the test's cgroup.
            .args(["--keep-unit", "--console=passive"])
            .arg(format!("--machine=saltsight-test-{}", std::process::id()));
        for bind in binds {
            let option = if bind.writable { "--bind" } else { "--bind-ro" };
            nspawn.arg(format!("{option}={}:{}", bind.host.display(), bind.inside));
        }
        let log = std::fs::File::create(&console).expect("console log");
        nspawn.args(["--boot", &format!("systemd.unit={target}")]);
        for unit in MASKED {
            nspawn.arg(format!("systemd.mask={unit}"));
        }
        let nspawn = nspawn
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("console log"))
            .stderr(log)
            .spawn()
            .expect("systemd-nspawn (Debian's systemd-container)");
        let mut container = Container {
            leader: 0,
            nspawn,
            console,
        };
        container.leader = container.wait_for_leader(Duration::from_secs(10));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let state = container.systemctl(&["is-system-running"]);
            let state = String::from_utf8_lossy(&state.stdout).trim().to_owned();
            if ["initializing", "starting", "running", "degraded"].contains(&state.as_str()) {
                return container;
            }
            assert!(
                Instant::now() < deadline,
                "the container's systemd does not answer after 30 s ({state:?}); console:\n{}",
                container.console()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// nspawn's child that runs systemd.
    fn wait_for_leader(&mut self, timeout: Duration) -> u32 {
        let deadline = Instant::now() + timeout;
        let nspawn = self.nspawn.id();
        loop {
            let children =
                std::fs::read_to_string(format!("/proc/{nspawn}/task/{nspawn}/children"))
                    .unwrap_or_default();
            let systemd = children.split_whitespace().find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "systemd")
            });
            if let Some(pid) = systemd.and_then(|pid| pid.parse().ok()) {
                return pid;
            }
            if let Ok(Some(status)) = self.nspawn.try_wait() {
                panic!(
                    "systemd-nspawn exited ({status}); console:\n{}",
                    self.console()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no systemd in the container after {timeout:?}; console:\n{}",
                self.console()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn console(&self) -> String {
        std::fs::read_to_string(&self.console).unwrap_or_default()
    }

    /// Runs `program` inside the container (all its namespaces).
    pub fn exec(&self, program: &str, args: &[&str]) -> Output {
        Command::new("nsenter")
            .args(["--target", &self.leader.to_string(), "--all", program])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("nsenter")
    }

    /// `systemctl` of the container's systemd.
    pub fn systemctl(&self, args: &[&str]) -> Output {
        self.exec("systemctl", args)
    }

    /// `systemctl show` of `unit`: the properties asked for.
    pub fn show(&self, unit: &str, properties: &[&str]) -> BTreeMap<String, String> {
        let mut args = vec!["show", unit];
        let wanted = format!("--property={}", properties.join(","));
        args.push(&wanted);
        let out = self.systemctl(&args);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// What `unit` logged (the container's journal).
    pub fn journal(&self, unit: &str) -> String {
        let out = self.exec("journalctl", &["--unit", unit, "--no-pager", "-o", "cat"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if self.leader != 0 {
            let _ = self.systemctl(&["poweroff", "--no-block"]);
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.nspawn.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // nspawn kills its container when it dies.
        let _ = self.nspawn.kill();
        let _ = self.nspawn.wait();
    }
}
