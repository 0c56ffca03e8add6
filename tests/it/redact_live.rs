//! Secrets stay on the master: against a real Salt master, jobs plant known
//! secrets in args, kwargs, `--metadata`, the `pillar` kwarg, a pillar return,
//! state names and comments, and command output. A `tail --no-redact` beside
//! them proves each one was on the bus; then every output saltsight has (stdout
//! records, the file output, the ClickHouse table, its debug log, /metrics, and
//! `tail` in both forms) is searched for each: zero hits, while the context
//! (jid, minion, state id, SLS) is intact.

use std::path::Path;
use std::time::Duration;

use saltsight::lab::{Lab, LabOptions};
use serde_json::Value;

use crate::support::clickhouse::ClickHouse;
use crate::support::upstream::get;
use crate::support::{
    Line, Received, Saltsight, jid_from, lab_lock, metrics_address_once_connected, read_records,
    record_ids,
};

/// Each planted secret, and where it was planted.
const SECRETS: &[(&str, &str)] = &[
    (
        "UrlS3cretA1",
        "credentials in a URL in a state's name and comment",
    ),
    ("BearerT0kenB2", "a bearer token in a state's command"),
    ("MetaT0kenC3", "a token key in --metadata"),
    ("FlagS3cretD4", "a mysql -p<secret> in cmd.run's arg"),
    ("OutT0kenE5", "token=... in command output"),
    ("KwargS3cretF6", "the pillar kwarg of state.apply"),
    ("P1llarValueG7", "a pillar value in pillar.items' return"),
    (
        "AKIAQWERTYUIOPASDFGH",
        "an AWS access key id in command output",
    ),
    ("MIIPemBodyH9", "a PEM private key body in command output"),
];

const LEAK_SLS: &str = "leak_fetch:\n  cmd.run:\n    - name: curl -fsS https://deploy:UrlS3cretA1@127.0.0.1:9/app.tgz\n\
leak_notify:\n  cmd.run:\n    - name: \"curl -fsS -H 'Authorization: Bearer BearerT0kenB2' http://127.0.0.1:9/hook\"\n";

fn salt_jid(lab: &Lab, args: &[&str]) -> String {
    let mut all = vec!["--show-jid"];
    all.extend_from_slice(args);
    jid_from(&lab.salt(&all).expect("salt runs"))
}

fn drain(rx: &std::sync::mpsc::Receiver<Line>, into: &mut String) {
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(300)) {
        into.push_str(&line.text);
        into.push('\n');
    }
}

fn write_config(lab: &Lab, dir: &Path, clickhouse: &str) -> String {
    let config = dir.join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = \"lab\"\n[bus]\nmaster_config = {:?}\n[jobs]\ndeadlines = {{ \"state.*\" = \"60s\", \"cmd.*\" = \"30s\", \"pillar.*\" = \"30s\" }}\n\
             [spool]\ndir = {:?}\n[metrics]\nlisten_address = \"127.0.0.1:0\"\n\
             [[output]]\ntype = \"stdout\"\n\n[[output]]\ntype = \"file\"\nname = \"file\"\npath = {:?}\n\n\
             [[output]]\ntype = \"http\"\nname = \"clickhouse\"\nencoding = \"clickhouse\"\nurl = {clickhouse:?}\nbatch_max_age = \"200ms\"\n",
            lab.master_config().display().to_string(),
            dir.join("spool").display().to_string(),
            dir.join("records.jsonl").display().to_string(),
        ),
    )
    .expect("write config");
    config.display().to_string()
}

