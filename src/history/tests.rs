//! Tests of the history store: write, read back, prune by age and size.
use super::failures::failures;
use super::query::{JobFilter, job, jobs, minion};
use super::status::{incidents, status};
use super::verdicts::FailedState;
use super::write::{Batch, Writer};
use super::*;
use crate::record::{
    Category, Classification, CommandOutput, Correlation, FailedStateFacts, JobCompleted,
    JobPublished, MinionMissing, MinionReturn, MissingEvidence, MissingReason, RecordBody,
    RecordFactory, StateFailure,
};
use std::collections::BTreeMap;

const S: i64 = 1_000_000;

fn rows(records: &[Record]) -> Batch {
    let mut batch = Batch::default();
    for r in records {
        batch.push(r, &serde_json::to_vec(r).expect("a record serialises"));
    }
    batch
}

/// The root cause of `minion`'s failed run of job `jid`.
fn a_failure(f: &RecordFactory, jid: &str, minion: &str, at: Stamp) -> Record {
    f.make(
        at,
        &[jid, minion, "nginx"],
        RecordBody::StateFailure(Box::new(StateFailure {
            jid: jid.into(),
            minion: minion.into(),
            fun: "state.apply".into(),
            state: FailedStateFacts {
                sls: "web".into(),
                state_id: "nginx".into(),
                function: "pkg.installed".into(),
                name: "nginx".into(),
                comment: format!("nginx did not install on {minion}"),
                comment_len: 30,
            }
            .into(),
            run_num: Some(0),
            duration_ms: None,
            start_time: None,
            cause: Classification {
                category: Category::DependencyPackage,
                rule: "apt".into(),
                evidence: None,
                host: None,
                url: None,
                package: Some("nginx".into()),
            }
            .into(),
            fallout: 0,
            output: CommandOutput::default().into(),
            fingerprint: "f00d".into(),
            incident: None,
            first_failing: None,
            context: Default::default(),
            correlation: Correlation::default().into(),
        })),
    )
}

/// A job of three minions: one returned, one failed, one missing.
fn a_job(f: &RecordFactory, jid: &str, t: i64) -> Vec<Record> {
    let ret = |minion: &str, ok: bool| {
        f.make(
            Stamp((t + 1) * S),
            &[jid, minion],
            RecordBody::MinionReturn(MinionReturn {
                jid: jid.into(),
                minion: minion.into(),
                fun: Some("state.apply".into()),
                retcode: Some(if ok { 0 } else { 2 }),
                salt_success: Some(ok),
                succeeded: ok,
                context: Default::default(),
                schedule: None,
                duration_ms: Some(1000),
                states: None,
                trimmed: None,
                return_trace: None,
            }),
        )
    };
    vec![
        f.make(
            Stamp(t * S),
            &[jid],
            RecordBody::JobPublished(Box::new(JobPublished {
                jid: jid.into(),
                fun: "state.apply".into(),
                arg: None,
                tgt: vec!["*".into()],
                tgt_type: Some("glob".into()),
                user: Some("alice".into()),
                expected: vec!["a".into(), "b".into(), "c".into()],
                expected_count: 3,
                not_connected: vec![],
                deadline: Stamp((t + 60) * S),
                context: Default::default(),
                commits: BTreeMap::new(),
                batch: None,
            })),
        ),
        ret("a", true),
        ret("b", false),
        a_failure(f, jid, "b", Stamp((t + 1) * S)),
        f.make(
            Stamp((t + 60) * S),
            &[jid, "c"],
            RecordBody::MinionMissing(MinionMissing {
                jid: jid.into(),
                minion: "c".into(),
                fun: "state.apply".into(),
                reason: MissingReason::NoResponse,
                evidence: MissingEvidence::Nothing,
                disconnected_at: None,
                address: None,
                missing_since: None,
                streak: 2,
                published_at: Stamp(t * S),
                deadline: Stamp((t + 60) * S),
                during_master_pressure: None,
                context: Default::default(),
            }),
        ),
        f.make(
            Stamp((t + 60) * S),
            &[jid, "0"],
            RecordBody::JobCompleted(JobCompleted {
                jid: jid.into(),
                fun: "state.apply".into(),
                tgt: vec!["*".into()],
                expected: 3,
                returned: 2,
                succeeded: 1,
                failed: 1,
                missing: [(MissingReason::NoResponse, 1)].into_iter().collect(),
                published_at: Stamp(t * S),
                duration_ms: 60_000,
                first_return_ms: Some(1000),
                revision: 0,
                evicted: false,
                during_master_pressure: None,
                context: Default::default(),
                batch: None,
            }),
        ),
    ]
}

