//! Delivery to an HTTP upstream, through the binary and the disk spool: a
//! recording replayed into a scripted upstream that answers 500, then 429 with
//! Retry-After, then 200 and a 400; and a full spool that drops its oldest
//! batches, counted, while saltsight keeps running within its bound.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use saltsight::sink::segment;
use serde_json::Value;

use crate::support::replay::replay;
use crate::support::upstream::{Reply, Shape, Upstream};
use crate::support::{Saltsight, bin, fixture, wait_line};

fn ids(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_owned())
        .collect()
}

fn write_config(dir: &Path, upstream: &str, spool_max: u64, output_extra: &str) -> String {
    let token = dir.join("token");
    std::fs::write(&token, "t0ken-for-tests\n").expect("token");
    let config = dir.join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[correlate]\ndiscover = false\n[spool]\ndir = {:?}\nmax_bytes = {spool_max}\n\n[[output]]\ntype = \"http\"\nname = \"up\"\nurl = {upstream:?}\nbearer_token_file = {:?}\nheaders = {{ \"X-Scope\" = \"fleet-a\" }}\nretry_min = \"100ms\"\nretry_max = \"400ms\"\n{output_extra}",
            dir.join("spool").display().to_string(),
            token.display().to_string(),
        ),
    )
    .expect("config");
    config.display().to_string()
}

fn segment_ids(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).expect("segment");
    let segment = segment::decode(&bytes, saltsight::sink::encode::Encoding::Ndjson);
    String::from_utf8_lossy(&segment.body)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("json");
            v["id"].as_str().expect("id").to_owned()
        })
        .collect()
}

