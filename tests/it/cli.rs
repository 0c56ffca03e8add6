//! The command line's contract: exit codes, config errors, bad input counted and
//! survived.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use crate::support::{bin, fixture};

fn saltsight(args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .env_remove("SALTSIGHT_CONFIG")
        .output()
        .expect("run saltsight")
}

#[test]
fn an_unknown_config_key_exits_78_naming_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("saltsight.toml");
    std::fs::write(
        &path,
        "colour = \"blue\"\n[bus]\nqueue_frame = 10\nreconnect = \"1s\"\n[jobs]\nmax_jobs = 0\n[metrics]\nport = 1\n",
    )
    .unwrap();
    let out = saltsight(&["--config", path.to_str().unwrap(), "check-config"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "EX_CONFIG: {err}");
    // Every problem at once: four unknown keys in three sections, and a value.
    for expected in [
        "unknown key `colour`",
        "unknown key `bus.queue_frame`",
        "unknown key `bus.reconnect`",
        "unknown key `metrics.port`",
        "jobs.max_jobs must be at least 1",
    ] {
        assert!(err.contains(expected), "{expected:?} not in {err}");
    }
    assert!(err.contains(path.to_str().unwrap()), "{err}");
}

/// The alert endpoint puts events in front of the Reactor: on every interface
/// without auth, `check-config` and `run` refuse the config, naming why; on
/// loopback it is accepted, and `check-config` says what will be fired where.
#[test]
fn reactor_alerts_off_loopback_without_auth_are_refused_by_check_config_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let master = dir.path().join("master");
    std::fs::write(&master, "ipc_mode: tcp\ntcp_master_pull_port: 47121\n").unwrap();
    let path = dir.path().join("saltsight.toml");
    let config = |listen: &str| {
        format!(
            "[bus]\nmaster_config = {:?}\n[metrics]\nlisten_address = {listen:?}\n[reactor]\nenabled = true\nalerts = true\n",
            master.to_str().unwrap()
        )
    };
    std::fs::write(&path, config(":47470")).unwrap();
    for args in [&["check-config"][..], &["run", "--allow-root"][..]] {
        let mut all = vec!["--config", path.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = saltsight(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{args:?}: {err}");
        assert!(
            err.contains("reactor.alerts on :47470 (not loopback) needs basic_auth_users"),
            "{args:?}: {err}"
        );
    }
    std::fs::write(&path, config("127.0.0.1:47470")).unwrap();
    let out = saltsight(&[
        "--config",
        path.to_str().unwrap(),
        "check-config",
        "--no-environment",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("reactor: fires missing, failed, incident, rollout, pressure through tcp:127.0.0.1:47121"),
        "{text}"
    );
    assert!(
        text.contains("reactor alerts: Alertmanager's webhook at POST /alerts on 127.0.0.1:47470"),
        "{text}"
    );
}

#[test]
fn check_config_resolves_the_endpoint_from_the_master_config() {
    let dir = tempfile::tempdir().unwrap();
    let master = dir.path().join("master");
    std::fs::write(&master, "ipc_mode: tcp\ntcp_master_pub_port: 47120\n").unwrap();
    let out = saltsight(&[
        "check-config",
        "--no-environment",
        "--bus.master-config",
        master.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("bus endpoint: tcp:127.0.0.1:47120"), "{text}");
    assert!(text.contains(master.to_str().unwrap()), "{text}");
}

#[test]
fn env_overrides_the_master_config() {
    let out = Command::new(bin())
        .args(["check-config"])
        .env_remove("SALTSIGHT_CONFIG")
        .env(
            "SALTSIGHT_ENDPOINT",
            "unix:/nonexistent/master_event_pub.ipc",
        )
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("bus endpoint: unix:/nonexistent/master_event_pub.ipc"),
        "{text}"
    );
    assert!(text.contains("is salt-master running"), "{text}");
    assert_eq!(out.status.code(), Some(69), "EX_UNAVAILABLE: {text}");
}

/// A length-prefixed dump with a frame of garbage, one over the cap and one whose
/// body lacks the tag separator, between good frames: the bad ones are counted by
/// reason and skipped, every good one comes through, and the exit code says so.
#[test]
fn bad_frames_in_a_prefixed_stream_are_counted_and_skipped() {
    let capture = std::fs::read(fixture("captures/3006.30_ipc_ping_and_fail.bin")).unwrap();
    let mut dump = Vec::new();
    let push = |dump: &mut Vec<u8>, payload: &[u8]| {
        dump.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        dump.extend_from_slice(payload);
    };
    push(&mut dump, &[0x82, 0xc1, 0xc1]); // invalid msgpack
    // Over the 4096-byte cap below, with Salt's envelope: skipped by its length.
    let mut big = b"\x82\xa4head\x80\xa4body\xc6\x00\x00\x13\x80".to_vec();
    big.resize(5000, b'x');
    push(&mut dump, &big);
    push(&mut dump, b"\x81\xa4body\xc4\x03tag"); // no "\n\n"
    dump.extend_from_slice(&capture);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dump.bin");
    std::fs::write(&path, &dump).unwrap();
    let out = saltsight(&[
        "--max-frame-bytes",
        "4096",
        "replay",
        path.to_str().unwrap(),
    ]);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{summary}");
    assert!(
        summary.contains("replayed 15 frames: 13 events"),
        "{summary}"
    );
    assert!(
        summary.contains("envelope=1") && summary.contains("no_tag_separator=1"),
        "{summary}"
    );
    assert!(summary.contains("frames skipped: 1"), "{summary}");
}

/// On the bare form garbage cannot be skipped by length: the stream is given up
/// (live, the reader reconnects), what came before it is kept.
#[test]
fn garbage_in_a_bare_stream_is_a_desync_after_the_good_frames() {
    let mut dump = std::fs::read(fixture("captures/3008.3_ipc_test_ping.bin")).unwrap();
    dump.extend_from_slice(&[0xc1, 0x00, 0x01]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dump.bin");
    std::fs::write(&path, &dump).unwrap();
    let out = saltsight(&["replay", path.to_str().unwrap()]);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{summary}");
    assert!(
        summary.contains("replayed 5 frames: 5 events") && summary.contains("desyncs: 1"),
        "{summary}"
    );
}

#[test]
fn a_missing_recording_is_a_clear_error() {
    let out = saltsight(&["replay", "/nonexistent/capture.bin"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("cannot open recording /nonexistent/capture.bin")
    );
}

/// `run` as root is refused (exit 77) with advice naming who can read the
/// socket; `--allow-root` gets past it. The suite runs as root (real Salt needs
/// it), so this is checked on every CI run.
#[test]
fn run_as_root_is_refused_naming_the_socket_owner_and_group() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the integration tests run as root (the Salt lab needs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("master_event_pub.ipc");
    let endpoint = format!("unix:{}", socket.display());
    // No socket yet: the advice is the master's user.
    let out = saltsight(&["--endpoint", &endpoint, "run"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{err}");
    assert!(
        err.contains("does not run as root") && err.contains("master's user"),
        "{err}"
    );
    // 3007+'s 0660: owner or group; 3006's 0600: the owner only.
    std::fs::write(&socket, b"").unwrap();
    use std::os::unix::fs::PermissionsExt;
    // Owned by root (a master with `user: root`): root is not advised where
    // a group would do, since `run` refuses it.
    for (mode, advice) in [
        (
            0o660,
            "(the master runs as root): run it as a user in group `root`",
        ),
        (0o600, "only root can open it. Run the master as `salt`"),
    ] {
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = saltsight(&["--endpoint", &endpoint, "run"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(77), "{err}");
        assert!(err.contains(advice), "{advice:?} not in {err}");
        assert!(!err.contains("run it as `root`"), "{err}");
        assert_eq!(
            err.matches("does not run as root").count(),
            1,
            "said once: {err}"
        );
    }
    // Allowed, it gets as far as the bus (a plain file, not a socket: it keeps
    // retrying) and is stopped by SIGTERM, by pid.
    let state = tempfile::tempdir().expect("state dir");
    let mut child = Command::new(bin())
        .args([
            "--endpoint",
            &endpoint,
            "run",
            "--allow-root",
            "--output",
            "none",
        ])
        .env_remove("SALTSIGHT_CONFIG")
        .env("SALTSIGHT_WEB_LISTEN_ADDRESS", "127.0.0.1:0")
        .env("SALTSIGHT_STATE_DIR", state.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // Past the check once it tries the bus (stderr closing first fails the test).
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("piped stderr"));
    let mut err = String::new();
    while !err.contains("Cannot connect to the event bus") {
        let read = std::io::BufRead::read_line(&mut stderr, &mut err).expect("read stderr");
        assert_ne!(read, 0, "run ended before trying the bus: {err}");
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    std::io::Read::read_to_string(&mut stderr, &mut err).expect("read stderr");
    let status = child.wait().unwrap();
    assert!(!err.contains("does not run as root"), "{err}");
    assert!(status.success(), "{status:?}: {err}");
}

/// check-config connects: a unix socket and a TCP port with a listener are
/// "connected" (exit 0); a TCP port with none is refused (69); a socket this
/// user may not open (0660 root:root, run as `nobody`) is named with advice
/// that does not contradict itself (77).
#[test]
fn check_config_connects_to_the_bus_and_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("master_event_pub.ipc");
    let _unix = UnixListener::bind(&socket).unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_endpoint = format!("tcp:{}", tcp.local_addr().unwrap());
    let unix_endpoint = format!("unix:{}", socket.display());
    for endpoint in [&unix_endpoint, &tcp_endpoint] {
        let out = saltsight(&["check-config", "--bus.endpoint", endpoint]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{endpoint}: {text}");
        assert!(
            text.contains("bus: connected") && text.contains("config OK"),
            "{text}"
        );
    }
    let closed = {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        format!("tcp:{port}")
    };
    let out = saltsight(&["check-config", "--bus.endpoint", &closed]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{text}{err}");
    assert!(
        text.contains("bus: cannot connect") && !text.contains("config OK"),
        "{text}"
    );
    assert!(
        err.contains("cannot reach the event bus") && err.contains("ipc_mode: tcp"),
        "{err}"
    );

    // Present, but not for this user: Salt 3007+'s 0660, the master running as root.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o660)).unwrap();
    let out = Command::new(bin())
        .args(["check-config", "--bus.endpoint", &unix_endpoint])
        .env_clear()
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run as nobody");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "EX_NOPERM: {text}{err}");
    assert!(text.contains("Permission denied"), "{text}");
    assert!(
        text.contains("a user in group `root`") && !text.contains("run it as `root`"),
        "advice that root would not take: {text}"
    );
}

/// A fake HTTP upstream on loopback answering every request with `reply`,
/// until the test ends; returns its URL and the request lines it saw.
fn fake_upstream(reply: &'static str) -> (String, std::sync::mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let (seen, requests) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // The rest of the head.
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) <= 2 {
                    break;
                }
            }
            let _ = seen.send(line.trim_end().to_owned());
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    (url, requests)
}

/// check-config asks each HTTP output: ClickHouse `SELECT 1` must answer 1, an
/// upstream that refuses the credentials cannot be reached (69, named).
#[test]
fn check_config_probes_each_output() {
    let (clickhouse, asked) =
        fake_upstream("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n1\n");
    let (refusing, _) = fake_upstream(
        "HTTP/1.1 401 Unauthorized\r\nContent-Length: 7\r\nConnection: close\r\n\r\nno way\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let config = dir.path().join("saltsight.toml");
    let write_config = |outputs: &str| {
        std::fs::write(
            &config,
            format!(
                "[bus]\nendpoint = \"tcp:{}\"\n[spool]\ndir = {:?}\n{outputs}",
                tcp.local_addr().unwrap(),
                dir.path().join("spool").display().to_string()
            ),
        )
        .unwrap();
    };
    let ch = format!(
        "[[output]]\ntype = \"http\"\nname = \"ch\"\nurl = {clickhouse:?}\nencoding = \"clickhouse\"\n"
    );
    write_config(&ch);
    let out = saltsight(&["--config.file", config.to_str().unwrap(), "check-config"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("reachable: SELECT 1 answered 200 OK"),
        "{text}"
    );
    let request = asked
        .recv_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    assert!(request.starts_with("GET /?query=SELECT+1 "), "{request}");

    write_config(&format!(
        "{ch}[[output]]\ntype = \"http\"\nname = \"vector\"\nurl = {refusing:?}\n"
    ));
    let out = saltsight(&["--config.file", config.to_str().unwrap(), "check-config"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{text}{err}");
    assert!(
        text.contains("HEAD answered 401 Unauthorized (check the credentials)"),
        "{text}"
    );
    assert!(text.contains("cannot reach: output vector"), "{text}");
    assert!(err.contains("output vector"), "{err}");
    // --no-environment: the config alone.
    let out = saltsight(&[
        "--config.file",
        config.to_str().unwrap(),
        "check-config",
        "--no-environment",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// tail (and capture) with no master there say so and exit 69, once, unless
/// asked to wait; then they retry until stopped.
#[test]
fn tail_without_a_master_exits_unless_asked_to_wait() {
    let endpoint = "unix:/nonexistent-saltsight/master_event_pub.ipc";
    for args in [
        &["tail", "--bus.endpoint", endpoint][..],
        &["capture", "/dev/null", "--bus.endpoint", endpoint],
    ] {
        let out = saltsight(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(69), "{args:?}: {err}");
        assert_eq!(
            err.matches("cannot be reached").count(),
            1,
            "said once: {err}"
        );
        assert!(err.contains("--wait"), "{err}");
    }
    let mut child = Command::new(bin())
        .args(["tail", "--wait", "--bus.endpoint", endpoint])
        .env_remove("SALTSIGHT_CONFIG")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut err = String::new();
    while !err.contains("Cannot connect to the event bus") {
        let read = stderr.read_line(&mut err).expect("read stderr");
        assert_ne!(read, 0, "tail --wait ended: {err}");
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    stderr.read_to_string(&mut err).unwrap();
    assert!(child.wait().unwrap().success(), "{err}");
}

/// A port in use is said once (the log line), with exit 1.
#[test]
fn a_port_in_use_is_said_once() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args([
            "run",
            "--allow-root",
            "--output",
            "none",
            "--bus.endpoint",
            "unix:/nonexistent-saltsight/master_event_pub.ipc",
            "--web.listen-address",
            &address,
            "--state.dir",
        ])
        .arg(state.path())
        .env_remove("SALTSIGHT_CONFIG")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("cannot listen on").count(), 1, "{err}");
}

/// Flags are named after their config keys; the earlier names still work,
/// hidden, before or after the subcommand, and a flag only shows where it
/// applies. A usage error is 64 (EX_USAGE).
#[test]
fn flags_old_and_new_and_where_they_apply() {
    let shown = |args: &[&str]| {
        let out = saltsight(args);
        assert!(out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let endpoint = "unix:/nonexistent/old.ipc";
    for args in [
        &["--endpoint", endpoint, "check-config", "--no-environment"][..],
        &["check-config", "--no-environment", "--endpoint", endpoint],
        &[
            "check-config",
            "--no-environment",
            "--bus.endpoint",
            endpoint,
        ],
    ] {
        assert!(shown(args).contains(endpoint), "{args:?}");
    }
    // Before the subcommand the old flag beats the environment; after it, the
    // new one beats the old.
    let out = Command::new(bin())
        .args(["--endpoint", endpoint, "check-config", "--no-environment"])
        .env_remove("SALTSIGHT_CONFIG")
        .env("SALTSIGHT_ENDPOINT", "unix:/from/env.ipc")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(endpoint));
    let text = shown(&[
        "--endpoint",
        "unix:/before.ipc",
        "check-config",
        "--no-environment",
        "--bus.endpoint",
        endpoint,
    ]);
    assert!(
        text.contains(endpoint) && !text.contains("before.ipc"),
        "{text}"
    );
    let tail = shown(&["tail", "--help"]);
    assert!(
        tail.contains("--bus.endpoint") && tail.contains("--log.level"),
        "{tail}"
    );
    for absent in [
        "web.listen-address",
        "--log-level",
        "--endpoint ",
        "state.dir",
    ] {
        assert!(!tail.contains(absent), "{absent} on tail: {tail}");
    }
    assert!(!shown(&["demo", "--help"]).contains("--bus."));
    assert!(shown(&["run", "--help"]).contains("--web.listen-address"));
    for args in [
        &["--bogus", "check-config"][..],
        &["tail", "--web.listen-address", ":1"],
    ] {
        assert_eq!(saltsight(args).status.code(), Some(64), "{args:?}");
    }
}

/// The exit codes `main` uses are the ones README.md lists, and the unit does
/// not restart on those a restart cannot fix.
#[test]
fn every_exit_code_is_documented_and_the_final_ones_are_not_restarted() {
    use saltsight::cli::exit;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for status in exit::ALL {
        assert!(
            readme.contains(&format!("\n| {} | ", status.code)),
            "exit {} ({}) is not in README.md's table",
            status.code,
            status.name
        );
    }
    let unit = std::fs::read_to_string(root.join("systemd/saltsight.service")).unwrap();
    let final_codes = [exit::USAGE, exit::NO_PERMISSION, exit::CONFIG]
        .map(|s| s.code.to_string())
        .join(" ");
    assert!(
        unit.contains(&format!("\nRestartPreventExitStatus={final_codes}\n")),
        "{final_codes}"
    );
    let install = std::fs::read_to_string(root.join("docs/install.md")).unwrap();
    assert!(install.contains(&format!("RestartPreventExitStatus={final_codes}")));
}

/// `--format text` (the default on a terminal) gives one readable line per
/// record, the same records as the JSON lines, in the same order.
#[test]
fn records_as_text_are_one_readable_line_each() {
    let capture = fixture("captures/3008.3_ipc_state_apply_fail.bin");
    let capture = capture.to_str().expect("utf-8");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        "master_id = \"lab\"\n[bus]\nendpoint = \"unix:/unused\"\n[correlate]\ndiscover = false\n",
    )
    .expect("config");
    let config = config.to_str().expect("utf-8");
    let run = |format: &str| {
        let out = saltsight(&[
            "--config", config, "replay", "--output", "stdout", "--format", format, capture,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let (json, text) = (run("json"), run("text"));
    let records: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), records.len(), "{text}");
    for (line, record) in lines.iter().zip(&records) {
        let kind = record["kind"].as_str().expect("kind");
        assert!(!line.starts_with('{'), "{line}");
        assert_eq!(line.split_whitespace().nth(1), Some(kind), "{line}");
        if let Some(jid) = record["jid"].as_str() {
            assert!(line.contains(jid), "{line}");
        }
        if kind == "state_failure" || kind == "minion_missing" {
            let minion = record["minion"].as_str().expect("minion");
            assert!(line.contains(minion), "{line}");
        }
        if kind == "failure_group" {
            let count = record["count"].as_u64().expect("count");
            assert!(line.contains(&format!("on {count} minion(s)")), "{line}");
        }
    }
    assert!(
        lines.iter().any(|l| l.contains("FAILED")),
        "a failed return reads as failed: {text}"
    );
}

/// Every query command against a missing, a damaged and an empty history: a
/// message that says which, and its exit code; never a panic.
#[test]
fn the_query_commands_say_what_is_wrong_with_the_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    let history = dir.path().join("history.sqlite");
    std::fs::write(
        &config,
        format!(
            "master_id = \"m\"\n[history]\npath = {:?}\n",
            history.display().to_string()
        ),
    )
    .expect("config");
    let ask = |args: &[&str]| {
        let out = Command::new(bin())
            .arg("--config")
            .arg(&config)
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .expect("runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let commands: [&[&str]; 12] = [
        &["job", "20260101000000000000"],
        &["jobs"],
        &["failures"],
        &["minion", "web1"],
        &["drift"],
        &["wait", "20260101000000000000", "--timeout", "1s"],
        &["job", "20260101000000000000", "--wait", "--timeout", "1s"],
        &["status"],
        &["incidents"],
        &["rollouts"],
        &["rollout", "HEAD"],
        &["rollout", "abcd1234"],
    ];
    for args in commands {
        let (code, text) = ask(args);
        assert!(
            code == 69 && text.contains("no history at"),
            "missing, {args:?}: {code} {text}"
        );
        assert!(!text.contains("panicked"), "{text}");
    }
    std::fs::write(&history, b"not a database at all, just bytes").expect("damaged");
    for args in commands {
        let (code, text) = ask(args);
        assert!(
            code == 69 && text.contains("history"),
            "damaged, {args:?}: {code} {text}"
        );
        assert!(!text.contains("panicked"), "{text}");
    }
    std::fs::remove_file(&history).expect("remove");
    drop(saltsight::history::write::Writer::open(&history).expect("an empty history"));
    let expected = [2, 0, 0, 2, 0, 2, 2, 0, 0, 0, 2, 2];
    for (args, want) in commands.iter().zip(expected) {
        let (code, text) = ask(args);
        assert_eq!(code, want, "empty, {args:?}: {text}");
        assert!(!text.contains("panicked"), "{text}");
    }
    assert!(ask(&["drift"]).1.contains("No drift since"));
    assert!(ask(&["status"]).1.contains("Nothing wrong now."));
    assert!(ask(&["rollout", "HEAD"]).1.contains("no rollout of HEAD"));
    let (code, text) = ask(&["rollout", "xyz"]);
    assert!(code == 64 && text.contains("not a commit"), "{code} {text}");
}

/// `status` reads each output's spool from its directory: a batch waiting
/// past the backlog alert's 15 minutes, or one upstream refused within the
/// hour, is wrong (exit 1, named); a fresh batch is not.
#[test]
fn status_names_an_old_backlog_and_a_refused_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    let history = dir.path().join("history.sqlite");
    let spool = dir.path().join("spool");
    std::fs::write(
        &config,
        format!(
            "master_id = \"m\"\n[history]\npath = {:?}\n[spool]\ndir = {:?}\n[[output]]\ntype = \"http\"\nname = \"up\"\nurl = \"http://127.0.0.1:9/\"\n",
            history.display().to_string(),
            spool.display().to_string(),
        ),
    )
    .expect("config");
    drop(saltsight::history::write::Writer::open(&history).expect("an empty history"));
    let status = || crate::support::ask(&config, dir.path(), &["status"]);
    let up = spool.join("up");
    std::fs::create_dir_all(up.join("dead-letter")).expect("spool dir");
    let micros = |ago_s: u64| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock");
        (now.as_micros() as u64) - ago_s * 1_000_000
    };
    std::fs::write(up.join(format!("{:020}.seg", micros(60))), b"batch").expect("batch");
    let (code, text) = status();
    assert!(
        code == 0 && text.contains("output up: 1 batches") && text.contains("Nothing wrong now."),
        "{code}: {text}"
    );
    std::fs::write(up.join(format!("{:020}.seg", micros(20 * 60))), b"old").expect("batch");
    let (code, text) = status();
    assert!(
        code == 1 && text.contains("output up has records waiting over 15 minutes"),
        "{code}: {text}"
    );
    for seg in std::fs::read_dir(&up).expect("spool").flatten() {
        if seg.path().extension().is_some_and(|e| e == "seg") {
            std::fs::remove_file(seg.path()).expect("sent");
        }
    }
    std::fs::write(
        up.join(format!("dead-letter/{:020}.seg", micros(10))),
        b"no",
    )
    .expect("dead");
    let (code, text) = status();
    assert!(
        code == 1 && text.contains("output up had batches refused in the last hour"),
        "{code}: {text}"
    );
}

/// `status` asks the running agent on its loopback `/metrics` (a fixed port,
/// no TLS or auth): disconnected from the bus is wrong, connected is said
/// with the lag; a stand-in agent answers here.
#[test]
fn status_asks_the_running_agent_whether_it_is_connected() {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let answers = [
        "saltsight_bus_connected 0\n",
        "saltsight_bus_connected 1\nsaltsight_master_bus_lag_p99_seconds 0.25\n",
    ];
    let agent = std::thread::spawn(move || {
        for body in answers {
            let (stream, _) = listener.accept().expect("accept");
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n{body}"
            )
            .expect("answer");
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    let history = dir.path().join("history.sqlite");
    std::fs::write(
        &config,
        format!(
            "master_id = \"m\"\n[history]\npath = {:?}\n[metrics]\nlisten_address = \"127.0.0.1:{port}\"\n",
            history.display().to_string()
        ),
    )
    .expect("config");
    drop(saltsight::history::write::Writer::open(&history).expect("an empty history"));
    let status = || crate::support::ask(&config, dir.path(), &["status"]);
    let (code, text) = status();
    assert!(
        code == 1 && text.contains("not connected to the event bus"),
        "{code}: {text}"
    );
    let (code, text) = status();
    assert!(
        code == 0 && text.contains("connected to the event bus, bus lag p99 250ms"),
        "{code}: {text}"
    );
    agent.join().expect("the stand-in agent");
    // Nobody answering is said, not wrong: the agent may run another config.
    let (code, text) = status();
    assert!(
        code == 0 && text.contains("no saltsight answering"),
        "{code}: {text}"
    );
}
