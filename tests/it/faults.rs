//! The fault suite: `saltsight run` against a fake publisher (unix and TCP, bare
//! and length-prefixed) playing hostile scripts, with the wall clock stepped
//! under it and inputs made to cost memory. Each test asserts no false verdict
//! (a lost or unreadable return is never `no_response`), no silent loss (every
//! loss a gap, counted), bounded memory (peak RSS from /proc), and the counters.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::publisher::{Framing, Publisher, frame};
use crate::support::upstream::get;
use crate::support::{Received, Saltsight, metrics_address_once_connected, read_records};

/// `saltsight run --output stdout` against `publisher`, deadlines of `deadline`,
/// `extra` TOML appended; with its metrics address.
fn run_against(
    publisher: &Publisher,
    dir: &Path,
    deadline: &str,
    extra: &str,
    env: &[(&str, &str)],
) -> (Saltsight, std::net::SocketAddr) {
    run_against_bus(publisher, dir, deadline, "", extra, env)
}

/// [`run_against`], with more `[bus]` keys (`bus`: lines of that section).
fn run_against_bus(
    publisher: &Publisher,
    dir: &Path,
    deadline: &str,
    bus: &str,
    extra: &str,
    env: &[(&str, &str)],
) -> (Saltsight, std::net::SocketAddr) {
    let config = dir.join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"fake\"\n[bus]\nendpoint = {:?}\nstall_timeout = \"1s\"\nreconnect_min = \"100ms\"\nreconnect_max = \"750ms\"\n{bus}[jobs]\ndefault_deadline = {deadline:?}\n[correlate]\ndiscover = false\n{extra}\n",
            publisher.endpoint()
        ),
    )
    .expect("write config");
    let run = Saltsight::spawn_with_env(
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "--log-format",
            "json",
            "run",
            "--output",
            "stdout",
        ],
        env,
    );
    let mut log = Vec::new();
    let addr = metrics_address_once_connected(&run, &mut log);
    (run, addr)
}

