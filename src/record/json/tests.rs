//! The JSON writer against serde_json, byte for byte.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::Serialize;

use super::*;
use crate::record::Shared;

fn ours<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    line(value, &mut out).expect("writes");
    String::from_utf8(out).expect("utf-8")
}

/// Ours and serde_json's, byte for byte.
fn same<T: Serialize + ?Sized>(value: &T) {
    let theirs = serde_json::to_string(value).expect("serde_json writes it");
    assert_eq!(ours(value), theirs);
}

#[derive(Serialize)]
struct Inner {
    commit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Shape {
    Unit,
    Newtype(u8),
    Tuple(i32, f64),
    Struct { a: bool, b: Option<char> },
}

#[derive(Serialize)]
#[serde(untagged)]
enum Body {
    Inner(Inner),
}

#[derive(Serialize)]
struct Outer {
    kind: &'static str,
    #[serde(flatten)]
    body: Body,
    #[serde(flatten)]
    more: BTreeMap<String, u32>,
    shapes: Vec<Shape>,
    pair: (u8, &'static str),
    bytes: serde_bytes_like::Bytes,
    unit: (),
    nothing: Option<u8>,
    big: u128,
    small: i128,
    floats: [f64; 6],
    single: f32,
    by_number: BTreeMap<i64, bool>,
    by_flag: BTreeMap<bool, ()>,
    by_char: BTreeMap<char, u8>,
    nested: Vec<Vec<BTreeMap<String, Vec<u8>>>>,
}

/// A `serialize_bytes` caller without another crate.
mod serde_bytes_like {
    pub struct Bytes(pub Vec<u8>);
    impl serde::Serialize for Bytes {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(&self.0)
        }
    }
}

#[test]
fn every_shape_is_written_as_serde_json_writes_it() {
    let outer = Outer {
        kind: "state_failure",
        body: Body::Inner(Inner {
            commit: "abc",
            subject: Some("fix \"it\"\n\ttab \\ \u{1} \u{7f} é 🦀".into()),
        }),
        more: [("x".to_owned(), 1), ("y\"".to_owned(), 2)].into(),
        shapes: vec![
            Shape::Unit,
            Shape::Newtype(7),
            Shape::Tuple(-3, 0.1),
            Shape::Struct {
                a: true,
                b: Some('"'),
            },
            Shape::Struct { a: false, b: None },
        ],
        pair: (1, "two"),
        bytes: serde_bytes_like::Bytes(vec![0, 255, 10]),
        unit: (),
        nothing: None,
        big: u128::MAX,
        small: i128::MIN,
        floats: [1.5, -0.0, 1e300, f64::NAN, f64::INFINITY, 123456789.125],
        single: 0.3,
        by_number: [(-1, true), (42, false)].into(),
        by_flag: [(true, ()), (false, ())].into(),
        by_char: [('k', 1)].into(),
        nested: vec![
            vec![],
            vec![BTreeMap::new(), [("a".to_owned(), vec![1, 2])].into()],
        ],
    };
    same(&outer);
    same(&serde_json::json!({"a": [null, 1, -2, 3.25, "s", {"b": {}}, []], "": ""}));
}

#[test]
fn every_byte_is_escaped_as_serde_json_escapes_it_wherever_it_falls() {
    for byte in 0u8..0x80 {
        for at in 0..17 {
            let mut text = "a".repeat(at);
            text.push(byte as char);
            text.push_str(&"z".repeat(17 - at));
            same(&text);
        }
    }
    // Every length a text is checked in words of its own (1 to 3, 4 to 7, 8 to
    // 16, longer), with the escaped byte at every place.
    for len in 1..=40 {
        for at in 0..len {
            for byte in [0u8, b'\n', b'"', b'\\', 0x1f] {
                let mut text: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
                text[at] = byte;
                same(&String::from_utf8(text).unwrap_or_default());
            }
        }
        same(&"\u{e9}".repeat(len));
    }
    same("");
    same("\"\"\\\\\n\n");
    // A flag above the first may be wrong: a space after a control byte, `#`
    // after `"`, `]` after `\`.
    same("\u{0} \u{1}!\"#\\]\u{1f} x");
}

#[test]
fn a_key_that_is_no_string_number_or_boolean_is_an_error() {
    let by_list: BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into();
    assert!(line(&by_list, &mut Vec::new()).is_err());
    assert!(
        serde_json::to_string(&by_list).is_err(),
        "serde_json refuses it too"
    );
    struct NanKey;
    impl Serialize for NanKey {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map([(f64::NAN, 1u8)])
        }
    }
    assert!(line(&NanKey, &mut Vec::new()).is_err());
    assert!(
        serde_json::to_string(&NanKey).is_err(),
        "serde_json refuses it too"
    );
}

#[derive(Clone, Serialize)]
struct Part {
    commit: String,
    count: u32,
}

#[derive(Serialize)]
struct Holder {
    #[serde(flatten)]
    first: Shared<Part>,
    minion: &'static str,
    #[serde(flatten)]
    empty: Shared<BTreeMap<String, u8>>,
    output: Shared<Part>,
    name: Shared<String>,
}