fn files_with(dir: &Path, extension: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

#[test]
fn retries_5xx_waits_out_retry_after_and_dead_letters_a_4xx() {
    const CAPTURE: &str = "captures/3008.3_tcp_ping_and_fail.bin";
    let expected = replay(CAPTURE, "");
    assert_eq!(expected.len(), 14, "the capture's records");
    let upstream = Upstream::start(
        vec![
            Reply::status(500).body("upstream broke"),
            Reply::status(429).header("Retry-After", "2"),
            Reply::status(200),
            Reply::status(400).body("Cannot parse input: expected ]"),
        ],
        Reply::status(200),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        dir.path(),
        &upstream.url(),
        64 << 20,
        "batch_max_records = 5\n",
    );
    let out = Command::new(bin())
        .args(["--endpoint", "tcp:127.0.0.1:1", "--config", &config])
        .args(["replay", "--output", "config"])
        .arg(fixture(CAPTURE))
        .output()
        .expect("replay runs");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");

    let requests = upstream.requests();
    let statuses: Vec<u16> = requests.iter().map(|r| r.answered).collect();
    assert_eq!(statuses, [500, 429, 200, 400, 200], "{log}");
    // The same first batch three times: retried, not re-batched.
    assert_eq!(requests[0].body, requests[1].body);
    assert_eq!(requests[1].body, requests[2].body);
    let backoff = requests[1].at - requests[0].at;
    assert!(backoff <= Duration::from_millis(900), "backoff {backoff:?}");
    let waited = requests[2].at - requests[1].at;
    assert!(
        waited >= Duration::from_millis(1950),
        "Retry-After: 2 was honoured for {waited:?}"
    );
    for request in &requests {
        assert_eq!(request.header("content-encoding"), Some("gzip"));
        assert_eq!(request.header("content-type"), Some("application/x-ndjson"));
        assert_eq!(
            request.header("authorization"),
            Some("Bearer t0ken-for-tests")
        );
        assert_eq!(request.header("x-scope"), Some("fleet-a"));
        assert_eq!(request.target, "/ingest");
    }

    // Delivered: batches 1 and 3, in order, each record exactly as emitted.
    let delivered: Vec<Value> = [&requests[2], &requests[4]]
        .iter()
        .flat_map(|r| r.records())
        .collect();
    assert_eq!(delivered[..5], expected[..5]);
    assert_eq!(delivered[5..], expected[10..]);

    // Dead-lettered: batch 2, with the status and the body that refused it.
    let dead_dir = dir.path().join("spool/up/dead-letter");
    let dead = files_with(&dead_dir, "seg");
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(segment_ids(&dead[0]), ids(&expected[5..10]));
    let why: Value =
        serde_json::from_slice(&std::fs::read(dead[0].with_extension("json")).expect("why"))
            .expect("json");
    assert_eq!(why["status"], 400);
    assert_eq!(why["response_body"], "Cannot parse input: expected ]");
    assert_eq!(why["records"], 5);
    assert!(log.contains("Upstream refused the batch"), "{log}");
    assert!(
        log.contains("Upstream did not take the batch; retrying."),
        "{log}"
    );
    assert!(!log.contains("t0ken"), "the token was logged: {log}");
    assert!(
        files_with(&dir.path().join("spool/up"), "seg").is_empty(),
        "the spool is empty once everything is delivered or dead-lettered"
    );
}

#[test]
fn a_full_spool_drops_its_oldest_batches_counted_and_keeps_running() {
    const CAPTURE: &str = "captures/3008.3_ipc_schedule.bin";
    let expected = replay(CAPTURE, "");
    // 10 scheduled runs, each its own job: return, completion (3 failing).
    assert_eq!(expected.len(), 30, "the capture's records");
    let upstream = Upstream::start(Vec::new(), Reply::status(503).body("maintenance"));
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        dir.path(),
        &upstream.url(),
        4096,
        "batch_max_records = 1\nbatch_max_bytes = 1024\n",
    );
    let capture = fixture(CAPTURE);
    let mut run = Saltsight::spawn(&[
        "--endpoint",
        "tcp:127.0.0.1:1",
        "--config",
        &config,
        "replay",
        "--output",
        "config",
        capture.to_str().expect("utf-8"),
    ]);
    let mut log = Vec::new();
    wait_line(&run.stderr, &mut log, Duration::from_secs(20), |l| {
        l.contains("Waiting for the spool to be delivered")
    })
    .expect("the replay ends and waits for upstream");
    std::thread::sleep(Duration::from_millis(300));
    assert!(run.try_exit().is_none(), "it keeps running");
    let spool = dir.path().join("spool/up");
    let segments = files_with(&spool, "seg");
    let on_disk: u64 = segments
        .iter()
        .map(|p| std::fs::metadata(p).expect("stat").len())
        .sum();
    assert!(on_disk <= 4096, "{on_disk} bytes spooled, bound 4096");
    let kept: Vec<String> = segments.iter().flat_map(|p| segment_ids(p)).collect();
    assert!(kept.len() >= 3, "kept {}", kept.len());
    // The newest are kept, the oldest dropped; the batch being retried when
    // the spool filled (the oldest) is never dropped under the sender's feet.
    let all = ids(&expected);
    if kept != all[all.len() - kept.len()..] {
        assert_eq!(
            kept[1..],
            all[all.len() - (kept.len() - 1)..],
            "the newest, after the one in flight"
        );
        let in_flight = all.iter().position(|id| *id == kept[0]);
        assert!(
            in_flight.is_some_and(|i| i < all.len() - kept.len()),
            "the batch in flight is an older one"
        );
    }
    assert!(
        log.iter()
            .any(|l| l.contains("Spool full: oldest batches dropped")),
        "{log:?}"
    );
    assert!(upstream.requests().iter().all(|r| r.answered == 503));

    let status = run
        .terminate(Duration::from_secs(5))
        .expect("exits on SIGTERM");
    assert!(status.success(), "{status:?}");
    let mut rest = Vec::new();
    while let Ok(line) = run.stderr.recv_timeout(Duration::from_secs(2)) {
        rest.push(line.text);
    }
    let stopped = rest
        .iter()
        .find(|l| l.contains("Output stopped."))
        .unwrap_or_else(|| panic!("no stop summary: {rest:?}"));
    let dropped = expected.len() - kept.len();
    assert!(
        stopped.contains(&format!("dropped_records={dropped}")),
        "{stopped}"
    );
    // What was kept survives for the next start.
    assert_eq!(
        files_with(&spool, "seg").len(),
        kept.len(),
        "nothing lost at exit"
    );
    let unique: BTreeSet<&String> = kept.iter().collect();
    assert_eq!(unique.len(), kept.len());
}