/// A sample's value in `/metrics` (0 when absent).
fn metric(addr: std::net::SocketAddr, series: &str) -> f64 {
    let (status, body) = get(addr, "/metrics").expect("GET /metrics");
    assert_eq!(status, 200);
    body.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

fn new_job(jid: &str, minions: &[&str]) -> (String, Value) {
    (
        format!("salt/job/{jid}/new"),
        json!({"jid": jid, "fun": "test.ping", "arg": [], "tgt": "*", "tgt_type": "glob",
               "minions": minions, "missing": [], "user": "root"}),
    )
}

fn ret(jid: &str, minion: &str) -> (String, Value) {
    (
        format!("salt/job/{jid}/ret/{minion}"),
        json!({"jid": jid, "id": minion, "fun": "test.ping", "fun_args": [],
               "return": true, "retcode": 0, "success": true, "cmd": "_return"}),
    )
}

/// (minion, reason) of each `minion_missing` of `jid`.
fn verdicts(seen: &[Received], jid: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = seen
        .iter()
        .map(|r| &r.record)
        .filter(|r| r["kind"] == "minion_missing" && r["jid"] == jid)
        .map(|r| {
            (
                r["minion"].as_str().unwrap_or_default().to_owned(),
                r["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Whether the last record read completes `jid` (records come in order, and
/// a job's `job_completed` follows its verdicts; checking the last one keeps
/// the wait linear in the records read).
fn completed(seen: &[Received], jid: &str) -> bool {
    seen.last()
        .is_some_and(|r| r.record["kind"] == "job_completed" && r.record["jid"] == jid)
}

fn of_kind<'a>(seen: &'a [Received], kind: &str) -> Vec<&'a Value> {
    seen.iter()
        .map(|r| &r.record)
        .filter(|r| r["kind"] == kind)
        .collect()
}

/// Peak resident memory of a process, in MB (VmHWM).
fn peak_rss_mb(run: &Saltsight) -> f64 {
    let pid = run.pid().expect("running").as_raw();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .expect("VmHWM")
}

/// A return over the frame cap (length-prefixed, so it can be skipped), and one
/// that cannot be decoded: their minions answered, so they are `unknown_gap`,
/// never `no_response`; the minion that never answered is `no_response`.
#[test]
fn a_return_too_large_or_undecodable_is_unknown_gap_never_no_response() {
    for publisher in [
        Publisher::unix(Framing::Prefixed),
        Publisher::tcp(Framing::Prefixed),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut run, addr) = run_against(
            &publisher,
            dir.path(),
            "2s",
            "",
            &[("SALTSIGHT_MAX_FRAME_BYTES", "65536")],
        );
        let mut sub = publisher.accept();
        let jid = "20261124100000000001";
        let (tag, data) = new_job(jid, &["web1", "web2", "db1", "db2"]);
        sub.send(&tag, data).expect("send");
        let (tag, data) = ret(jid, "web1");
        sub.send(&tag, data).expect("send");
        let (tag, mut data) = ret(jid, "web2");
        data["return"] = json!("x".repeat(200_000));
        sub.send(&tag, data).expect("send");
        // db1's data is not a map: undecodable, its tag still readable.
        let mut body = format!("salt/job/{jid}/ret/db1\n\n").into_bytes();
        body.extend_from_slice(&[0x93, 1, 2, 3]);
        let mut undecodable = b"\x82\xa4head\x80\xa4body\xc4".to_vec();
        undecodable.push(body.len() as u8);
        undecodable.extend_from_slice(&body);
        sub.send_frame(&undecodable).expect("send");
        let mut seen = Vec::new();
        read_records(&run.stdout, &mut seen, Duration::from_secs(15), |s| {
            completed(s, jid)
        })
        .expect("the job completes");
        assert_eq!(
            verdicts(&seen, jid),
            [
                ("db1".into(), "unknown_gap".into()),
                ("db2".into(), "no_response".into()),
                ("web2".into(), "unknown_gap".into()),
            ],
            "{}",
            publisher.endpoint()
        );
        assert!(
            of_kind(&seen, "bus_gap").is_empty(),
            "a named loss is no gap"
        );
        assert_eq!(metric(addr, "saltsight_unreadable_returns_total"), 2.0);
        assert_eq!(
            metric(addr, "saltsight_events_dropped_total{reason=\"too_large\"}"),
            1.0
        );
        assert!(
            run.terminate(Duration::from_secs(5))
                .is_some_and(|s| s.success())
        );
    }
}

/// A prefix at or above the cap over garbage is a desync (a reconnect and a
/// gap), never gigabytes skipped while the bus looks connected.
#[test]
fn a_garbage_prefix_over_the_cap_is_a_desync_and_a_gap() {
    let publisher = Publisher::unix(Framing::Prefixed);
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut run, addr) = run_against(&publisher, dir.path(), "30s", "", &[]);
    let mut sub = publisher.accept();
    let jid = "20261124100000000002";
    let (tag, data) = new_job(jid, &["web1"]);
    sub.send(&tag, data).expect("send");
    sub.send_raw(&[0xff, 0xff, 0xff, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8])
        .expect("send");
    // The reader gives the stream up and comes back; the new connection works.
    let mut again = publisher.accept();
    let (tag, data) = ret(jid, "web1");
    again.send(&tag, data).expect("send");
    let mut seen = Vec::new();
    read_records(&run.stdout, &mut seen, Duration::from_secs(10), |s| {
        completed(s, jid)
    })
    .expect("the job completes on the new connection");
    let gaps = of_kind(&seen, "bus_gap");
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert_eq!(gaps[0]["reason"], "desync");
    assert_eq!(metric(addr, "saltsight_bus_desyncs_total"), 1.0);
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success())
    );
}

/// A frame whose declared value never comes (the bus then idle): within
/// `bus.stall_timeout` it is a desync, a gap, and the job's verdicts say so.
#[test]
fn a_frame_declared_and_never_sent_is_a_stall_not_silence() {
    for framing in [Framing::Bare, Framing::Prefixed] {
        let publisher = Publisher::unix(framing);
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut run, addr) = run_against(&publisher, dir.path(), "4s", "", &[]);
        let mut sub = publisher.accept();
        let jid = "20261124100000000003";
        let (tag, data) = new_job(jid, &["web1", "web2"]);
        sub.send(&tag, data).expect("send");
        let (tag, data) = ret(jid, "web1");
        let whole = frame(&tag, data);
        let mut half = Vec::new();
        if framing == Framing::Prefixed {
            half.extend_from_slice(&(whole.len() as u32).to_be_bytes());
        }
        half.extend_from_slice(&whole[..whole.len() / 2]);
        sub.send_raw(&half).expect("send");
        let _again = publisher.accept();
        let mut seen = Vec::new();
        read_records(&run.stdout, &mut seen, Duration::from_secs(15), |s| {
            completed(s, jid)
        })
        .expect("the job completes");
        assert_eq!(
            verdicts(&seen, jid),
            [
                ("web1".into(), "unknown_gap".into()),
                ("web2".into(), "unknown_gap".into())
            ],
            "{framing:?}"
        );
        assert_eq!(
            metric(addr, "saltsight_bus_stalls_total"),
            1.0,
            "{framing:?}"
        );
        assert!(
            run.terminate(Duration::from_secs(5))
                .is_some_and(|s| s.success())
        );
    }
}

