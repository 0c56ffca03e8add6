//! The shipped unit under a real systemd (PID 1 of a `systemd-nspawn`
//! container, support::nspawn) against a real Salt master: every hardening
//! directive applied for real (seccomp, namespaces, a read-only system, `salt`
//! as the user), `Type=notify` readiness, watchdog pings that systemd counts, a
//! bus socket under /run/salt/master read through `ProtectSystem=strict`,
//! records written to the state directory, `process_*` metrics from /proc,
//! `systemctl reload` and a clean `systemctl stop`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use saltsight::bus::Endpoint;
use saltsight::lab::{Lab, LabOptions};

use crate::service::write;
use crate::support::clickhouse::free_port;
use crate::support::lab_lock;
use crate::support::nspawn::{Bind, Container};
use crate::support::upstream::get;

/// The `salt` user of the container (not a user of the host).
const SALT_UID: u32 = 64_990;
const BIN_INSIDE: &str = "/opt/saltsight/saltsight";
const SOCK_DIR_INSIDE: &str = "/run/salt/master";

/// The shipped unit, `ExecStart=` pointed at this build; its watchdog shortened
/// by a drop-in, so that a missed ping shows within the test.
fn unit_files(dir: &Path) {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/saltsight.service");
    let unit = std::fs::read_to_string(shipped).expect("read the unit");
    assert!(unit.contains("ExecStart=/usr/bin/saltsight run"), "{unit}");
    write(
        &dir.join("saltsight.service"),
        &unit.replace("/usr/bin/saltsight", BIN_INSIDE),
    );
    write(&dir.join("watchdog.conf"), "[Service]\nWatchdogSec=2\n");
    write(
        &dir.join("saltsight-test.target"),
        "[Unit]\nDescription=saltsight under test\nDefaultDependencies=no\n\
         Wants=systemd-journald.socket saltsight.service\nAfter=systemd-journald.socket\n",
    );
    write(
        &dir.join("passwd"),
        &format!(
            "root:x:0:0:root:/root:/bin/sh\nsalt:x:{SALT_UID}:{SALT_UID}:Salt:/opt/salt:/usr/sbin/nologin\n\
             nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ),
    );
    write(
        &dir.join("group"),
        &format!("root:x:0:\nsalt:x:{SALT_UID}:\nnogroup:x:65534:\n"),
    );
}

fn config(metrics_port: u16) -> String {
    format!(
        "master_id = \"lab\"\n[bus]\nendpoint = \"unix:{SOCK_DIR_INSIDE}/master_event_pub.ipc\"\n\
         [metrics]\nlisten_address = \"127.0.0.1:{metrics_port}\"\n\
         [[output]]\ntype = \"file\"\nname = \"file\"\npath = \"/var/lib/saltsight/records.jsonl\"\n"
    )
}

/// Gives the lab's bus socket to the container's `salt`, as a packaged master
/// runs as `salt`; returns its directory.
fn socket_for_salt(lab: &Lab) -> std::path::PathBuf {
    let Endpoint::Unix(socket) = lab.endpoint() else {
        panic!("the lab's bus is not a unix socket");
    };
    let uid = Some(nix::unistd::Uid::from_raw(SALT_UID));
    let gid = Some(nix::unistd::Gid::from_raw(SALT_UID));
    nix::unistd::chown(&socket, uid, gid).expect("chown the socket");
    let dir = socket.parent().expect("socket dir").to_path_buf();
    nix::unistd::chown(&dir, uid, gid).expect("chown the socket dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    dir
}

/// Polls `done` until it finds something; on a timeout, fails with `why()`.
fn wait_for(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> Option<String>,
    why: impl Fn() -> String,
) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = done() {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {timeout:?}; {}",
            why()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_shipped_unit_runs_under_a_real_systemd_against_a_real_master() {
    let _lock = lab_lock();
    let lab = Lab::start(LabOptions::default()).expect("start the Salt lab");
    let sock_dir = socket_for_salt(&lab);
    let dir = tempfile::tempdir().expect("tempdir");
    let files = dir.path();
    unit_files(files);
    let metrics_port = free_port();
    write(&files.join("saltsight.toml"), &config(metrics_port));
    let state = files.join("state");
    std::fs::create_dir(&state).expect("state dir");
    let binds = [
        (files.join("passwd"), "/etc/passwd", false),
        (files.join("group"), "/etc/group", false),
        (
            files.join("saltsight.service"),
            "/etc/systemd/system/saltsight.service",
            false,
        ),
        (
            files.join("watchdog.conf"),
            "/etc/systemd/system/saltsight.service.d/watchdog.conf",
            false,
        ),
        (
            files.join("saltsight-test.target"),
            "/etc/systemd/system/saltsight-test.target",
            false,
        ),
        (
            files.join("saltsight.toml"),
            "/etc/saltsight/saltsight.toml",
            false,
        ),
        (crate::support::bin().into(), BIN_INSIDE, false),
        (sock_dir.clone(), SOCK_DIR_INSIDE, false),
        (state.clone(), "/var/lib/saltsight", true),
    ];
    let binds: Vec<Bind<'_>> = binds
        .iter()
        .map(|(host, inside, writable)| Bind {
            host,
            inside,
            writable: *writable,
        })
        .collect();
    let container = Container::boot(files, "saltsight-test.target", &binds);
    let unit = "saltsight.service";
    let why = |container: &Container| {
        format!(
            "{:?}\njournal:\n{}",
            container.show(unit, &["ActiveState", "SubState", "Result", "StatusText"]),
            container.journal(unit)
        )
    };

    // Type=notify: active only once saltsight said READY=1, connected.
    let status = wait_for(
        "saltsight active",
        Duration::from_secs(30),
        || {
            let props = container.show(unit, &["ActiveState", "StatusText"]);
            match props.get("ActiveState").map(String::as_str) {
                Some("active") => props.get("StatusText").cloned(),
                Some("failed") => panic!("saltsight failed: {}", why(&container)),
                _ => None,
            }
        },
        || why(&container),
    );
    assert_eq!(
        status,
        format!("Watching the event bus at unix:{SOCK_DIR_INSIDE}/master_event_pub.ipc."),
        "{}",
        why(&container)
    );
    let props = container.show(unit, &["MainPID", "User", "NRestarts"]);
    assert_eq!(props["NRestarts"], "0", "{}", why(&container));

    // The watchdog (2 s here): systemd sees pings, and 3 s on nothing restarted it.
    let pinged = |c: &Container| c.show(unit, &["WatchdogTimestampMonotonic"]);
    let first = pinged(&container);
    std::thread::sleep(Duration::from_secs(3));
    let later = pinged(&container);
    assert_ne!(first, later, "no watchdog ping reached systemd");
    let props = container.show(unit, &["ActiveState", "NRestarts"]);
    assert_eq!(
        (props["ActiveState"].as_str(), props["NRestarts"].as_str()),
        ("active", "0"),
        "{}",
        why(&container)
    );

    // A job, read through the sandbox and written to the state directory.
    let out = lab
        .salt(&["*", "test.ping", "--show-jid"])
        .expect("salt runs");
    let jid = crate::support::jid_from(&out);
    let records = state.join("records.jsonl");
    wait_for(
        "job_completed in the file output",
        Duration::from_secs(30),
        || {
            let text = std::fs::read_to_string(&records).ok()?;
            text.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .find(|r| r["kind"] == "job_completed" && r["jid"] == jid.as_str())
                .filter(|r| r["returned"] == 3 && r["succeeded"] == 3)
                .map(|r| r.to_string())
        },
        || {
            let text = std::fs::read_to_string(&records).unwrap_or_default();
            format!("records:\n{text}\n{}", why(&container))
        },
    );
    let mode = std::fs::metadata(&records)
        .expect("records")
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "UMask=0077 and the file output's own mode"
    );

    // /metrics from the host: the bus, and process_* (/proc is readable).
    let (code, body) =
        get(([127, 0, 0, 1], metrics_port).into(), "/metrics").expect("GET /metrics");
    assert_eq!(code, 200);
    for line in ["saltsight_bus_connected 1", "process_start_time_seconds "] {
        assert!(body.contains(line), "{line:?} not in /metrics:\n{body}");
    }

    // systemctl reload: RELOADING=1 then READY=1, the same process, still watching.
    let pid = container.show(unit, &["MainPID"])["MainPID"].clone();
    let reload = container.systemctl(&["reload", unit]);
    assert!(reload.status.success(), "reload: {}", why(&container));
    let props = container.show(unit, &["ActiveState", "MainPID", "StatusText"]);
    assert_eq!(props["ActiveState"], "active");
    assert_eq!(props["MainPID"], pid, "a reload is not a restart");
    assert!(
        props["StatusText"].starts_with("Watching the event bus"),
        "{props:?}"
    );
    let journal = container.journal(unit);
    assert!(
        journal.contains("Reloaded the config (SIGHUP)."),
        "{journal}"
    );
    // stderr is the journal: no second timestamp in front of the level.
    assert!(
        journal.lines().any(|l| l.trim_start().starts_with("INFO "))
            && !journal.lines().any(|l| l.starts_with("20")),
        "{journal}"
    );

    // systemctl stop: SIGTERM, a drained pipeline and exit 0.
    let stop = container.systemctl(&["stop", unit]);
    assert!(stop.status.success(), "stop: {}", why(&container));
    let props = container.show(unit, &["ActiveState", "Result", "ExecMainStatus"]);
    assert_eq!(
        (
            props["ActiveState"].as_str(),
            props["Result"].as_str(),
            props["ExecMainStatus"].as_str()
        ),
        ("inactive", "success", "0"),
        "{}",
        why(&container)
    );
    // The stop wrote the checkpoint into the state directory, as its user.
    let checkpoint = state.join("state/checkpoint");
    let meta = std::fs::metadata(&checkpoint)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", checkpoint.display(), why(&container)));
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "UMask=0077");
}