#[test]
fn planted_secrets_reach_no_output_and_the_context_stays() {
    let _lock = lab_lock();
    let ch = ClickHouse::start();
    let lab = Lab::start(LabOptions::default()).expect("lab starts");
    std::fs::write(lab.root().join("states/leak.sls"), LEAK_SLS).expect("write sls");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(&lab, dir.path(), &ch.url());
    let mut run = Saltsight::spawn(&[
        "--config",
        &config,
        "--log-format",
        "json",
        "--log-level",
        "debug",
        "run",
    ]);
    let mut log = Vec::new();
    let metrics = metrics_address_once_connected(&run, &mut log);
    let mc = lab.master_config().display().to_string();
    let mut tails = [
        Saltsight::spawn_connected(&["--master-config", &mc, "tail", "--json"]),
        Saltsight::spawn_connected(&["--master-config", &mc, "tail"]),
        Saltsight::spawn_connected(&["--master-config", &mc, "tail", "--json", "--no-redact"]),
    ];

    let jids = [
        salt_jid(
            &lab,
            &[
                "*",
                "state.apply",
                "leak",
                "--metadata",
                r#"{"release": "r9", "deploy_token": "MetaT0kenC3"}"#,
            ],
        ),
        salt_jid(
            &lab,
            &[
                "*",
                "cmd.run",
                "mysql -uroot -pFlagS3cretD4 -e 'select 1' 2>/dev/null; echo token=OutT0kenE5; echo AKIAQWERTYUIOPASDFGH; \
                 printf '%s\\n' '-----BEGIN PRIVATE KEY-----' MIIPemBodyH9 '-----END PRIVATE KEY-----'",
            ],
        ),
        salt_jid(
            &lab,
            &[
                "*",
                "state.apply",
                "ok",
                r#"pillar={"db_password": "KwargS3cretF6"}"#,
            ],
        ),
        salt_jid(
            &lab,
            &[
                "*",
                "pillar.items",
                r#"pillar={"app": {"material": "P1llarValueG7"}}"#,
            ],
        ),
    ];
    let mut seen: Vec<Received> = Vec::new();
    read_records(&run.stdout, &mut seen, Duration::from_secs(90), |s| {
        jids.iter().all(|jid| {
            s.iter()
                .any(|r| r.record["kind"] == "job_completed" && r.record["jid"] == jid.as_str())
        })
    })
    .expect("every job completes");
    // Every record reaches ClickHouse before the table is read.
    ch.wait_stored(&record_ids(&seen), Duration::from_secs(30));
    let (status, scrape) = get(metrics, "/metrics").expect("scrape");
    assert_eq!(status, 200);
    assert_eq!(
        run.terminate(Duration::from_secs(5)).map(|s| s.code()),
        Some(Some(0))
    );

    // Every output, as text.
    let mut outputs: Vec<(&str, String)> = Vec::new();
    let mut stdout: String = seen.iter().map(|r| format!("{}\n", r.record)).collect();
    drain(&run.stdout, &mut stdout);
    let mut stderr = log.join("\n");
    drain(&run.stderr, &mut stderr);
    assert!(
        stderr.contains("\"level\":\"DEBUG\""),
        "the log is at debug level"
    );
    outputs.push(("run stdout", stdout));
    outputs.push(("run log (debug)", stderr));
    outputs.push((
        "file output",
        std::fs::read_to_string(dir.path().join("records.jsonl")).expect("file output"),
    ));
    outputs.push((
        "ClickHouse",
        ch.query("SELECT * FROM saltsight.records FORMAT JSONEachRow"),
    ));
    outputs.push(("/metrics", scrape.clone()));
    let mut shown = Vec::new();
    for tail in &mut tails {
        tail.terminate(Duration::from_secs(5));
        let mut text = String::new();
        drain(&tail.stdout, &mut text);
        drain(&tail.stderr, &mut text);
        shown.push(text);
    }
    let unredacted = shown.pop().expect("the --no-redact tail");
    outputs.push(("tail --json", shown[0].clone()));
    outputs.push(("tail", shown[1].clone()));

    for (secret, planted) in SECRETS {
        assert!(
            unredacted.contains(secret),
            "{secret} ({planted}) never reached the bus: the test plants nothing"
        );
        for (name, text) in &outputs {
            assert!(
                !text.contains(secret),
                "{secret} ({planted}) leaked into {name}"
            );
        }
    }

    // The context is intact.
    let records: Vec<&Value> = seen.iter().map(|r| &r.record).collect();
    let fetch: Vec<&&Value> = records
        .iter()
        .filter(|r| r["kind"] == "state_failure" && r["state_id"] == "leak_fetch")
        .collect();
    assert_eq!(fetch.len(), 3, "one root cause per minion: {records:?}");
    for f in &fetch {
        assert_eq!(f["jid"], jids[0].as_str());
        assert_eq!(f["sls"], "leak");
        assert!(
            ["db1", "web1", "web2"].contains(&f["minion"].as_str().unwrap_or("")),
            "{f}"
        );
        assert!(
            f["name"]
                .as_str()
                .unwrap_or("")
                .contains("https://[redacted]@127.0.0.1:9/app.tgz"),
            "{f}"
        );
        assert_eq!(f["metadata"]["release"], "r9");
        assert_eq!(f["metadata"]["deploy_token"], "[redacted]");
        let rules = f["redacted"].to_string();
        assert!(
            rules.contains("url_credentials") && rules.contains("key"),
            "{f}"
        );
    }
    let published = |jid: &str| {
        records
            .iter()
            .find(|r| r["kind"] == "job_published" && r["jid"] == jid)
            .unwrap_or_else(|| panic!("no job_published for {jid}"))
    };
    let cmd = published(&jids[1]);
    assert!(
        cmd["arg"][0]
            .as_str()
            .unwrap_or("")
            .contains("mysql -uroot -p[redacted] -e"),
        "{cmd}"
    );
    let kwarg = published(&jids[2]);
    assert_eq!(kwarg["arg"][0], "ok", "{kwarg}");
    assert!(
        kwarg["arg"]
            .to_string()
            .contains(r#""pillar":"[redacted]""#),
        "{kwarg}"
    );
    assert!(
        shown[0].contains("[redacted: the return of pillar.items"),
        "tail shows the pillar return's summary"
    );
    for rule in [
        "url_credentials",
        "password_flag",
        "key_value",
        "private_key",
        "aws_access_key",
        "pillar",
        "key",
        "auth_header",
    ] {
        let line = scrape
            .lines()
            .find(|l| l.starts_with(&format!("saltsight_redactions_total{{rule=\"{rule}\"}}")))
            .unwrap_or_else(|| panic!("no counter for {rule}:\n{scrape}"));
        let n: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        assert!(n >= 1.0, "{rule} never fired: {line}");
    }
}