/// A publisher that sends garbage on every connection: the reader backs off as
/// after a failed connect (not a thousand reconnects a second), and the whole
/// storm is one gap once the bus works again.
#[test]
fn garbage_on_every_connection_is_backed_off_and_one_gap() {
    let publisher = Publisher::unix_answering(
        Framing::Bare,
        Box::new(|sub| {
            let _ = sub.send_raw(&[0xc1, 0xc1, 0xc1, 0xc1]);
        }),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "[bus]\nendpoint = {:?}\nreconnect_min = \"100ms\"\nreconnect_max = \"750ms\"\n[correlate]\ndiscover = false\n",
            publisher.endpoint()
        ),
    )
    .expect("config");
    let mut run = Saltsight::spawn(&[
        "--config",
        config.to_str().expect("utf-8"),
        "--log-format",
        "json",
        "run",
        "--output",
        "stdout",
    ]);
    assert!(publisher.wait_connections(2, Duration::from_secs(10)));
    let first = Instant::now();
    let at_first = publisher.connections();
    // Measured over 3 s: with backoff from 100 ms to 750 ms (and up to 100%
    // jitter), at most a dozen; without it, thousands.
    while first.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let storm = publisher.connections() - at_first;
    assert!((2..=15).contains(&storm), "{storm} connections in 3 s");
    let warned = {
        let mut lines = Vec::new();
        while let Ok(line) = run.stderr.try_recv() {
            lines.push(line.text);
        }
        lines.iter().filter(|l| l.contains("out of sync")).count()
    };
    assert!(warned <= 3, "{warned} desync warnings: rate-limited");
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success())
    );
    // Nothing worked, so no gap was ever closed: none reported before the stop,
    // then one for the whole stretch (reason shutdown).
    let mut seen = Vec::new();
    let _ = read_records(&run.stdout, &mut seen, Duration::from_secs(2), |s| {
        !of_kind(s, "bus_gap").is_empty()
    });
    let gaps = of_kind(&seen, "bus_gap");
    assert!(gaps.len() <= 1, "one gap for the storm: {gaps:?}");
}

/// The master drops a subscriber that fell behind (here: the last events it
/// got were already 20 s old): the gap begins at the last event read, not at
/// the moment the connection closed.
#[test]
fn a_dropped_subscribers_gap_spans_what_it_lost() {
    let publisher = Publisher::unix(Framing::Bare);
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut run, _) = run_against(&publisher, dir.path(), "30s", "", &[]);
    let mut sub = publisher.accept();
    let old = saltsight::time::Stamp::from_system_time(
        std::time::SystemTime::now() - Duration::from_secs(20),
    );
    let (tag, mut data) = new_job("20261124100000000004", &["web1"]);
    data["_stamp"] = json!(old.to_string());
    sub.send(&tag, data).expect("send");
    drop(sub);
    let mut again = publisher.accept();
    let (tag, data) = ret("20261124100000000005", "web9");
    again.send(&tag, data).expect("send");
    let mut seen = Vec::new();
    read_records(&run.stdout, &mut seen, Duration::from_secs(10), |s| {
        !of_kind(s, "bus_gap").is_empty()
    })
    .expect("a gap");
    let gap = of_kind(&seen, "bus_gap")[0].clone();
    assert_eq!(gap["started_at"], json!(old.to_string()), "{gap}");
    assert_eq!(gap["reason"], "disconnected", "nothing was waiting: {gap}");
    assert!(
        gap["duration_ms"].as_u64().is_some_and(|ms| ms >= 19_000),
        "{gap}"
    );
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success())
    );
}

