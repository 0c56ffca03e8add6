//! A real Salt lab on loopback for the integration tests and `saltsight demo`: one
//! salt-master and a few salt-minions from a cached PyPI venv, in a temporary root,
//! on free non-default ports, with auto-accepted keys.
//!
//! Every process is started in its own process group and stopped by that group's
//! id (never by name), on [`Lab::drop`] too, so a failing test leaves nothing behind.
//! Nothing here is used by the agent's pipeline.

mod states;

use std::fs;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::bus::Endpoint;
use crate::config::master::MasterBusSettings;

/// The longest any one `salt`/`salt-run` call may take. It is there for a CLI
/// that hangs, not to time a job: with the whole suite running on two cores, a
/// `state.apply` of the triage lab's failures once took over 90 s.
pub const CLI_TIMEOUT: Duration = Duration::from_secs(180);

/// The Salt release the lab installs (CI runs the harness on it).
pub const SALT_VERSION: &str = "3008.3";

/// Where the venv lives: `$SALTSIGHT_SALT_VENV`, else `~/.cache/saltsight/salt-<version>`.
pub fn default_venv() -> PathBuf {
    if let Some(dir) = std::env::var_os("SALTSIGHT_SALT_VENV") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache/saltsight")
        .join(format!("salt-{SALT_VERSION}"))
}

/// The older release the batch tests also run (it gives each sub-batch a
/// jid of its own); `scripts/setup-salt` installs it.
pub const OLDER_SALT_VERSION: &str = "3006.25";

/// Its venv: `$SALTSIGHT_SALT_3006_VENV`, else `~/.cache/saltsight/salt-3006.25`.
pub fn older_venv() -> PathBuf {
    if let Some(dir) = std::env::var_os("SALTSIGHT_SALT_3006_VENV") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache/saltsight")
        .join(format!("salt-{OLDER_SALT_VERSION}"))
}

/// Creates the venv and installs Salt into it unless it is there already.
pub fn ensure_venv(venv: &Path) -> anyhow::Result<()> {
    ensure_venv_of(venv, SALT_VERSION)
}

/// Creates the venv and installs Salt `version` into it unless it is there.
pub fn ensure_venv_of(venv: &Path, version: &str) -> anyhow::Result<()> {
    if venv.join("bin/salt-master").exists() {
        return Ok(());
    }
    eprintln!(
        "Installing salt=={version} from PyPI into {} (once; about a minute)...",
        venv.display()
    );
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    run_checked(
        Command::new(&python).args(["-m", "venv"]).arg(venv),
        "create the Salt venv",
    )?;
    run_checked(
        Command::new(venv.join("bin/pip")).args([
            "install",
            "--quiet",
            &format!("salt=={version}"),
        ]),
        "pip install salt",
    )?;
    Ok(())
}

fn run_checked(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot {what}: {cmd:?}"))?;
    if !status.success() {
        bail!("cannot {what}: {cmd:?} exited with {status}");
    }
    Ok(())
}

#[derive(Debug, Clone)]
pub struct LabOptions {
    pub venv: PathBuf,
    /// The Salt release `venv` holds (installed there when missing).
    pub salt_version: &'static str,
    pub minions: Vec<String>,
    /// The master's `ipc_mode: tcp` (event publisher on loopback TCP).
    pub ipc_mode_tcp: bool,
    /// The master's `state_events` (prog events per state).
    pub state_events: bool,
    /// More master settings (YAML lines), e.g. `transport: tcp`; `{root}`
    /// becomes the lab's root directory.
    pub extra_master: String,
    /// More settings for every minion (YAML lines).
    pub extra_minion: String,
    /// Minions that connect from an address of their own, as on a real
    /// fleet: `(id, 127.0.0.N)` gives that minion `source_address` and a
    /// static `ipv4` grain of that address (several may share one, as
    /// behind NAT).
    pub minion_addresses: Vec<(String, String)>,
}

impl Default for LabOptions {
    fn default() -> Self {
        Self {
            venv: default_venv(),
            salt_version: SALT_VERSION,
            minions: ["web1", "web2", "db1"].map(String::from).to_vec(),
            ipc_mode_tcp: false,
            state_events: false,
            extra_master: String::new(),
            extra_minion: String::new(),
            minion_addresses: Vec::new(),
        }
    }
}

