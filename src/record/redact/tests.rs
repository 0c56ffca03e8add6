//! Tests of the redaction rules, one by one, then properties: idempotent, never
//! panics, never grows a text past the cap.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::record::{
    Classification, CommandOutput, Commit, Correlation, FailedStateFacts, IntroducedBasis,
    IntroducedBy, JobContext, RecordBody, RecordFactory, Shared, StateFailure,
};
use crate::time::Stamp;

fn redactor() -> Redactor {
    Redactor::new(&RedactConfig::default()).expect("default rules compile")
}

fn text(r: &Redactor, s: &str) -> String {
    let mut out = s.to_owned();
    r.0.text(&mut out, &mut Fired::default());
    out
}

fn count(r: &Redactor, rule: &str) -> u64 {
    r.counts().find(|(n, _)| *n == rule).map_or(0, |(_, c)| c)
}

#[test]
fn a_text_seen_again_is_read_from_the_memo_and_counted_again() {
    let r = redactor();
    let secret = "mysql -u app -pS3cretPass -h db1 < dump.sql";
    let first = text(&r, secret);
    assert_eq!(first, "mysql -u app -p[redacted] -h db1 < dump.sql");
    assert_eq!(text(&r, secret), first);
    assert_eq!(count(&r, "password_flag"), 2, "the rule counts each time");
    assert_eq!(r.memo_counts(), (1, 0));
    // A clean text with a trigger character is remembered too.
    assert_eq!(text(&r, "state: ok"), "state: ok");
    assert_eq!(text(&r, "state: ok"), "state: ok");
    assert_eq!(r.memo_counts(), (2, 0));
    // The memo holds MEMO_TEXTS texts, the oldest forgotten first.
    for i in 0..MEMO_TEXTS - 1 {
        text(&r, &format!("key: {i}"));
    }
    assert_eq!(r.memo_counts(), (2, 1));
    assert_eq!(text(&r, secret), first);
    assert_eq!(
        r.memo_counts(),
        (2, 2),
        "the first text was forgotten, and read anew"
    );
    assert_eq!(count(&r, "password_flag"), 3);
    // A long text is not remembered, and is redacted the same.
    let long = format!("{} {secret}", "x".repeat(MEMO_TEXT_MAX));
    assert!(text(&r, &long).ends_with("-p[redacted] -h db1 < dump.sql"));
    assert!(text(&r, &long).ends_with("-p[redacted] -h db1 < dump.sql"));
    assert_eq!(r.memo_counts(), (2, 2));
    assert_eq!(count(&r, "password_flag"), 5);
}

#[test]
fn credentials_in_urls_are_masked_and_the_host_kept() {
    let r = redactor();
    assert_eq!(
        text(
            &r,
            "curl -fsS https://deploy:S3cret@mirror.example.com/repo.gpg"
        ),
        "curl -fsS https://[redacted]@mirror.example.com/repo.gpg"
    );
    assert_eq!(
        text(&r, "git clone https://ghp_abcdef123456@github.com/o/r"),
        "git clone https://[redacted]@github.com/o/r"
    );
    assert_eq!(
        text(&r, "see https://mirror.example.com/a@b"),
        "see https://mirror.example.com/a@b"
    );
    assert_eq!(count(&r, "url_credentials"), 2);
}

#[test]
fn an_ssh_user_name_is_not_a_credential_but_its_password_is() {
    let r = redactor();
    for kept in [
        "Failed to check remote refs: ssh://git@git.example.com:2222/ops/app.git",
        "git+ssh://deploy@git.example.com/ops/app.git",
        "SSH://git@github.com/o/r",
    ] {
        assert_eq!(text(&r, kept), kept);
    }
    assert_eq!(
        text(&r, "ssh://deploy:S3cret@git.example.com/ops/app.git"),
        "ssh://[redacted]@git.example.com/ops/app.git"
    );
    // A token alone in an HTTP URL is still one.
    assert_eq!(
        text(
            &r,
            "https://ghp_abcdef123456@github.com/o/r and ssh://git@github.com/o/r"
        ),
        "https://[redacted]@github.com/o/r and ssh://git@github.com/o/r"
    );
    assert_eq!(count(&r, "url_credentials"), 2);
}

