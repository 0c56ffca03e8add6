//! Triage and correlation against a real Salt master whose state tree is a git
//! checkout: commit A passes, commit B breaks one state; `state.apply` on every
//! minion after B gives one `failure_group` of 3 naming the SLS, the state, its
//! category, `introduced_by` = B and the suspect range A..B, with the job's
//! `--metadata`. An unrelated later commit to the same file does not take B's
//! place, nor does one to a state never seen passing take its first commit's. A
//! render error names its SLS and commit, and a minion's scheduled run is
//! `scheduled`.
//!
//! And the failures people hit, reproduced on loopback (a package that does
//! not exist, a repository that refuses, a server whose certificate is not
//! trusted, a name that does not resolve, a state module that is not there, a
//! conflicting ID, a pillar that does not render, a run refused because one is
//! running): each one `failure_group` of three minions with its category and
//! evidence, as `saltsight run` writes them.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use saltsight::lab::{Lab, LabOptions};
use serde_json::{Value, json};

use crate::support::{Received, Saltsight, git, jid_from, lab_lock, read_records};

/// Writes `file` under the state tree, commits it, returns the commit id.
fn commit(states: &Path, file: &str, text: &str, subject: &str) -> String {
    std::fs::write(states.join(file), text).expect("write sls");
    git(states, &["add", "-A"]);
    git(states, &["commit", "-q", "-m", subject]);
    git(states, &["rev-parse", "HEAD"])
}

const WEB_OK: &str = "web_conf:\n  file.managed:\n    - name: {{ opts['cachedir'] }}/web.conf\n    - contents: ok\n\
web_reload:\n  cmd.run:\n    - name: 'true'\n    - require:\n      - file: web_conf\n";
const WEB_BROKEN: &str = "web_conf:\n  file.managed:\n    - name: {{ opts['cachedir'] }}/web.conf\n    - source: salt://files/web.conf\n\
web_reload:\n  cmd.run:\n    - name: 'true'\n    - require:\n      - file: web_conf\n";

fn find<'a>(seen: &'a [Received], kind: &str, jid: &str) -> Vec<&'a Value> {
    seen.iter()
        .map(|r| &r.record)
        .filter(|r| r["kind"] == kind && r["jid"] == jid)
        .collect()
}

/// `state.apply <sls>` on every minion; its jid once its failure group is in.
fn apply_until_group(lab: &Lab, run: &Saltsight, seen: &mut Vec<Received>, sls: &str) -> String {
    let out = lab
        .salt(&["--show-jid", "*", "state.apply", sls])
        .expect("state.apply");
    let jid = jid_from(&out);
    read_records(&run.stdout, seen, Duration::from_secs(60), |s| {
        !find(s, "failure_group", &jid).is_empty()
    })
    .unwrap_or_else(|e| panic!("a failure group for {sls} ({jid}): {e:?}"));
    jid
}