/// A running lab. Dropping it stops every process it started.
pub struct Lab {
    root: tempfile::TempDir,
    options: LabOptions,
    tcp_pub_port: u16,
    master: Option<Child>,
    minions: Vec<(String, Option<Child>)>,
}

impl Lab {
    /// Starts the master and the minions and waits until every minion answers
    /// `test.ping` (about 5 to 10 s).
    pub fn start(options: LabOptions) -> anyhow::Result<Lab> {
        ensure_venv_of(&options.venv, options.salt_version)?;
        // Orphans of the lab's process groups come back to this process, so that
        // stopping a group reaps all of it. Without this, a SIGKILLed minion's
        // children stay zombies under a PID 1 that does not reap, and Salt's
        // pidfile check (`psutil.pid_exists`) refuses to start the minion again.
        nix::sys::prctl::set_child_subreaper(true).context("cannot become a child subreaper")?;
        let root = tempfile::Builder::new()
            .prefix("saltsight-lab-")
            .tempdir()
            .context("cannot create the lab root")?;
        let ports = free_ports(6)?;
        let root_path = root.path().to_path_buf();
        write_configs(&root_path, &options, &ports)?;
        let minions = options.minions.iter().map(|m| (m.clone(), None)).collect();
        let mut lab = Lab {
            root,
            options,
            tcp_pub_port: ports[2],
            master: None,
            minions,
        };
        lab.start_master()?;
        for id in lab.options.minions.clone() {
            lab.start_minion(&id)?;
        }
        lab.wait_ready(Duration::from_secs(90))?;
        Ok(lab)
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The master's config file (saltsight's `--master-config`).
    pub fn master_config(&self) -> PathBuf {
        self.root().join("etc/master")
    }

    /// The bus endpoint, found the way saltsight finds it: from the master's config
    /// (Salt may move a long `sock_dir` to `<cachedir>/.salt-unix`).
    pub fn endpoint(&self) -> Endpoint {
        match MasterBusSettings::load(&self.master_config(), false) {
            Ok(settings) => settings.endpoint(),
            // The lab wrote that config itself; fall back to what it wrote.
            Err(_) if self.options.ipc_mode_tcp => {
                Endpoint::Tcp((Ipv4Addr::LOCALHOST, self.tcp_pub_port).into())
            }
            Err(_) => Endpoint::Unix(self.root().join("master/sock/master_event_pub.ipc")),
        }
    }

    pub fn start_master(&mut self) -> anyhow::Result<()> {
        self.master =
            Some(self.spawn_daemon("salt-master", &self.root().join("etc"), "master.out")?);
        Ok(())
    }

    /// Stops the master's process group (SIGTERM, then SIGKILL after 10 s) and waits.
    pub fn stop_master(&mut self) {
        if let Some(child) = self.master.take() {
            stop_group(child, Duration::from_secs(10));
        }
    }

    pub fn start_minion(&mut self, id: &str) -> anyhow::Result<()> {
        let child = self.spawn_daemon(
            "salt-minion",
            &self.root().join("m").join(id),
            &format!("minion-{id}.out"),
        )?;
        let slot = self.minion_slot(id)?;
        *slot = Some(child);
        Ok(())
    }

    /// Sends `signal` to a minion's whole process group (the minion and its jobs).
    pub fn signal_minion(&self, id: &str, signal: Signal) -> anyhow::Result<()> {
        let child = self
            .minions
            .iter()
            .find(|(m, _)| m == id)
            .and_then(|(_, c)| c.as_ref())
            .with_context(|| format!("minion {id} is not running"))?;
        killpg(Pid::from_raw(child.id() as i32), signal)
            .with_context(|| format!("cannot signal minion {id}"))?;
        Ok(())
    }

    /// Stops a minion's process group and waits for it.
    pub fn stop_minion(&mut self, id: &str) -> anyhow::Result<()> {
        if let Some(child) = self.minion_slot(id)?.take() {
            stop_group(child, Duration::from_secs(10));
        }
        Ok(())
    }

