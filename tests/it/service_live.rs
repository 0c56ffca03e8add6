//! `run` under a (played) service manager against a real Salt master: READY=1
//! only once the bus is connected, watchdog pings from the event loop while it is
//! idle and while jobs flow, a status that follows the master going and coming
//! back, STOPPING=1 and a clean exit on SIGTERM.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use saltsight::lab::{Lab, LabOptions};

use crate::service::{Notifications, has_line, longest_silence};
use crate::support::{CONNECTED, Saltsight, lab_lock, salt_bg, wait_line};

#[test]
fn run_is_ready_once_connected_and_feeds_the_watchdog_idle_and_busy() {
    let _lab_lock = lab_lock();
    let mut lab = Lab::start(LabOptions::default()).expect("start the Salt lab");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut notify = Notifications::bind(dir.path());
    let master_config = lab.master_config().display().to_string();
    let mut run = Saltsight::spawn_with_env(
        &["--master-config", &master_config, "run", "--output", "none"],
        // 1 s: pinged every 0.5 s. WATCHDOG_PID is set by systemd to the main
        // pid; unset here, as sd_watchdog_enabled allows.
        &[
            ("NOTIFY_SOCKET", &notify.env()),
            ("WATCHDOG_USEC", "1000000"),
        ],
    );
    let saltsight = run.pid().expect("running");

    let ready = notify.wait(Duration::from_secs(15), |d| has_line(d, "READY=1"));
    assert!(
        ready.contains("STATUS=Watching the event bus at unix:"),
        "{ready}"
    );
    let mut log = Vec::new();
    wait_line(&run.stderr, &mut log, Duration::from_secs(5), |l| {
        l.contains(CONNECTED)
    })
    .expect("connected");

    // Idle: 3 s at one ping per 0.5 s, never 1 s (WATCHDOG_USEC) without one,
    // which is what systemd's watchdog judges.
    let idle_from = Instant::now();
    let idle = notify.pings_during(Duration::from_secs(3));
    let silence = longest_silence(idle_from, &idle, Instant::now());
    assert!(
        (4..=8).contains(&idle.len()) && silence < Duration::from_secs(1),
        "{} pings in 3 s idle, {silence:?} the longest without",
        idle.len()
    );

    // Busy: jobs publish and return while the pings go on.
    let mut jobs = salt_bg(&lab, &["*", "test.arg", "x", "--async"]);
    let busy_from = Instant::now();
    while busy_from.elapsed() < Duration::from_secs(3) {
        let _ = salt_bg(&lab, &["*", "test.ping", "--timeout", "5"]).wait();
    }
    let _ = jobs.wait();
    let busy_to = Instant::now();
    let busy = notify.pings_since(busy_from);
    let silence = longest_silence(busy_from, &busy, busy_to);
    assert!(
        silence < Duration::from_secs(1),
        "{} pings in {:?} of jobs, {silence:?} the longest without",
        busy.len(),
        busy_to - busy_from
    );

    // The status line follows the bus: the master stopped, then back.
    lab.stop_master();
    let lost = notify.wait(Duration::from_secs(10), |d| d.starts_with("STATUS="));
    assert!(
        lost.contains("Not connected to the event bus at unix:"),
        "{lost}"
    );
    lab.start_master().expect("restart the master");
    let back = notify.wait(Duration::from_secs(30), |d| d.starts_with("STATUS="));
    assert!(back.contains("Watching the event bus at unix:"), "{back}");

    kill(saltsight, Signal::SIGTERM).expect("SIGTERM");
    notify.wait(Duration::from_secs(5), |d| has_line(d, "STOPPING=1"));
    let exit = run.wait_exit(Duration::from_secs(6)).expect("exits");
    assert!(exit.success(), "{exit:?}");
}