#[test]
fn a_breaking_commit_is_named_across_minions_with_its_suspect_range() {
    let _lock = lab_lock();
    let lab = Lab::start(LabOptions::default()).expect("lab starts");
    let states = lab.root().join("states");
    git(&states, &["init", "-q", "-b", "main"]);
    let a = commit(&states, "web.sls", WEB_OK, "web: first config");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"state.*\" = \"60s\" }}\n",
            lab.master_config().display().to_string()
        ),
    )
    .expect("write config");
    let run = Saltsight::spawn_connected(&["--config", config.to_str().expect("utf-8"), "run"]);
    let mut seen = Vec::new();

    // Commit A passes on every minion.
    let ok = lab
        .salt(&["--show-jid", "*", "state.apply", "web"])
        .expect("apply A");
    let ok_jid = jid_from(&ok);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        !find(s, "job_completed", &ok_jid).is_empty()
    })
    .expect("the passing run completes");
    let published = find(&seen, "job_published", &ok_jid);
    assert_eq!(
        published[0]["commits"]["states"],
        a.as_str(),
        "HEAD at publish"
    );
    assert_eq!(find(&seen, "job_completed", &ok_jid)[0]["succeeded"], 3);

    // Commit B breaks web_conf (its source does not exist).
    let b = commit(&states, "web.sls", WEB_BROKEN, "web: move config to a file");
    let failed = lab
        .salt(&[
            "--show-jid",
            "*",
            "state.apply",
            "web",
            "--metadata",
            r#"{"release": "r42"}"#,
        ])
        .expect("apply B");
    let jid = jid_from(&failed);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        !find(s, "failure_group", &jid).is_empty()
    })
    .expect("a failure group for the broken run");
    let change = seen
        .iter()
        .map(|r| &r.record)
        .find(|r| r["kind"] == "config_change")
        .expect("config_change");
    assert_eq!(
        (change["old"].as_str(), change["new"].as_str()),
        (Some(a.as_str()), Some(b.as_str()))
    );
    let groups = find(&seen, "failure_group", &jid);
    assert_eq!(groups.len(), 1, "{groups:?}");
    let g = groups[0];
    assert_eq!(
        (
            &g["sls"],
            &g["state_id"],
            &g["function"],
            &g["category"],
            &g["count"]
        ),
        (
            &Value::from("web"),
            &Value::from("web_conf"),
            &Value::from("file.managed"),
            &Value::from("source_missing"),
            &Value::from(3)
        ),
        "{g}"
    );
    assert_eq!(g["url"], "salt://files/web.conf");
    assert_eq!(g["minions"], serde_json::json!(["db1", "web1", "web2"]));
    assert_eq!(g["introduced_by"]["id"], b.as_str(), "{g}");
    assert_eq!(g["introduced_by"]["path"], "web.sls");
    assert_eq!(g["introduced_by"]["author"], "alice");
    assert_eq!(g["introduced_by"]["subject"], "web: move config to a file");
    assert_eq!(g["suspect_commits"]["last_ok"], a.as_str(), "{g}");
    assert_eq!(g["suspect_commits"]["first_failed"], b.as_str());
    assert_eq!(g["suspect_commits"]["commits"][0]["id"], b.as_str());
    assert_eq!(
        g["suspect_commits"]["commits"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(g["metadata"], serde_json::json!({"release": "r42"}));
    assert_eq!(g["run_kind"], "adhoc");
    let failures = find(&seen, "state_failure", &jid);
    assert_eq!(failures.len(), 3, "one root cause per minion: {failures:?}");
    for f in &failures {
        assert_eq!(
            (&f["state_id"], &f["fallout"], &f["first_failing"]),
            (
                &Value::from("web_conf"),
                &Value::from(1),
                &Value::from(true)
            ),
            "{f}"
        );
        assert_eq!(f["metadata"], serde_json::json!({"release": "r42"}));
    }
    assert_eq!(g["introduced_by"]["basis"], "since_last_pass", "{g}");

    // An unrelated commit to web.sls after B: the failure is still B's.
    let d = commit(
        &states,
        "web.sls",
        &format!("{WEB_BROKEN}# owner: web team\n"),
        "web: note the owner",
    );
    let again = apply_until_group(&lab, &run, &mut seen, "web");
    let g = find(&seen, "failure_group", &again)[0];
    assert_eq!(g["commits"]["states"], d.as_str(), "ran under D: {g}");
    assert_eq!(g["introduced_by"]["id"], b.as_str(), "{g}");
    assert_eq!(g["suspect_commits"]["first_failed"], b.as_str(), "{g}");

    // A state failing from its first commit (never seen passing) keeps that
    // commit through an unrelated later one to its file.
    const NEVER: &str = "never_conf:\n  file.managed:\n    - name: {{ opts['cachedir'] }}/never.conf\n    - source: salt://files/never.conf\n";
    let n1 = commit(&states, "never.sls", NEVER, "never: add");
    let first = apply_until_group(&lab, &run, &mut seen, "never");
    let g = find(&seen, "failure_group", &first)[0];
    assert_eq!(
        (&g["introduced_by"]["id"], &g["introduced_by"]["basis"]),
        (&Value::from(n1.as_str()), &Value::from("first_seen_head")),
        "{g}"
    );
    commit(
        &states,
        "never.sls",
        &format!("{NEVER}# owner: ops\n"),
        "never: note the owner",
    );
    let second = apply_until_group(&lab, &run, &mut seen, "never");
    let g = find(&seen, "failure_group", &second)[0];
    assert_eq!(g["introduced_by"]["id"], n1.as_str(), "{g}");

    // A render error names its SLS, its line and the commit that brought it.
    let c = commit(
        &states,
        "broken.sls",
        "broken:\n  test.nop:\n    - name: [unclosed\n",
        "add broken",
    );
    let render = lab
        .salt(&["--show-jid", "*", "state.apply", "broken"])
        .expect("apply broken");
    let render_jid = jid_from(&render);
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        find(s, "render_failure", &render_jid).len() == 3
    })
    .expect("render failures");
    let r = find(&seen, "render_failure", &render_jid)[0];
    assert_eq!(
        (&r["sls"], &r["category"]),
        (&Value::from("broken"), &Value::from("render")),
        "{r}"
    );
    assert!(r["line"].as_u64().is_some(), "{r}");
    assert_eq!(r["introduced_by"]["id"], c.as_str());

    // A minion's scheduler runs the broken state: `scheduled`.
    lab.salt(&[
        "web1",
        "schedule.add",
        "saltsight_sched",
        "function=state.apply",
        "job_args=[web]",
        "seconds=3600",
    ])
    .expect("schedule.add");
    read_records(&run.stdout, &mut seen, Duration::from_secs(60), |s| {
        s.iter()
            .any(|r| r.record["kind"] == "state_failure" && r.record["run_kind"] == "scheduled")
    })
    .expect("a scheduled failure");
    lab.salt(&["web1", "schedule.delete", "saltsight_sched"])
        .expect("schedule.delete");
    let scheduled = seen
        .iter()
        .map(|r| &r.record)
        .find(|r| r["kind"] == "state_failure" && r["run_kind"] == "scheduled")
        .expect("scheduled");
    assert_eq!(
        (&scheduled["minion"], &scheduled["state_id"]),
        (&Value::from("web1"), &Value::from("web_conf"))
    );
}