#[test]
fn a_job_reads_back_as_it_was_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let mut store = Writer::open(&path).expect("open");
    let f = RecordFactory::new("m");
    let records = a_job(&f, "1", 100);
    assert_eq!(store.write(&rows(&records)).unwrap(), 6);
    // A replay or a restart writes them again: they are read once.
    store.write(&rows(&records)).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    let reader = Store::open_reader(&path).expect("read");
    let recap = job(&reader, "1").unwrap().expect("the job");
    assert_eq!(
        (recap.fun.as_str(), recap.user.as_str(), recap.expected),
        ("state.apply", "alice", 3)
    );
    assert_eq!(
        (recap.succeeded.clone(), recap.failed.clone()),
        (vec!["a".to_owned()], vec!["b".to_owned()])
    );
    assert_eq!(recap.missing[0].minion, "c");
    assert_eq!(
        (recap.missing[0].reason.as_str(), recap.missing[0].streak),
        ("no_response", 2)
    );
    assert!(job(&reader, "2").unwrap().is_none());
    let listed = jobs(&reader, &JobFilter::default()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].returned, listed[0].failed, listed[0].missing),
        (2, 1, 1)
    );
    let only_failed = JobFilter {
        failed_only: true,
        fun: Some(crate::config::glob::Glob::new("test.*")),
        ..JobFilter::default()
    };
    assert!(
        jobs(&reader, &only_failed).unwrap().is_empty(),
        "not a test.* job"
    );
    let c = minion(&reader, "c", 10).unwrap().expect("c");
    assert_eq!((c.streak, c.jobs[0].outcome.as_str()), (2, "no_response"));
    assert!(c.failures.is_empty());
    let b = minion(&reader, "b", 10).unwrap().expect("b");
    assert_eq!(b.failures.len(), 1, "{:?}", b.failures);
    assert_eq!(
        (
            b.failures[0].state.as_str(),
            b.failures[0].category.as_str(),
            b.failures[0].times
        ),
        ("web:nginx", "dependency.package", 1),
        "written twice, read once"
    );
    assert!(failures(&reader, None).unwrap().is_empty());
}

#[test]
fn the_oldest_go_first_past_the_age_and_the_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Writer::open(&dir.path().join("history.db")).expect("open");
    let f = RecordFactory::new("m");
    for i in 0..400 {
        store
            .write(&rows(&a_job(&f, &format!("{i}"), i * 100)))
            .unwrap();
    }
    let (aged, sized) = store.prune(Stamp(100 * 100 * S), u64::MAX).unwrap();
    assert_eq!((aged, sized), (100 * 6, 0), "the first 100 jobs, by age");
    let before = store.figures().unwrap();
    assert!(before.oldest >= Some(Stamp(100 * 100 * S)));
    let (_, sized) = store.prune(Stamp(0), before.bytes / 2).unwrap();
    let after = store.figures().unwrap();
    assert!(
        sized > 0 && after.bytes <= before.bytes / 2,
        "{before:?} {after:?}"
    );
    assert!(after.oldest > before.oldest, "the oldest went first");
}