/// The master drops saltsight while it is behind (a backlog of a few MB in
/// its socket when the connection goes): the gap says `discarded`, its own
/// reason, not a master that went away (issue 75).
#[test]
fn a_connection_closed_on_a_backlog_is_a_discard() {
    let publisher = Publisher::unix(Framing::Bare);
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut run, _) = run_against(&publisher, dir.path(), "30s", "", &[]);
    let mut sub = publisher.accept();
    // A burst: more than the socket holds (100 returns of 16 KB), written as
    // fast as it is read, then the connection closed under it.
    let (tag, mut data) = ret("20261124100000000006", "web1");
    data["return"] = json!("x".repeat(16_000));
    let one = crate::support::publisher::frame(&tag, data);
    let burst: Vec<u8> = one.iter().copied().cycle().take(one.len() * 100).collect();
    sub.send_raw(&burst).expect("send");
    drop(sub);
    let mut again = publisher.accept();
    let (tag, data) = ret("20261124100000000007", "web9");
    again.send(&tag, data).expect("send");
    let mut seen = Vec::new();
    read_records(&run.stdout, &mut seen, Duration::from_secs(20), |s| {
        !of_kind(s, "bus_gap").is_empty()
    })
    .expect("a gap");
    let gap = of_kind(&seen, "bus_gap")[0].clone();
    assert_eq!(gap["reason"], "discarded", "{gap}");
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success())
    );
}

/// A burst the pipeline cannot take at once (a queue of 64 frames, a job of
/// 20,000 minions and all their returns in one write): the reader reads on,
/// the frames past the queue wait on disk in order, and every return reaches
/// the job: nothing dropped, no gap.
#[test]
fn a_burst_past_the_queue_waits_on_disk_and_nothing_is_lost() {
    let publisher = Publisher::unix(Framing::Bare);
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut run, addr) = run_against_bus(
        &publisher,
        dir.path(),
        "60s",
        "queue_frames = 64\n",
        "",
        &[],
    );
    let mut sub = publisher.accept();
    let names: Vec<String> = (0..20_000).map(|i| format!("m{i:05}")).collect();
    let minions: Vec<&str> = names.iter().map(String::as_str).collect();
    let jid = "20261124100000000009";
    let (tag, data) = new_job(jid, &minions);
    let mut burst = crate::support::publisher::frame(&tag, data);
    for minion in &minions {
        let (tag, data) = ret(jid, minion);
        burst.extend(crate::support::publisher::frame(&tag, data));
    }
    sub.send_raw(&burst).expect("send");
    let mut seen = Vec::new();
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        completed(s, jid)
    })
    .expect("the job completes");
    let done = of_kind(&seen, "job_completed")[0].clone();
    assert_eq!(done["returned"], 20_000, "{done}");
    assert!(of_kind(&seen, "bus_gap").is_empty());
    assert!(
        metric(addr, "saltsight_bus_spilled_frames_total") > 0.0,
        "the burst went through the spill"
    );
    assert_eq!(
        metric(
            addr,
            r#"saltsight_events_dropped_total{reason="queue_full"}"#
        ),
        0.0
    );
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success())
    );
}

