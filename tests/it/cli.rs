//! The command line's contract: exit codes, config errors, bad input counted and
//! survived.

use std::process::Command;

use crate::support::{bin, fixture};

fn saltsight(args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .env_remove("SALTSIGHT_CONFIG")
        .output()
        .expect("run saltsight")
}

#[test]
fn an_unknown_config_key_exits_64_naming_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("saltsight.toml");
    std::fs::write(
        &path,
        "colour = \"blue\"\n[bus]\nqueue_frame = 10\nreconnect = \"1s\"\n[jobs]\nmax_jobs = 0\n[metrics]\nport = 1\n",
    )
    .unwrap();
    let out = saltsight(&["--config", path.to_str().unwrap(), "check-config"]);
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
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

#[test]
fn check_config_resolves_the_endpoint_from_the_master_config() {
    let dir = tempfile::tempdir().unwrap();
    let master = dir.path().join("master");
    std::fs::write(&master, "ipc_mode: tcp\ntcp_master_pub_port: 47120\n").unwrap();
    let out = saltsight(&["--master-config", master.to_str().unwrap(), "check-config"]);
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
    assert!(text.contains("not present"), "{text}");
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
    for (mode, advice) in [
        (0o660, "run it as `root` or as a user in group `root`"),
        (
            0o600,
            "0600 (Salt 3006 makes it 0600; 3007+ 0660): run it as `root`",
        ),
    ] {
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = saltsight(&["--endpoint", &endpoint, "run"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(77), "{err}");
        assert!(err.contains(advice), "{advice:?} not in {err}");
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