/// The README's first command: `saltsight demo` prints the records of its jobs,
/// the failing `state.apply fail` as one group of 3 with the commit it ran under,
/// and ends with `saltsight job` for that job (on stderr here: stdout, a pipe,
/// carries JSON lines).
#[test]
fn the_demo_names_its_failing_state_once_for_all_minions() {
    let _lock = lab_lock();
    let out = Command::new(crate::support::bin())
        .arg("demo")
        .env_remove("SALTSIGHT_CONFIG")
        .output()
        .expect("run the demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json record"))
        .collect();
    let groups: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "failure_group")
        .collect();
    assert_eq!(groups.len(), 1, "{records:?}");
    let g = groups[0];
    assert_eq!(
        (&g["sls"], &g["state_id"], &g["category"], &g["count"]),
        (
            &Value::from("fail"),
            &Value::from("lab_failing_cmd"),
            &Value::from("command"),
            &Value::from(3)
        )
    );
    assert_eq!(g["introduced_by"]["subject"], "The demo's state tree");
    let completed = records
        .iter()
        .filter(|r| r["kind"] == "job_completed")
        .count();
    assert_eq!(completed, 4, "the demo's four jobs complete");

    let stderr = String::from_utf8_lossy(&out.stderr);
    let recap = stderr
        .split(&format!(
            ">>> saltsight job {}",
            g["jid"].as_str().expect("jid")
        ))
        .nth(1)
        .unwrap_or_else(|| panic!("no recap of the failing job: {stderr}"));
    for line in [
        "3 expected: 0 succeeded, 3 failed, 0 missing",
        "failed     db1, web1, web2",
        "3 minions  fail:lab_failing_cmd  cmd.run  command",
        "introduced by",
    ] {
        assert!(recap.contains(line), "{line:?} not in the recap: {recap}");
    }
}

/// A free loopback port: bound, then released (nothing listens on it after).
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `openssl s_server` on loopback with a self-signed certificate for another
/// name: a TLS server the minions cannot trust. Stopped by its pid on drop.
struct UntrustedTls {
    child: Child,
    port: u16,
}