/// The wall clock stepped back an hour under saltsight (libfaketime, the
/// monotonic clock left alone) on an idle bus: the verdicts still come at the
/// deadline, not an hour late.
#[test]
fn a_wall_clock_step_moves_no_verdict() {
    let lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
    assert!(
        Path::new(lib).exists(),
        "{lib}: install Debian's faketime (scripts/setup-debs does)"
    );
    let publisher = Publisher::unix(Framing::Bare);
    let dir = tempfile::tempdir().expect("tempdir");
    let step = dir.path().join("faketime");
    std::fs::write(&step, "+0\n").expect("faketime file");
    let step_text = step.display().to_string();
    let (mut run, _) = run_against(
        &publisher,
        dir.path(),
        "3s",
        "",
        &[
            ("LD_PRELOAD", lib),
            ("FAKETIME_TIMESTAMP_FILE", &step_text),
            ("FAKETIME_NO_CACHE", "1"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ],
    );
    let mut sub = publisher.accept();
    let jid = "20261124100000000006";
    let (tag, data) = new_job(jid, &["web1"]);
    let published = Instant::now();
    sub.send(&tag, data).expect("send");
    let mut seen = Vec::new();
    read_records(&run.stdout, &mut seen, Duration::from_secs(5), |s| {
        !of_kind(s, "job_published").is_empty()
    })
    .expect("published");
    std::fs::write(&step, "-1h\n").expect("step the clock back");
    read_records(&run.stdout, &mut seen, Duration::from_secs(10), |s| {
        completed(s, jid)
    })
    .expect("the verdict comes at its deadline despite the step");
    assert!(
        published.elapsed() < Duration::from_secs(5),
        "{:?}",
        published.elapsed()
    );
    assert_eq!(
        verdicts(&seen, jid),
        [("web1".into(), "no_response".into())]
    );
    assert!(
        run.terminate(Duration::from_secs(5))
            .is_some_and(|s| s.success())
    );
}

/// A job naming 200,000 minions that none answer, then a return of 100,000
/// failed states (22 MB): every verdict given, memory bounded all the same.
#[test]
fn memory_stays_bounded_by_config_not_by_the_input() {
    let publisher = Publisher::unix(Framing::Bare);
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut run, _) = run_against(&publisher, dir.path(), "2s", "", &[]);
    let mut sub = publisher.accept();
    let names: Vec<String> = (0..200_000)
        .map(|i| format!("edge-{i:06}.example.net"))
        .collect();
    let minions: Vec<&str> = names.iter().map(String::as_str).collect();
    let jid = "20261124100000000007";
    let (tag, data) = new_job(jid, &minions);
    sub.send(&tag, data).expect("send");
    let mut seen = Vec::new();
    read_records(&run.stdout, &mut seen, Duration::from_secs(120), |s| {
        completed(s, jid)
    })
    .expect("the job completes");
    assert_eq!(of_kind(&seen, "minion_missing").len(), 200_000);
    let after_job = peak_rss_mb(&run);
    seen.clear();
    let mut states = serde_json::Map::new();
    for i in 0..100_000 {
        states.insert(
            format!("cmd_|-step{i}_|-false_|-run"),
            json!({"result": false, "comment": format!("Command \"false\" run, step {i}"),
                   "__sls__": "big", "__id__": format!("step{i}"), "__run_num__": i,
                   "changes": {"retcode": 1, "stdout": "", "stderr": "x".repeat(100)}, "name": "false"}),
        );
    }
    let big = "20261124100000000008";
    let (tag, mut data) = ret(big, "web1");
    data["fun"] = json!("state.apply");
    data["return"] = Value::Object(states);
    data["retcode"] = json!(2);
    sub.send(&tag, data).expect("send");
    read_records(&run.stdout, &mut seen, Duration::from_secs(120), |s| {
        s.last()
            .is_some_and(|r| r.record["kind"] == "failure_group")
    })
    .expect("the return is triaged");
    let after_return = peak_rss_mb(&run);
    assert!(
        after_job < 200.0,
        "peak RSS {after_job:.0} MB after 200,000 verdicts"
    );
    assert!(
        after_return < 300.0,
        "peak RSS {after_return:.0} MB after a 100,000-failure return"
    );
    assert!(
        run.terminate(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

/// `[reactor]` off (the default): however many verdicts there are, the
/// master's pull socket is never opened. The same run with it on is the
/// control: its verdict arrives there, framed as `fire_event` frames it.
/// Judged after the process has exited, so nothing is still on its way.
#[test]
fn the_pull_socket_is_opened_only_when_the_reactor_is_enabled() {
    use std::io::Read;
    use std::os::unix::net::UnixListener;
    for enabled in [false, true] {
        let publisher = Publisher::unix(Framing::Bare);
        let pub_path = publisher
            .endpoint()
            .strip_prefix("unix:")
            .expect("a unix endpoint");
        let pull_path = Path::new(pub_path).with_file_name("master_event_pull.ipc");
        let pull = UnixListener::bind(&pull_path).expect("bind the pull socket");
        pull.set_nonblocking(true).expect("nonblocking");
        let dir = tempfile::tempdir().expect("tempdir");
        let reactor = if enabled {
            "[reactor]\nenabled = true\n"
        } else {
            ""
        };
        let (mut run, _) = run_against(&publisher, dir.path(), "1s", reactor, &[]);
        let mut sub = publisher.accept();
        let jid = "20261126100000000001";
        let (tag, data) = new_job(jid, &["web1", "web2"]);
        sub.send(&tag, data).expect("send");
        let (tag, data) = ret(jid, "web1");
        sub.send(&tag, data).expect("send");
        let mut seen = Vec::new();
        read_records(&run.stdout, &mut seen, Duration::from_secs(15), |s| {
            completed(s, jid)
        })
        .expect("the job completes with web2 missing");
        assert!(
            run.terminate(Duration::from_secs(5))
                .is_some_and(|s| s.success()),
            "run exits 0 on SIGTERM"
        );
        match pull.accept() {
            Err(e) if !enabled && e.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok((mut stream, _)) if enabled => {
                let mut bytes = Vec::new();
                stream.read_to_end(&mut bytes).expect("read what was fired");
                let len = u32::from_be_bytes(bytes[..4].try_into().expect("a length")) as usize;
                assert_eq!(len, bytes.len() - 4, "one event, behind its length");
                let event = saltsight::event::decode(&bytes[4..]).expect("Salt's frame");
                assert_eq!(event.tag, format!("saltsight/job/{jid}/missing"));
            }
            other => panic!("reactor enabled: {enabled}; the pull socket saw {other:?}"),
        }
    }
}