    /// Runs the `salt` CLI against this master.
    pub fn salt(&self, args: &[&str]) -> anyhow::Result<Output> {
        self.cli("salt", args)
    }

    /// Runs `salt-run` against this master.
    pub fn salt_run(&self, args: &[&str]) -> anyhow::Result<Output> {
        self.cli("salt-run", args)
    }

    /// The `salt` CLI against this master, to spawn and wait for separately (a test
    /// may act on minions while the CLI waits).
    pub fn salt_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.options.venv.join("bin/salt"));
        cmd.arg("-c")
            .arg(self.root().join("etc"))
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs a Salt CLI with a hard limit: a `salt` that races the master's start can
    /// hang for ever after an authentication error, so it is killed (by pid) at
    /// [`CLI_TIMEOUT`]. Output goes through files, so a full pipe cannot block it.
    fn cli(&self, tool: &str, args: &[&str]) -> anyhow::Result<Output> {
        let out = tempfile::tempfile().context("cli stdout file")?;
        let err = tempfile::tempfile().context("cli stderr file")?;
        let mut child = Command::new(self.options.venv.join("bin").join(tool))
            .arg("-c")
            .arg(self.root().join("etc"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(err.try_clone()?)
            .spawn()
            .with_context(|| format!("cannot run {tool} {args:?}"))?;
        let deadline = Instant::now() + CLI_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("{tool} {args:?} did not finish within {CLI_TIMEOUT:?}; killed");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ok(Output {
            status,
            stdout: read_all(out)?,
            stderr: read_all(err)?,
        })
    }

    /// Waits until every running minion answers `test.ping`.
    pub fn wait_ready(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        // The CLI authenticates with the key the master writes at start: asking
        // before it exists fails (and can hang the CLI).
        // Salt writes `.<user>_key` for the master's configured user (the lab runs
        // everything as the current user).
        let root_key = self.root().join(format!(
            "var/cache/salt/master/.{}_key",
            current_user_name()
        ));
        while !root_key.exists() {
            if Instant::now() > deadline {
                bail!(
                    "the master did not write {} within {timeout:?}",
                    root_key.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.wait_bus_up(deadline.saturating_duration_since(Instant::now()))?;
        let expected: Vec<&str> = self
            .minions
            .iter()
            .filter(|(_, child)| child.is_some())
            .map(|(id, _)| id.as_str())
            .collect();
        loop {
            let out = self.salt(&["*", "test.ping", "--out", "json", "--static", "-t", "5"])?;
            let answered: serde_json::Value =
                serde_json::from_slice(&out.stdout).unwrap_or_default();
            if expected
                .iter()
                .all(|id| answered[id] == serde_json::Value::Bool(true))
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the lab's minions did not all answer test.ping within {timeout:?} (got {answered}); logs in {}",
                    self.root().display()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Waits until the event publisher accepts a connection (it is back after a
    /// restart); returns when it did. Connecting and closing is harmless: it is
    /// what any subscriber does.
    pub fn wait_bus_up(&self, timeout: Duration) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + timeout;
        loop {
            let up = match self.endpoint() {
                Endpoint::Unix(path) => std::os::unix::net::UnixStream::connect(path).is_ok(),
                Endpoint::Tcp(addr) => std::net::TcpStream::connect(addr).is_ok(),
            };
            if up {
                return Ok(Instant::now());
            }
            if Instant::now() > deadline {
                bail!("the event bus did not come up within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn minion_slot(&mut self, id: &str) -> anyhow::Result<&mut Option<Child>> {
        self.minions
            .iter_mut()
            .find(|(m, _)| m == id)
            .map(|(_, c)| c)
            .with_context(|| format!("no minion {id} in the lab"))
    }

    /// Starts a Salt daemon in the foreground, in a process group of its own (so it
    /// can be stopped, with everything it forks, by that group's id), its output
    /// appended to `log/<log_name>`.
    fn spawn_daemon(&self, tool: &str, config_dir: &Path, log_name: &str) -> anyhow::Result<Child> {
        let log = self.log_file(log_name)?;
        Command::new(self.options.venv.join("bin").join(tool))
            .arg("-c")
            .arg(config_dir)
            .args(["-l", "warning"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {tool} -c {}", config_dir.display()))
    }

    fn log_file(&self, name: &str) -> anyhow::Result<fs::File> {
        let dir = self.root().join("log");
        fs::create_dir_all(&dir)?;
        Ok(fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(name))?)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for (_, child) in &mut self.minions {
            if let Some(child) = child.take() {
                stop_group(child, Duration::from_secs(5));
            }
        }
        self.stop_master();
    }
}

fn read_all(mut file: fs::File) -> anyhow::Result<Vec<u8>> {
    use std::io::{Read, Seek};
    file.rewind()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// SIGTERM to the child's process group, SIGKILL after `grace`, then reap every
/// member of the group (its orphans are ours: the lab is a child subreaper).
fn stop_group(mut child: Child, grace: Duration) {
    let pgid = Pid::from_raw(child.id() as i32);
    // A stopped group must be continued to act on SIGTERM.
    let _ = killpg(pgid, Signal::SIGCONT);
    let _ = killpg(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && !matches!(child.try_wait(), Ok(Some(_))) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Children of the group may outlive the leader briefly: finish them.
    let _ = killpg(pgid, Signal::SIGKILL);
    let _ = child.wait();
    reap_group(pgid);
}

/// Waits for every process of group `pgid` that is our child (up to 5 s).
fn reap_group(pgid: Pid) {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match waitpid(Pid::from_raw(-pgid.as_raw()), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return, // ECHILD: none left
            Ok(_) => {}                                    // reaped one; look for more
        }
    }
}

/// `n` distinct free loopback ports (bound together, then released).
fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<Result<_, _>>()
        .context("no free ports")?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

/// The name of the user running the lab (Salt's `user:` for master and minions).
fn current_user_name() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map_or_else(|| "root".to_string(), |u| u.name)
}

fn write_configs(root: &Path, options: &LabOptions, ports: &[u16]) -> anyhow::Result<()> {
    let user = current_user_name();
    let r = root.display();
    let (publish, ret, tcp_pub, tcp_pull, tcp_publish_pull, tcp_workers) =
        (ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]);
    fs::create_dir_all(root.join("etc"))?;
    fs::create_dir_all(root.join("states"))?;
    let ipc_mode = if options.ipc_mode_tcp { "tcp" } else { "ipc" };
    let master = format!(
        "root_dir: {r}\nuser: {user}\ninterface: 127.0.0.1\npublish_port: {publish}\nret_port: {ret}\n\
         sock_dir: {r}/master/sock\nauto_accept: True\nfile_roots:\n  base: [{r}/states]\n\
         log_file: {r}/log/master.log\nlog_level_logfile: info\nipc_mode: {ipc_mode}\n\
         tcp_master_pub_port: {tcp_pub}\ntcp_master_pull_port: {tcp_pull}\n\
         tcp_master_publish_pull: {tcp_publish_pull}\ntcp_master_workers: {tcp_workers}\n\
         state_events: {}\n",
        if options.state_events {
            "True"
        } else {
            "False"
        }
    );
    fs::write(
        root.join("etc/master"),
        format!(
            "{master}{}",
            options.extra_master.replace("{root}", &r.to_string())
        ),
    )?;
    for id in &options.minions {
        let dir = root.join("m").join(id);
        fs::create_dir_all(&dir)?;
        let minion = format!(
            "root_dir: {}\nid: {id}\nuser: {user}\nmaster: 127.0.0.1\nmaster_port: {ret}\npublish_port: {publish}\n\
             log_file: {}/log\nacceptance_wait_time: 1\nrandom_reauth_delay: 0\n",
            dir.display(),
            dir.display()
        );
        let address = options
            .minion_addresses
            .iter()
            .find(|(m, _)| m == id)
            .map(|(_, a)| format!("source_address: {a}\ngrains:\n  ipv4: [{a}]\n  ipv6: []\n"))
            .unwrap_or_default();
        fs::write(
            dir.join("minion"),
            format!("{minion}{address}{}", options.extra_minion),
        )?;
    }
    for (name, text) in states::FILES {
        fs::write(root.join("states").join(name), text)?;
    }
    Ok(())
}