impl UntrustedTls {
    fn start(dir: &Path) -> Self {
        let (key, cert) = (dir.join("key.pem"), dir.join("cert.pem"));
        let made = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(["-subj", "/CN=artifacts.saltsight-lab.example"])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(Stdio::null())
            .status()
            .expect("openssl req runs");
        assert!(made.success(), "a self-signed certificate");
        let port = free_port();
        let child = Command::new("openssl")
            .args(["s_server", "-quiet", "-www", "-accept"])
            .arg(port.to_string())
            .arg("-cert")
            .arg(&cert)
            .arg("-key")
            .arg(&key)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl s_server starts");
        let server = UntrustedTls { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(Instant::now() < deadline, "s_server listens on {port}");
            std::thread::yield_now();
        }
        server
    }
}

impl Drop for UntrustedTls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One state per failure, each on every minion (paths in the minion's cache).
fn lab_failures(refused: u16, tls: u16) -> String {
    format!(
        "lab_no_such_package:\n  pkg.installed:\n    - name: saltsight-lab-no-such-package\n    - refresh: False\n\
lab_repository_refuses:\n  file.managed:\n    - name: {{{{ opts['cachedir'] }}}}/app.deb\n    - source: http://127.0.0.1:{refused}/debian/pool/main/a/app/app_1.0_amd64.deb\n    - skip_verify: True\n\
lab_untrusted_certificate:\n  file.managed:\n    - name: {{{{ opts['cachedir'] }}}}/artifact.tgz\n    - source: https://127.0.0.1:{tls}/artifact.tgz\n    - skip_verify: True\n\
lab_name_does_not_resolve:\n  file.managed:\n    - name: {{{{ opts['cachedir'] }}}}/agent.tgz\n    - source: https://artifacts.saltsight-lab.invalid/agent.tgz\n    - skip_verify: True\n\
lab_module_not_there:\n  saltsight_lab_missing.present:\n    - name: x\n"
    )
}

/// `state.apply <args>` on every minion; its jid once `done` holds.
fn apply_until(
    lab: &Lab,
    run: &Saltsight,
    seen: &mut Vec<Received>,
    target: &str,
    args: &[&str],
    done: impl Fn(&[Received], &str) -> bool,
) -> String {
    let mut cli = vec!["--show-jid", target, "state.apply"];
    cli.extend(args);
    let out = lab.salt(&cli).expect("state.apply");
    let jid = jid_from(&out);
    read_records(&run.stdout, seen, Duration::from_secs(120), |s| {
        done(s, &jid)
    })
    .unwrap_or_else(|e| panic!("records for state.apply {args:?} ({jid}): {e:?}"));
    jid
}

/// The named fields of a record.
fn fields(r: &Value, names: &[&str]) -> Value {
    names
        .iter()
        .map(|n| (n.to_string(), r[*n].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[test]
fn the_failures_people_hit_are_classified_named_and_grouped_live() {
    let _lock = lab_lock();
    let dir = tempfile::tempdir().expect("tempdir");
    let pillar = dir.path().join("pillar");
    std::fs::create_dir_all(&pillar).expect("pillar dir");
    let tls = UntrustedTls::start(dir.path());
    let refused = free_port();
    let lab = Lab::start(LabOptions {
        extra_master: format!("pillar_roots:\n  base: [{}]\n", pillar.display()),
        ..LabOptions::default()
    })
    .expect("lab starts");
    let states = lab.root().join("states");
    std::fs::write(
        states.join("lab_failures.sls"),
        lab_failures(refused, tls.port),
    )
    .expect("sls");
    std::fs::write(
        states.join("conflict_a.sls"),
        "lab_conflict:\n  test.nop: []\n",
    )
    .expect("sls");
    std::fs::write(
        states.join("conflict_b.sls"),
        "lab_conflict:\n  test.succeed_without_changes: []\n",
    )
    .expect("sls");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"state.*\" = \"120s\" }}\n",
            lab.master_config().display().to_string()
        ),
    )
    .expect("write config");
    let run = Saltsight::spawn_connected(&["--config", config.to_str().expect("utf-8"), "run"]);
    let mut seen = Vec::new();
    let groups = |seen: &[Received], jid: &str| -> Vec<Value> {
        find(seen, "failure_group", jid)
            .into_iter()
            .cloned()
            .collect()
    };

    // Five failures in one run, each on every minion: five groups of three.
    let jid = apply_until(&lab, &run, &mut seen, "*", &["lab_failures"], |s, jid| {
        groups(s, jid).len() >= 5
    });
    let names = [
        "state_id", "category", "rule", "host", "url", "package", "count",
    ];
    let mut got: Vec<Value> = groups(&seen, &jid)
        .iter()
        .map(|g| fields(g, &names))
        .collect();
    got.sort_by_key(|g| g["state_id"].as_str().map(str::to_owned));
    let tls_url = format!("https://127.0.0.1:{}/artifact.tgz", tls.port);
    let refused_url =
        format!("http://127.0.0.1:{refused}/debian/pool/main/a/app/app_1.0_amd64.deb");
    assert_eq!(
        got,
        [
            json!({"state_id": "lab_module_not_there", "category": "state_unavailable",
                "rule": "state_not_found", "host": null, "url": null, "package": null, "count": 3}),
            json!({"state_id": "lab_name_does_not_resolve", "category": "network.dns",
                "rule": "getaddrinfo", "host": "artifacts.saltsight-lab.invalid",
                "url": "https://artifacts.saltsight-lab.invalid/agent.tgz", "package": null, "count": 3}),
            json!({"state_id": "lab_no_such_package", "category": "dependency.package",
                "rule": "apt_no_package", "host": null, "url": null,
                "package": "saltsight-lab-no-such-package", "count": 3}),
            json!({"state_id": "lab_repository_refuses", "category": "network.connect",
                "rule": "connect_refused", "host": "127.0.0.1", "url": refused_url,
                "package": null, "count": 3}),
            json!({"state_id": "lab_untrusted_certificate", "category": "network.connect",
                "rule": "tls_verify", "host": "127.0.0.1", "url": tls_url, "package": null,
                "count": 3}),
        ],
        "{:#?}",
        groups(&seen, &jid)
    );

    // A conflicting ID: the first SLS that declares it, on every minion.
    let jid = apply_until(
        &lab,
        &run,
        &mut seen,
        "*",
        &["conflict_a,conflict_b"],
        |s, jid| !groups(s, jid).is_empty(),
    );
    let g = &groups(&seen, &jid)[0];
    assert_eq!(
        fields(g, &["sls", "category", "rule", "count", "pillar"]),
        json!({"sls": "conflict_a", "category": "render", "rule": "conflicting_ids", "count": 3,
            "pillar": null}),
        "{g}"
    );

    // A pillar that does not render: its SLS, not the header, once per minion.
    std::fs::write(pillar.join("top.sls"), "base:\n  '*':\n    - lab_secrets\n").expect("top");
    std::fs::write(
        pillar.join("lab_secrets.sls"),
        "db:\n  password: {{ vault.missing.key }}\n",
    )
    .expect("pillar sls");
    let jid = apply_until(&lab, &run, &mut seen, "*", &["ok"], |s, jid| {
        !groups(s, jid).is_empty()
    });
    let failures = find(&seen, "render_failure", &jid);
    assert_eq!(failures.len(), 3, "one per minion, no header: {failures:?}");
    let g = &groups(&seen, &jid)[0];
    assert_eq!(
        fields(g, &["sls", "category", "rule", "count", "pillar"]),
        json!({"sls": "lab_secrets", "category": "render", "rule": "rendering_sls", "count": 3,
            "pillar": true}),
        "{g}"
    );
    std::fs::remove_file(pillar.join("top.sls")).expect("pillar top removed");

    // A run refused because one is running: `already_running`, not a render failure.
    lab.salt(&["--async", "web1", "state.apply", "sleep"])
        .expect("async sleep");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = lab.salt(&[
            "web1",
            "saltutil.is_running",
            "state.apply",
            "--out",
            "json",
        ]);
        let running = out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("\"jid\""));
        if running {
            break;
        }
        assert!(Instant::now() < deadline, "the sleep run started");
    }
    let jid = apply_until(&lab, &run, &mut seen, "web1", &["ok"], |s, jid| {
        !find(s, "render_failure", jid).is_empty()
    });
    let refused_run = find(&seen, "render_failure", &jid)[0];
    assert_eq!(
        fields(refused_run, &["minion", "category", "rule", "sls"]),
        json!({"minion": "web1", "category": "already_running", "rule": "already_running",
            "sls": null}),
        "{refused_run}"
    );
    drop(tls);
}