#[test]
fn password_flags_are_masked() {
    let r = redactor();
    assert_eq!(
        text(&r, "mysql -uroot -pS3cret -e 'select 1'"),
        "mysql -uroot -p[redacted] -e 'select 1'"
    );
    assert_eq!(
        text(&r, "tool --password=S3cret --x"),
        "tool --password=[redacted] --x"
    );
    assert_eq!(
        text(&r, "tool --token abc123 run"),
        "tool --token [redacted] run"
    );
    for kept in [
        "mkdir -p /srv/www",
        "cp -pr a b",
        "tar -pxzf a.tgz",
        "rsync -p -- x",
    ] {
        assert_eq!(text(&r, kept), kept);
    }
}

#[test]
fn secret_key_values_in_free_text_are_masked() {
    let r = redactor();
    assert_eq!(
        text(&r, "echo token=abc123; echo done"),
        "echo token=[redacted]; echo done"
    );
    assert_eq!(
        text(&r, r#"{"db_password": "hunter2", "user": "app"}"#),
        r#"{"db_password": "[redacted]", "user": "app"}"#
    );
    assert_eq!(
        text(&r, "GET /x?access_token=abc&page=2"),
        "GET /x?access_token=[redacted]&page=2"
    );
    for kept in [
        "Authentication failed for user app",
        "password_file=/etc/app/pw is missing",
        "author: Jo",
        "Token expired",
    ] {
        assert_eq!(text(&r, kept), kept);
    }
}

#[test]
fn bearer_and_authorization_values_are_masked() {
    let r = redactor();
    assert_eq!(
        text(
            &r,
            "curl -H 'Authorization: Bearer eyJhbGciOi.J9.x-y' https://api"
        ),
        "curl -H 'Authorization: Bearer [redacted]' https://api"
    );
    assert_eq!(
        text(&r, "Authorization: Basic dXNlcjpwYXNz"),
        "Authorization: Basic [redacted]"
    );
}

#[test]
fn private_keys_lose_their_body_even_when_cut_short() {
    let r = redactor();
    let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----\nnext";
    assert_eq!(
        text(&r, key),
        "-----BEGIN RSA PRIVATE KEY-----[redacted]-----END RSA PRIVATE KEY-----\nnext"
    );
    assert_eq!(
        text(
            &r,
            "x -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkt"
        ),
        "x -----BEGIN OPENSSH PRIVATE KEY-----[redacted]"
    );
    let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----";
    assert_eq!(text(&r, cert), cert);
}

#[test]
fn aws_keys_are_masked() {
    let r = redactor();
    assert_eq!(
        text(&r, "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE"),
        "export AWS_ACCESS_KEY_ID=[redacted]"
    );
    assert_eq!(
        text(&r, "id AKIAIOSFODNN7EXAMPLE used"),
        "id [redacted] used"
    );
    assert_eq!(
        text(
            &r,
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
        ),
        "aws_secret_access_key = [redacted]"
    );
}

#[test]
fn extra_patterns_mask_under_their_own_name() {
    let config = RedactConfig {
        extra_patterns: vec![
            ("vault_token".into(), r"hvs\.[A-Za-z0-9]{20,}".into()),
            ("ticket".into(), r"ticket (?P<s>\d+)".into()),
        ],
        ..RedactConfig::default()
    };
    let r = Redactor::new(&config).unwrap();
    assert_eq!(
        text(&r, "login hvs.CAESIJ0123456789abcdefghij ok"),
        "login [redacted] ok"
    );
    assert_eq!(text(&r, "ticket 4711 open"), "ticket [redacted] open");
    assert_eq!(count(&r, "vault_token"), 1);
    assert_eq!(count(&r, "ticket"), 1);
}

/// The master's name is text every record carries, and passes the gate too
/// (it is shared by every record a factory makes, and replaced only here).
#[test]
fn a_masters_name_that_matches_a_rule_is_masked_in_its_records() {
    let config = RedactConfig {
        extra_patterns: vec![("site".into(), r"secret-site-\d+".into())],
        ..RedactConfig::default()
    };
    let r = Redactor::new(&config).unwrap();
    let factory = RecordFactory::new("salt.secret-site-7.example");
    let gap = || {
        RecordBody::BusGap(crate::record::BusGapRecord {
            reason: "disconnected",
            started_at: Stamp(0),
            ended_at: Stamp(1),
            duration_ms: 0,
            dropped_frames: 0,
        })
    };
    for _ in 0..2 {
        let out = r.record(factory.make(Stamp(0), &[], gap()));
        assert_eq!(&*out.get().master, "salt.[redacted].example");
        assert_eq!(out.get().redacted, ["site"]);
    }
    assert_eq!(count(&r, "site"), 2);
}

#[test]
fn an_extra_pattern_that_matches_the_mask_is_refused() {
    let config = RedactConfig {
        extra_patterns: vec![("greedy".into(), "dact".into())],
        ..RedactConfig::default()
    };
    let err = Redactor::new(&config).unwrap_err().to_string();
    assert!(err.contains("extra_patterns.greedy"), "{err}");
}

#[test]
fn long_texts_are_cut_with_their_length_and_stay_cut() {
    let config = RedactConfig {
        max_field_bytes: 256,
        ..RedactConfig::default()
    };
    let r = Redactor::new(&config).unwrap();
    let long = "é".repeat(1000);
    let once = text(&r, &long);
    assert!(once.len() <= 256, "{}", once.len());
    assert!(once.ends_with(" [saltsight cut 2000 bytes]"), "{once}");
    assert_eq!(text(&r, &once), once);
    assert_eq!(count(&r, "field_cap"), 1);
}

#[test]
fn secret_keys_are_masked_at_any_depth_and_the_pillar_kwarg_whole() {
    let r = redactor();
    let data = json!({
        "fun": "state.apply",
        "arg": ["web", {"__kwarg__": true, "pillar": {"db": {"user": "app"}}, "test": true}],
        "kwargs": {"nested": [{"API_KEY": 12345, "Password": "x", "auth": false, "token": null}]},
        "return": {
            "file_|-/etc/app/secret.conf_|-/etc/app/secret.conf_|-managed": {
                "comment": "ok", "result": true
            }
        }
    });
    let out = r.event("salt/job/1/new", data).get().data.clone();
    assert_eq!(out["arg"][1]["pillar"], json!(MASK));
    assert_eq!(out["arg"][1]["test"], json!(true));
    assert_eq!(out["arg"][0], json!("web"));
    assert_eq!(out["kwargs"]["nested"][0]["API_KEY"], json!(MASK));
    assert_eq!(out["kwargs"]["nested"][0]["Password"], json!(MASK));
    assert_eq!(out["kwargs"]["nested"][0]["auth"], json!(false));
    assert_eq!(out["kwargs"]["nested"][0]["token"], json!(null));
    let state = &out["return"]["file_|-/etc/app/secret.conf_|-/etc/app/secret.conf_|-managed"];
    assert_eq!(state["comment"], json!("ok"));
    assert_eq!(count(&r, "pillar"), 1);
    assert_eq!(count(&r, "key"), 2);
}

#[test]
fn secret_functions_return_a_summary_only() {
    let r = redactor();
    let ret = json!({"fun": "pillar.items", "id": "db1", "return": {"db": {"pass": "x"}, "b": 1}});
    let out = r.event("salt/job/1/ret/db1", ret).get().data.clone();
    assert_eq!(
        out["return"],
        json!("[redacted: the return of pillar.items, 2 keys]")
    );
    assert_eq!(out["id"], json!("db1"));
    let wheel = json!({"fun": "wheel.key.gen_accept", "return": {"priv": "k"}, "data": {"return": {"priv": "k"}}});
    let out = r.event("salt/wheel/1/ret", wheel).get().data.clone();
    assert!(out["return"].as_str().unwrap().starts_with("[redacted: "));
    assert!(
        out["data"]["return"]
            .as_str()
            .unwrap()
            .starts_with("[redacted: ")
    );
    let cmd = json!({"fun": "cmd.run", "return": "token=abc\nok"});
    let out = r.event("salt/job/2/ret/db1", cmd).get().data.clone();
    assert_eq!(out["return"], json!("token=[redacted]\nok"));
}

#[test]
fn keys_and_tags_are_free_text_too() {
    let r = redactor();
    let data = json!({"return": {
        "cmd_|-fetch_|-curl https://u:p4ss@h/x_|-run": {"comment": "Command \"curl https://u:p4ss@h/x\" run"}
    }});
    let out = r.event("custom/token=abc", data);
    assert_eq!(out.tag, "custom/token=[redacted]");
    let text = out.data.to_string();
    assert!(!text.contains("p4ss"), "{text}");
    assert!(
        text.contains("cmd_|-fetch_|-curl https://[redacted]@h/x_|-run"),
        "{text}"
    );
}

fn state_failure(comment: &str) -> Record {
    RecordFactory::new("m1").make(
        Stamp(1),
        &["1", "web1"],
        RecordBody::StateFailure(Box::new(StateFailure {
            jid: "20261122101010123456".into(),
            minion: "web1".into(),
            fun: "state.apply".into(),
            state: FailedStateFacts {
                sls: "app.deploy".into(),
                state_id: "fetch-release".into(),
                function: "cmd.run".into(),
                name: "curl -fsS https://deploy:S3cret@mirror/app.tgz".into(),
                comment: comment.into(),
                comment_len: comment.len(),
            }
            .into(),
            run_num: Some(3),
            duration_ms: None,
            start_time: None,
            cause: Classification::render().into(),
            fallout: 0,
            output: CommandOutput {
                retcode: Some(1),
                stderr: Some(
                    "ERROR 1045: Access denied for user 'app' (password: YES) token=t0k3n".into(),
                ),
                stdout: None,
            }
            .into(),
            fingerprint: "f".into(),
            incident: None,
            first_failing: None,
            context: JobContext {
                metadata: Some(json!({"release": "r42", "deploy_token": "t0k3n"})),
                ..JobContext::default()
            }
            .into(),
            correlation: Correlation::default().into(),
        })),
    )
}

#[test]
fn records_keep_their_context_and_name_the_rules_that_fired() {
    let r = redactor();
    let record = state_failure("Command failed: mysql -pS3cret -e x: exit 1");
    let out = r.record(record);
    let RecordBody::StateFailure(f) = &out.body else {
        panic!("kind changed")
    };
    assert_eq!(&*f.jid, "20261122101010123456");
    assert_eq!(&*f.minion, "web1");
    assert_eq!(f.state.sls, "app.deploy");
    assert_eq!(f.state.state_id, "fetch-release");
    assert_eq!(f.state.name, "curl -fsS https://[redacted]@mirror/app.tgz");
    assert_eq!(
        f.state.comment,
        "Command failed: mysql -p[redacted] -e x: exit 1"
    );
    assert_eq!(
        f.context.metadata,
        Some(json!({"release": "r42", "deploy_token": MASK}))
    );
    assert_eq!(
        f.output.stderr.as_deref(),
        Some("ERROR 1045: Access denied for user 'app' (password: [redacted] token=[redacted]"),
        "the command's own words pass the gate too (a key=value rule errs on the side of masking)"
    );
    assert_eq!(
        out.redacted,
        ["key", "key_value", "password_flag", "url_credentials"]
    );
    let line = serde_json::to_string(out.get()).unwrap();
    assert!(
        !line.contains("S3cret") && !line.contains("t0k3n"),
        "{line}"
    );
    let again = r.record(out.get().clone());
    assert_eq!(again, out);
}

/// A correlation whose commit subject carries a secret, shared by records.
fn shared_correlation() -> Shared<Correlation> {
    Correlation {
        introduced_by: Some(IntroducedBy {
            repo: "states".into(),
            path: "app/deploy.sls".into(),
            commit: Commit {
                id: "c3".into(),
                author: "ops".into(),
                time: "2026-11-27T10:00:00Z".into(),
                subject: "deploy: fetch with --password=Hunter2".into(),
                pull_request: None,
            },
            basis: IntroducedBasis::FirstSeenHead,
        }),
        ..Correlation::default()
    }
    .into()
}

fn with_correlation(mut record: Record, correlation: &Shared<Correlation>) -> Record {
    if let RecordBody::StateFailure(f) = &mut record.body {
        f.correlation = correlation.clone();
    }
    record
}

fn subject(record: &Record) -> (String, *const Correlation) {
    let RecordBody::StateFailure(f) = &record.body else {
        panic!("kind changed")
    };
    let introduced = f.correlation.introduced_by.as_ref().expect("kept");
    (introduced.commit.subject.clone(), &*f.correlation)
}

#[test]
fn a_part_records_share_is_scrubbed_once_and_counted_per_record() {
    let r = redactor();
    let shared = shared_correlation();
    let clean = "Command \"/bin/false\" run";
    let first = r.record(with_correlation(state_failure(clean), &shared));
    let second = r.record(with_correlation(state_failure(clean), &shared));
    let (first_subject, first_part) = subject(&first);
    let (second_subject, second_part) = subject(&second);
    assert_eq!(first_subject, "deploy: fetch with --password=[redacted]");
    assert_eq!(second_subject, first_subject);
    assert!(
        std::ptr::eq(first_part, second_part),
        "the second record took what the first made of the part"
    );
    assert_eq!(
        shared.introduced_by.as_ref().unwrap().commit.subject,
        "deploy: fetch with --password=Hunter2",
        "the part as made is left as it was"
    );
    assert_eq!(count(&r, "password_flag"), 2, "counted for each record");
    assert!(second.redacted.contains(&"password_flag".to_owned()));
    assert_eq!(r.record(second.get().clone()), second, "and idempotent");
    // A part nothing matches stays the very part it was.
    let plain: Shared<Correlation> = Correlation::default().into();
    let out = r.record(with_correlation(state_failure(clean), &plain));
    let RecordBody::StateFailure(f) = &out.body else {
        panic!("kind changed")
    };
    assert!(std::ptr::eq(&*f.correlation, &*plain));
}

#[test]
fn log_lines_are_scrubbed_and_stay_json() {
    let r = redactor();
    let json_line = r#"{"fields":{"message":"Serving metrics.","basic_auth":false,"tls":true}}"#;
    assert_eq!(r.line(json_line), json_line);
    assert_eq!(
        r.line(r#"{"fields":{"password":"abc","error":"body {\"token\": \"t0k\"} x"}}"#),
        r#"{"fields":{"password":"[redacted]","error":"body {\"token\": \"[redacted]\"} x"}}"#
    );
    let pem = r#"{"m":"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE","n":1}"#;
    assert_eq!(
        r.line(pem),
        r#"{"m":"-----BEGIN EC PRIVATE KEY-----[redacted]","n":1}"#
    );
    assert_eq!(
        r.line("upstream https://default:pw@127.0.0.1:8123/ refused"),
        "upstream https://[redacted]@127.0.0.1:8123/ refused"
    );
    assert!(matches!(r.line("nothing here"), Cow::Borrowed(_)));
}

/// Texts built from pieces the rules look for, so that they meet, overlap and get
/// cut in the middle.
fn tricky_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("password=".to_owned()),
        Just("token: ".to_owned()),
        Just(" -p".to_owned()),
        Just("--password ".to_owned()),
        Just("https://".to_owned()),
        Just("u:p@".to_owned()),
        Just("@".to_owned()),
        Just("AKIAIOSFODNN7EXAMPLE".to_owned()),
        Just("-----BEGIN RSA PRIVATE KEY-----".to_owned()),
        Just("-----END RSA PRIVATE KEY-----".to_owned()),
        Just("Bearer ".to_owned()),
        Just("Authorization: ".to_owned()),
        Just("[redacted]".to_owned()),
        Just("-token ".to_owned()),
        Just("bEaReR ".to_owned()),
        Just("aws_secret_access_key=".to_owned()),
        Just("ASIAABCDEFGHIJKLMNOP".to_owned()),
        Just(" [saltsight cut 9 bytes]".to_owned()),
        Just("é".to_owned()),
        Just("\n".to_owned()),
        "[a-z0-9 '\"=:/]{0,12}",
        any::<String>(),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

fn tricky_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        tricky_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        let key = prop_oneof![
            Just("pillar".to_owned()),
            Just("password".to_owned()),
            Just("fun".to_owned()),
            Just("return".to_owned()),
            Just("a_|-b_|-secret_|-c".to_owned()),
            tricky_text(),
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key, inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Built once: compiling the rules is the slow part of a debug build.
fn small_cap() -> Redactor {
    static REDACTOR: std::sync::OnceLock<Redactor> = std::sync::OnceLock::new();
    REDACTOR
        .get_or_init(|| {
            Redactor::new(&RedactConfig {
                max_field_bytes: 256,
                ..RedactConfig::default()
            })
            .unwrap()
        })
        .clone()
}

/// Each trigger alone (random texts almost always hold a `:` or `=` too).
#[test]
fn the_prefilter_lets_through_each_trigger_alone() {
    let r = small_cap();
    for text in [
        "bearer abcdef0123456789",
        "Bearer abcdef0123456789",
        "x AKIAIOSFODNN7EXAMPLE y",
        "mysql -psecret1234",
        "run --password hunter22",
        "-----BEGIN RSA PRIVATE KEY-----",
    ] {
        assert!(r.0.set.is_match(text), "a rule matches {text:?}");
        assert!(may_match(text), "{text:?}");
    }
    assert!(!may_match(
        "web01.example.net state.apply 20261127135847547107"
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn text_redaction_is_idempotent_and_capped(s in tricky_text()) {
        let r = small_cap();
        let once = text(&r, &s);
        prop_assert!(once.len() <= 256, "{} bytes", once.len());
        prop_assert_eq!(text(&r, &once), once);
    }

    #[test]
    fn event_redaction_is_idempotent(v in tricky_value(), fun in prop_oneof![Just("pillar.get"), Just("cmd.run")]) {
        let r = small_cap();
        let mut v = v;
        if let Value::Object(m) = &mut v {
            m.insert("fun".into(), json!(fun));
        }
        let once = r.event("salt/job/1/ret/m", v);
        let twice = r.event(&once.tag, once.data.clone());
        prop_assert_eq!(twice, once);
    }

    #[test]
    fn the_prefilter_never_skips_a_text_a_rule_would_match(s in tricky_text(), t in any::<String>()) {
        let r = small_cap();
        for text in [&s, &t] {
            if r.0.set.is_match(text) {
                prop_assert!(may_match(text), "{:?}", text);
            }
        }
    }

    #[test]
    fn records_redact_idempotently(comment in tricky_text()) {
        let r = small_cap();
        let once = r.record(state_failure(&comment));
        prop_assert_eq!(r.record(once.get().clone()), once);
    }
}

/// A text records share, found clean, is recalled by its address, but only
/// by the redactor whose rules found it so (another's may mask it), and a
/// text a rule masked is masked, and counted, in every record.
#[test]
fn a_shared_text_found_clean_is_clean_only_to_the_rules_that_found_it() {
    let minion: Arc<str> = "web-secret-site-7".into();
    let with_minion = || {
        let mut record = state_failure("clean");
        if let RecordBody::StateFailure(failure) = &mut record.body {
            failure.minion = Arc::clone(&minion);
        }
        record
    };
    let minion_of = |out: Redacted<Record>| match &out.get().body {
        RecordBody::StateFailure(failure) => failure.minion.to_string(),
        _ => unreachable!("a state_failure"),
    };
    let plain = redactor();
    let site = Redactor::new(&RedactConfig {
        extra_patterns: vec![("site".into(), r"secret-site-\d+".into())],
        ..RedactConfig::default()
    })
    .unwrap();
    for _ in 0..2 {
        assert_eq!(minion_of(plain.record(with_minion())), "web-secret-site-7");
        assert_eq!(minion_of(site.record(with_minion())), "web-[redacted]");
    }
    assert_eq!(count(&site, "site"), 2);
}
