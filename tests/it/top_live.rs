//! `saltsight top` as a person runs it, in tmux against a real Salt master:
//! with db1 stopped, a `test.sleep` job's returns arrive against expected
//! (2/3), db1's verdict falls at the deadline with its reason, Enter on the
//! job shows its recap (`saltsight job`), and q quits with the terminal given
//! back and exit 0.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use saltsight::lab::{Lab, LabOptions};

use crate::support::{bin, lab_lock, salt_bg};

/// One private tmux server, killed (that server only) when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(command: &str) -> Tmux {
        Tmux::start_named("live", command)
    }

    /// On a socket of its own per `name` (tests run in parallel).
    fn start_named(name: &str, command: &str) -> Tmux {
        let tmux = Tmux {
            socket: format!("saltsight-top-{name}-{}", std::process::id()),
        };
        let out = tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "200",
            "-y",
            "50",
            command,
            ";",
            "set-option",
            "-t",
            "top",
            "remain-on-exit",
            "on",
        ]);
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("/usr/bin/tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "top"];
        args.extend(keys);
        assert!(self.run(&args).status.success(), "send-keys {keys:?}");
    }

    /// `#{pane_dead} #{pane_dead_status}`.
    fn pane(&self) -> String {
        let out = self.run(&[
            "display-message",
            "-p",
            "-t",
            "top",
            "#{pane_dead} #{pane_dead_status}",
        ]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Polls the screen until `pred` holds; panics with the last screen after `limit`.
    fn wait_screen(&self, what: &str, limit: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.screen();
            if pred(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {limit:?}; the screen:\n{screen}\npane: {}",
                self.pane()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The screen's line for the `test.sleep` job.
fn sleep_row(screen: &str) -> Option<&str> {
    screen
        .lines()
        .find(|l| l.contains("test.sleep") && (l.contains("running") || l.contains("done")))
}

fn write_config(lab: &Lab, dir: &Path) -> std::path::PathBuf {
    let config = dir.join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"test.sleep\" = \"8s\" }}\n",
            lab.master_config().display().to_string()
        ),
    )
    .expect("write config");
    config
}

#[test]
fn top_shows_returns_arriving_a_verdict_and_a_drill_down() {
    let _lock = lab_lock();
    let mut lab = Lab::start(LabOptions::default()).expect("lab starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(&lab, dir.path());
    let state = dir.path().join("state");
    // The exit status through a file: tmux's own (#{pane_dead_status}) is
    // only there once its server has reaped the shell, which it has been
    // seen not to do for a while.
    let status_file = dir.path().join("exit-status");
    let tmux = Tmux::start(&format!(
        "env SALTSIGHT_STATE_DIR={} {} --config {} top; echo $? > {}",
        state.display(),
        bin(),
        config.display(),
        status_file.display()
    ));
    tmux.wait_screen("connected bus", Duration::from_secs(15), |s| {
        s.contains("bus connected")
    });

    // (1) Returns arriving against expected: two of three, db1 stopped.
    lab.stop_minion("db1").expect("stop db1");
    let mut cli = salt_bg(&lab, &["*", "test.sleep", "3"]);
    tmux.wait_screen(
        "the job running, none returned",
        Duration::from_secs(15),
        |s| sleep_row(s).is_some_and(|row| row.contains("running") && row.contains("0/3")),
    );
    tmux.wait_screen(
        "2 of 3 returned while it runs",
        Duration::from_secs(20),
        |s| sleep_row(s).is_some_and(|row| row.contains("running") && row.contains("2/3")),
    );

    // (2) db1's verdict, with the reason its record gives.
    let screen = tmux.wait_screen("db1's verdict", Duration::from_secs(30), |s| {
        s.lines().any(|l| {
            l.contains("db1")
                && l.contains("test.sleep")
                && (l.contains("missing not_connected") || l.contains("missing no_response"))
        })
    });
    assert!(
        sleep_row(&screen).is_some_and(|r| r.contains("done")
            && (r.contains("1 not_connected") || r.contains("1 no_response"))),
        "the job closes with one missing: {screen}"
    );

    // (3) Select the job (the salt CLI's own find_job jobs may list above it)
    // and drill down.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let screen = tmux.screen();
        let rows: Vec<&str> = screen.lines().filter(|l| l.contains('│')).collect();
        let selected = rows.iter().position(|l| l.contains('▶'));
        let target = rows.iter().position(|l| sleep_row(l).is_some());
        match (selected, target) {
            (Some(a), Some(b)) if a == b => break,
            (Some(a), Some(b)) => tmux.keys(&[if a < b { "Down" } else { "Up" }]),
            _ => tmux.keys(&["Down"]),
        }
        assert!(
            Instant::now() < deadline,
            "cannot select the job:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_screen("the recap", Duration::from_secs(15), |s| {
        s.contains("saltsight job")
            && s.contains("3 expected: 2 succeeded, 0 failed, 1 missing")
            && s.lines().any(|l| {
                l.contains("db1") && (l.contains("not_connected") || l.contains("no_response"))
            })
    });
    assert!(screen.contains("test.sleep"), "{screen}");
    tmux.keys(&["Escape"]);
    tmux.wait_screen("the list again", Duration::from_secs(5), |s| {
        s.contains(" verdicts ")
    });

    // (4) q quits: the process ends, exit 0.
    tmux.keys(&["q"]);
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        let written = std::fs::read_to_string(&status_file).unwrap_or_default();
        if written.ends_with('\n') {
            break written.trim().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "top did not exit: pane {}\n{}",
            tmux.pane(),
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // Through sh, so that a signal's death reads as 128+n, not as nothing.
    assert_eq!(
        status,
        "0",
        "top's exit status; the screen:\n{}",
        tmux.screen()
    );
    drop(tmux);
    let _ = cli.kill();
    let _ = cli.wait();
    lab.start_minion("db1").expect("restart db1");
}

/// A terminal that hangs up (the tmux server killed, an ssh session dropped)
/// ends `top`: it must not stay behind reading end-of-file for ever.
#[test]
fn top_ends_when_its_terminal_hangs_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("nothing-here.ipc");
    let command = format!(
        "exec {} --endpoint unix:{} top --wait",
        bin(),
        socket.display()
    );
    let tmux = Tmux::start_named("hangup", &command);
    tmux.wait_screen("the screen", Duration::from_secs(20), |s| {
        s.contains("saltsight top")
    });
    let out = tmux.run(&["display-message", "-p", "-t", "top", "#{pane_pid}"]);
    let pid: u32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the pane's pid");
    tmux.run(&["kill-server"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Gone, or a zombie waiting for whoever adopted it.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let running = state
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|s| s != "Z");
        if !running {
            break;
        }
        if Instant::now() >= deadline {
            // Stop exactly the process this test started, then fail.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("top (pid {pid}) still runs 10 s after its terminal hung up");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