#[test]
fn status_names_what_is_wrong_and_forgets_it_once_it_is_not() {
    use crate::record::{
        ChangeKind, Drift, DriftedState, EpisodeStatus, ExternalIncident, MinionReturn,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let mut store = Writer::open(&path).expect("open");
    let f = RecordFactory::new("m");
    // c missed its second job in a row; an incident is open; web1 drifted.
    store.write(&rows(&a_job(&f, "1", 100))).unwrap();
    let incident = |status: EpisodeStatus, revision: u32| {
        f.make(
            Stamp(150 * S),
            &["i1", &revision.to_string()],
            RecordBody::ExternalIncident(ExternalIncident {
                incident: "i1".into(),
                target: "mirror.example.net".into(),
                category: crate::record::Category::NetworkDns,
                status,
                revision,
                minions: 3,
                jobs: 1,
                failures: 3,
                sample_minions: vec![],
                sample_jobs: vec![],
                states: vec![],
                first_seen: Stamp(100 * S),
                last_seen: Stamp(150 * S),
                opened_at: Stamp(100 * S),
                closed_at: None,
                end: None,
            }),
        )
    };
    let drift = |change: ChangeKind, t: i64| {
        f.make(
            Stamp(t * S),
            &["web1", &t.to_string()],
            RecordBody::Drift(Drift {
                jid: t.to_string(),
                minion: "web1".into(),
                fun: "state.apply".into(),
                change,
                repo: "states".into(),
                commit: "c1".into(),
                states: vec![DriftedState {
                    sls: "web".into(),
                    state_id: "motd".into(),
                    function: "file.managed".into(),
                    name: "/etc/motd".into(),
                    change,
                    summary: String::new(),
                }],
                states_not_listed: 0,
                changed_not_read: 0,
                intentional: 0,
                unsettled: 0,
                never_settles: 0,
                trimmed: None,
                context: Default::default(),
            }),
        )
    };
    store
        .write(&rows(&[
            incident(EpisodeStatus::Open, 0),
            drift(ChangeKind::Detected, 160),
        ]))
        .unwrap();
    let reader = Store::open_reader(&path).expect("read");
    let now = Stamp(200 * S);
    let found = status(&reader, now).unwrap();
    assert_eq!(found.incidents.len(), 1);
    assert_eq!(found.absent.len(), 1, "{:?}", found.absent);
    assert_eq!(
        (found.absent[0].minion.as_str(), found.absent[0].streak),
        ("c", 2)
    );
    assert_eq!(
        found.drift_detected,
        vec![("web1".to_owned(), "web:motd".to_owned())]
    );
    assert_eq!(found.wrong().len(), 3, "{:?}", found.wrong());
    assert_eq!(found.newest.as_deref(), Some("1970-01-01T00:02:40.000000Z"));
    // The incident closes, c returns, a highstate puts web1's motd back.
    let back = f.make(
        Stamp(170 * S),
        &["2", "c"],
        RecordBody::MinionReturn(MinionReturn {
            jid: "2".into(),
            minion: "c".into(),
            fun: Some("test.ping".into()),
            retcode: Some(0),
            salt_success: Some(true),
            succeeded: true,
            context: Default::default(),
            schedule: None,
            duration_ms: Some(10),
            states: None,
            trimmed: None,
            return_trace: None,
        }),
    );
    store
        .write(&rows(&[
            incident(EpisodeStatus::Closed, 1),
            back,
            drift(ChangeKind::Corrected, 180),
        ]))
        .unwrap();
    let found = status(&reader, now).unwrap();
    assert_eq!(found.wrong(), Vec::<String>::new(), "{found:?}");
    assert_eq!(
        incidents(&reader, Stamp(0)).unwrap()[0].status,
        EpisodeStatus::Closed
    );
}

/// A schema 1 store (a row per record, as saltsight wrote until the
/// history kept verdicts per job) is read into the current schema (through
/// schema 2, whose failures were rows) when the agent opens it; the query
/// commands ask for the agent first.
#[test]
fn a_schema_1_history_is_upgraded_in_place_and_answers_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old.db"), dir.path().join("new.db"));
    let f = RecordFactory::new("m");
    let records: Vec<Record> = [("1", 100), ("2", 200)]
        .iter()
        .flat_map(|(jid, t)| a_job(&f, jid, *t))
        .collect();
    {
        let v1 = rusqlite::Connection::open(&old).unwrap();
        v1.execute_batch(
            "CREATE TABLE records (id TEXT PRIMARY KEY, kind TEXT NOT NULL, at INTEGER NOT NULL,
                 jid TEXT, minion TEXT, fingerprint TEXT, commit_id TEXT, fun TEXT, record TEXT NOT NULL);
             CREATE INDEX records_at ON records(at);
             CREATE INDEX records_jid ON records(jid) WHERE jid IS NOT NULL;
             PRAGMA user_version = 1;",
        )
        .unwrap();
        for r in &records {
            let row = Row::of(r, &serde_json::to_vec(r).unwrap());
            v1.execute(
                "INSERT INTO records VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                rusqlite::params![
                    row.id,
                    row.kind,
                    row.at,
                    row.jid,
                    row.minion,
                    row.fingerprint,
                    row.commit,
                    row.fun,
                    row.json
                ],
            )
            .unwrap();
        }
        v1.execute(
            "INSERT INTO records (id, kind, at, record) VALUES ('x', 'minion_return', 1, 'not json')",
            [],
        )
        .unwrap();
    }
    match Store::open_reader(&old) {
        Err(HistoryError::Older { found: 1, .. }) => {}
        other => panic!("a schema 1 store read as {:?}", other.map(|_| ())),
    }
    drop(Writer::open(&old).expect("upgraded"));
    Writer::open(&new).unwrap().write(&rows(&records)).unwrap();
    let (old, new) = (
        Store::open_reader(&old).expect("upgraded"),
        Store::open_reader(&new).unwrap(),
    );
    for jid in ["1", "2"] {
        let (a, b) = (job(&old, jid).unwrap(), job(&new, jid).unwrap());
        assert!(a.as_ref().is_some_and(|a| a.expected == 3), "{a:?}");
        assert_eq!(a, b);
    }
    for name in ["b", "c"] {
        assert_eq!(
            minion(&old, name, 10).unwrap(),
            minion(&new, name, 10).unwrap()
        );
    }
    assert_eq!(
        minion(&old, "b", 10).unwrap().map(|b| b.failures.len()),
        Some(1),
        "its failure was carried over"
    );
    assert_eq!(old.figures().unwrap().rows, new.figures().unwrap().rows);
}