#[test]
fn a_shared_part_writes_its_kept_fields_flattened_or_not_as_the_part_itself() {
    let part = Shared::new(Part {
        commit: "a\"b".into(),
        count: 3,
    });
    let holder = Holder {
        first: part.clone(),
        minion: "web1",
        empty: Shared::new(BTreeMap::new()),
        output: part,
        name: "n".to_owned().into(),
    };
    let plain = serde_json::to_string(&holder).expect("serde_json writes it");
    assert_eq!(
        plain,
        r#"{"commit":"a\"b","count":3,"minion":"web1","output":{"commit":"a\"b","count":3},"name":"n"}"#
    );
    assert_eq!(ours(&holder), plain, "fields made and kept");
    assert_eq!(ours(&holder), plain, "fields written as kept");
    assert!(!writing(), "set back after");
}

#[test]
fn kept_fields_are_what_the_writer_alone_is_handed() {
    assert_eq!(
        fields(&Part {
            commit: "c".into(),
            count: 1
        })
        .as_deref(),
        Some(r#""commit":"c","count":1"#)
    );
    assert_eq!(fields(&BTreeMap::<String, u8>::new()).as_deref(), Some(""));
    assert_eq!(fields("not an object"), None);
    assert_eq!(fields(&[1, 2]), None);
}

proptest! {
    #[test]
    fn any_text_is_written_as_serde_json_writes_it(text in "\\PC*|[\\x00-\\x7f]{0,40}", key in ".{0,12}") {
        let map: BTreeMap<&str, &str> = [(key.as_str(), text.as_str())].into();
        prop_assert_eq!(ours(&map), serde_json::to_string(&map).expect("serde_json writes it"));
    }
}

/// The records written field by field (`hot`), every field each way it can
/// be written, against serde_json. The parts are built by struct literal: a
/// field added to one of them fails to compile here until it is made here
/// (and so written, and compared).
mod hot_kinds {
    use std::sync::Arc;

    use super::*;
    // `json::record`, by its path: this module's `record()` (the strategy)
    // hides the writer's own.
    use crate::record::json;
    use crate::record::{
        Category, Classification, CommandOutput, Commit, Correlation, FailedStateFacts,
        IntroducedBasis, IntroducedBy, JobContext, MinionReturn, PullRequest, Record, RecordBody,
        RecordId, RunKind, SCHEMA_VERSION, StateCounts, StateFailure, SuspectCommits, TraceContext,
        Trimmed,
    };
    use crate::time::Stamp;

    fn text() -> impl Strategy<Value = String> {
        "[a-z0-9 .\"\\\\\n\u{1}\u{e9}]{0,10}"
    }

    fn context() -> impl Strategy<Value = JobContext> {
        (
            prop::sample::select(RunKind::ALL.to_vec()),
            prop::option::of(text()),
            prop::option::of(text()),
            any::<bool>(),
            prop::option::of((text(), text())),
        )
            .prop_map(
                |(run_kind, orchestration_jid, metadata, test, trace)| JobContext {
                    run_kind,
                    orchestration_jid,
                    metadata: metadata.map(|m| serde_json::json!({"release": m, "n": [1, null]})),
                    test,
                    trace: trace.map(|(trace_id, span_id)| TraceContext { trace_id, span_id }),
                },
            )
    }

    fn commit() -> impl Strategy<Value = Commit> {
        (
            (text(), text(), text(), text()),
            prop::option::of((
                any::<u64>(),
                prop::option::of(text()),
                prop::option::of(text()),
            )),
        )
            .prop_map(|((id, author, time, subject), pull_request)| Commit {
                id,
                author,
                time,
                subject,
                pull_request: pull_request.map(|(number, project, url)| PullRequest {
                    number,
                    project,
                    url,
                }),
            })
    }

    fn correlation() -> impl Strategy<Value = Correlation> {
        (
            prop::collection::btree_map(text(), text(), 0..3),
            prop::option::of((text(), text(), commit(), any::<bool>())),
            prop::option::of((
                (text(), text(), text()),
                prop::collection::vec(commit(), 0..2),
                any::<bool>(),
            )),
        )
            .prop_map(|(commits, introduced_by, suspect_commits)| Correlation {
                commits,
                introduced_by: introduced_by.map(|(repo, path, commit, since)| IntroducedBy {
                    repo,
                    path,
                    commit,
                    basis: if since {
                        IntroducedBasis::SinceLastPass
                    } else {
                        IntroducedBasis::FirstSeenHead
                    },
                }),
                suspect_commits: suspect_commits.map(
                    |((repo, last_ok, first_failed), commits, truncated)| SuspectCommits {
                        repo,
                        last_ok,
                        first_failed,
                        commits,
                        truncated,
                    },
                ),
            })
    }

    fn minion_return() -> impl Strategy<Value = MinionReturn> {
        (
            (
                text(),
                text(),
                prop::option::of(text()),
                any::<Option<i64>>(),
            ),
            (
                any::<Option<bool>>(),
                any::<bool>(),
                context(),
                prop::option::of(text()),
            ),
            (
                any::<Option<u64>>(),
                prop::option::of(any::<[u32; 4]>()),
                prop::option::of(prop::sample::select(Trimmed::ALL.to_vec())),
                prop::option::of((text(), text())),
            ),
        )
            .prop_map(
                |(
                    (jid, minion, fun, retcode),
                    (salt_success, succeeded, context, schedule),
                    (duration_ms, states, trimmed, return_trace),
                )| MinionReturn {
                    jid: jid.into(),
                    minion: minion.into(),
                    fun: fun.map(Arc::from),
                    retcode,
                    salt_success,
                    succeeded,
                    context: Shared::new(context),
                    schedule,
                    duration_ms,
                    states: states.map(|[ok, changed, failed, would_change]| StateCounts {
                        ok,
                        changed,
                        failed,
                        would_change,
                    }),
                    trimmed,
                    return_trace: return_trace
                        .map(|(trace_id, span_id)| TraceContext { trace_id, span_id }),
                },
            )
    }

    fn state_failure() -> impl Strategy<Value = StateFailure> {
        (
            (
                text(),
                text(),
                text(),
                [text(), text(), text(), text(), text()],
            ),
            (
                any::<Option<u64>>(),
                // Infinities and NaN too (written as null).
                prop::option::of(prop::num::f64::ANY),
                prop::option::of("[0-9:.]{0,30}"),
            ),
            (
                prop::sample::select(Category::ALL.to_vec()),
                text(),
                [prop::option::of(text()), prop::option::of(text())],
                [prop::option::of(text()), prop::option::of(text())],
            ),
            (
                any::<u32>(),
                (
                    any::<Option<i64>>(),
                    prop::option::of(text()),
                    prop::option::of(text()),
                ),
                (text(), prop::option::of(text()), any::<Option<bool>>()),
                (context(), correlation(), any::<usize>()),
            ),
        )
            .prop_map(
                |(
                    (jid, minion, fun, [sls, state_id, function, name, comment]),
                    (run_num, duration_ms, start_time),
                    (category, rule, [evidence, host], [url, package]),
                    (
                        fallout,
                        (retcode, stderr, stdout),
                        (fingerprint, incident, first_failing),
                        (context, correlation, comment_len),
                    ),
                )| StateFailure {
                    jid: jid.into(),
                    minion: minion.into(),
                    fun: fun.into(),
                    state: Shared::new(FailedStateFacts {
                        sls,
                        state_id,
                        function,
                        name,
                        comment,
                        comment_len,
                    }),
                    run_num,
                    duration_ms,
                    start_time: start_time.map(Into::into),
                    cause: Shared::new(Classification {
                        category,
                        rule: rule.into(),
                        evidence,
                        host,
                        url,
                        package,
                    }),
                    fallout,
                    output: Shared::new(CommandOutput {
                        retcode,
                        stderr,
                        stdout,
                    }),
                    fingerprint: fingerprint.into(),
                    incident,
                    first_failing,
                    context: Shared::new(context),
                    correlation: Shared::new(correlation),
                },
            )
    }

    fn body() -> impl Strategy<Value = RecordBody> {
        prop_oneof![
            minion_return().prop_map(RecordBody::MinionReturn),
            minion_return().prop_map(RecordBody::LateReturn),
            state_failure().prop_map(|f| RecordBody::StateFailure(Box::new(f))),
        ]
    }

    fn record() -> impl Strategy<Value = Record> {
        (
            body(),
            any::<u128>(),
            text(),
            // Any time, more often one of years 0 to 9999 (written digit by
            // digit), and the ends of those years.
            prop_oneof![
                any::<i64>(),
                -62_167_219_200_000_000i64..253_402_300_800_000_000,
                prop::sample::select(vec![
                    i64::MIN,
                    -62_167_219_200_000_001,
                    -62_167_219_200_000_000,
                    253_402_300_799_999_999,
                    253_402_300_800_000_000,
                    i64::MAX,
                ]),
            ],
            prop::collection::vec(text(), 0..3),
        )
            .prop_map(|(body, id, master, at, redacted)| Record {
                kind: body.kind(),
                schema_version: SCHEMA_VERSION,
                id: RecordId::of(id),
                master: master.into(),
                at: Stamp(at),
                body,
                redacted,
            })
    }

    fn written(record: &Record) -> String {
        let mut out = b"before ".to_vec();
        json::record(record, &mut out).expect("writes");
        String::from_utf8(out).expect("utf-8")
    }

    proptest! {
        #[test]
        fn a_record_made_per_return_is_written_as_serde_json_writes_it(record in record()) {
            let theirs = format!("before {}", serde_json::to_string(&record).expect("serde_json writes it"));
            prop_assert_eq!(written(&record), theirs.clone(), "its parts' fields made (then kept)");
            prop_assert_eq!(written(&record), theirs, "its parts' fields as kept");
            prop_assert!(!writing(), "set back after");
        }
    }
}