/// An HTTPS upstream whose certificate is signed by a CA only `ca_file` vouches
/// for: without it the handshake fails on the certificate; with it the handshake
/// succeeds (openssl's test server then never answers the POST: a timeout, which
/// is a retry, not a certificate error).
#[test]
fn ca_file_is_trusted_for_https() {
    use saltsight::sink::deliver::{Attempt, Upstream};
    use saltsight::sink::encode::Encoding;
    use saltsight::sink::http::{HttpSettings, HttpUpstream};

    let dir = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| dir.path().join(name).display().to_string();
    let ext = path("leaf.ext");
    std::fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("ext");
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let (ca, ca_key, cert, key, csr) = (
        path("ca.pem"),
        path("ca.key"),
        path("cert.pem"),
        path("key.pem"),
        path("leaf.csr"),
    );
    let steps: [Vec<&str>; 3] = [
        [
            &["req", "-x509"][..],
            &ec,
            &["-days", "1", "-subj", "/CN=saltsight test CA"],
        ]
        .concat()
        .into_iter()
        .chain(["-keyout", &ca_key, "-out", &ca])
        .collect(),
        [&["req"][..], &ec, &["-subj", "/CN=127.0.0.1"]]
            .concat()
            .into_iter()
            .chain(["-keyout", &key, "-out", &csr])
            .collect(),
        vec![
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &ext,
            "-out",
            &cert,
        ],
    ];
    for args in steps {
        let made = Command::new("openssl")
            .args(&args)
            .output()
            .expect("openssl runs");
        assert!(
            made.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&made.stderr)
        );
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let mut server = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("openssl s_server");
    let attempt = |ca: Option<Vec<u8>>| {
        let mut config = HttpSettings::with_defaults(
            format!("https://127.0.0.1:{port}/ingest"),
            Encoding::Ndjson,
        );
        config.ca_pem = ca;
        config.timeout = Duration::from_secs(2);
        let sender = HttpUpstream::new(&config).expect("upstream");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let result = runtime.block_on(sender.attempt(sender.prepare(b"{}\n")));
            let refused = matches!(&result, Attempt::Retry { error, .. } if error.contains("onnection refused"));
            if !refused || std::time::Instant::now() > deadline {
                return result;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let untrusted = attempt(None);
    let trusted = attempt(Some(std::fs::read(&ca).expect("ca")));
    let _ = server.kill();
    let _ = server.wait();
    match untrusted {
        Attempt::Retry { error, .. } => {
            assert!(error.to_lowercase().contains("certificate"), "{error}")
        }
        other => panic!("an unknown CA was accepted: {other:?}"),
    }
    match trusted {
        Attempt::Retry { error, .. } => assert!(
            !error.to_lowercase().contains("certificate"),
            "the ca_file was not trusted: {error}"
        ),
        other => panic!("openssl s_server answered a POST: {other:?}"),
    }
}

/// An upstream that closes without answering, answers with bytes that are no
/// HTTP, answers a byte a second, then never answers in time: each attempt is a
/// retry (counted), nothing is dropped or sent twice, and every record arrives
/// once it answers.
#[test]
fn a_hostile_upstream_costs_retries_never_records() {
    const CAPTURE: &str = "captures/3008.3_tcp_ping_and_fail.bin";
    let expected = replay(CAPTURE, "");
    let upstream = Upstream::start(
        vec![
            Reply::status(200).shape(Shape::Close),
            Reply::status(200).shape(Shape::Garbage),
            Reply::status(200).shape(Shape::Dribble),
            Reply::status(200).hold(Duration::from_secs(3)),
            Reply::status(200).body("garbage, but a 200"),
        ],
        Reply::status(200),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &upstream.url(), 64 << 20, "timeout = \"1s\"\n");
    let out = Command::new(bin())
        .args(["--endpoint", "tcp:127.0.0.1:1", "--config", &config])
        .args(["replay", "--output", "config"])
        .arg(fixture(CAPTURE))
        .output()
        .expect("replay runs");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let requests = upstream.requests();
    let delivered: Vec<Value> = requests
        .iter()
        .rfind(|r| r.answered == 200)
        .map(|r| r.records())
        .unwrap_or_default();
    // The same batch every time, until one attempt went through.
    assert!(requests.len() >= 5, "{} requests", requests.len());
    assert!(
        requests.windows(2).all(|w| w[0].body == w[1].body),
        "re-batched"
    );
    assert_eq!(ids(&delivered), ids(&expected), "{log}");
    assert!(log.contains("after 4 failed attempt(s)"), "{log}");
    assert!(
        log.contains("sent_records=14")
            && log.contains("dropped_records=0")
            && log.contains("retries=4"),
        "{log}"
    );
}