/// A failure that recurs across a job's minions is kept once in the batch,
/// and every minion's failure still names what its own record said.
#[test]
fn a_cause_shared_by_a_jobs_minions_is_kept_once_and_each_minion_keeps_its_own() {
    let f = RecordFactory::new("m");
    let mut records: Vec<Record> = (0..40)
        .map(|i| a_failure(&f, "7", &format!("m{i:02}"), Stamp((100 + i) * S)))
        .collect();
    // Minions 0..30 fail alike; 30..40 each in their own words.
    for r in &mut records[..30] {
        if let RecordBody::StateFailure(sf) = &mut r.body {
            sf.state.make_mut().comment = "nginx did not install".into();
        }
    }
    // Then one fails as the last did (a recent cause), and one as the first
    // thirty did, past the causes a failure is looked for among.
    let mut again = |minion: &str, comment: &str| {
        let mut r = a_failure(&f, "7", minion, Stamp(200 * S));
        if let RecordBody::StateFailure(sf) = &mut r.body {
            sf.state.make_mut().comment = comment.into();
        }
        records.push(r);
    };
    again("m40", "nginx did not install on m39");
    again("m41", "nginx did not install");
    let batch = rows(&records);
    assert_eq!(batch.verdicts.len(), 1);
    let job = &batch.verdicts[0];
    assert_eq!(
        job.causes.len(),
        12,
        "one shared, ten of their own, one again"
    );
    assert_eq!(job.failures.len(), 42);
    for (r, (minion, at, cause)) in records.iter().zip(&job.failures) {
        let RecordBody::StateFailure(sf) = &r.body else {
            unreachable!("made as failures")
        };
        assert_eq!((minion, *at), (&sf.minion, r.at));
        let kept = &job.causes[*cause as usize];
        assert_eq!(kept, &FailedState::of(sf), "{minion}");
    }
    let dir = tempfile::tempdir().unwrap();
    let mut store = Writer::open(&dir.path().join("history.db")).expect("open");
    assert_eq!(store.write(&batch).unwrap(), 42);
}

/// A history's directory made here is the agent group's (0750); one that was
/// there keeps its mode (`replay --history /tmp/x.db` left `/tmp` 0750).
#[test]
fn a_directory_that_was_there_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().expect("tempdir");
    let shared = root.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    Store::open_to_write(&shared.join("history.db")).expect("opens");
    let mode =
        |dir: &std::path::Path| std::fs::metadata(dir).expect("stat").permissions().mode() & 0o7777;
    assert_eq!(mode(&shared), 0o1777, "a directory that was there");
    let made = root.path().join("made/state");
    Store::open_to_write(&made.join("history.db")).expect("opens");
    assert_eq!(mode(&made), 0o750, "a directory made for it");
}
