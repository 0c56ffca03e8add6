//! The view's model, fed records by hand: returns against expected, verdicts, groups, bounds.

use std::collections::BTreeMap;

use super::*;
use crate::record::{
    BusGapRecord, Category, ChangeKind, Classification, CommandOutput, Correlation, Drift,
    DriftedState, FailureGroup, JobCompleted, JobPublished, MinionMissing, MinionReturn,
    MissingEvidence, RecordFactory,
};

pub(in crate::cli::top) fn at(s: i64) -> Stamp {
    Stamp(1_800_000_000_000_000 + s * 1_000_000)
}

pub(in crate::cli::top) fn record(t: i64, body: RecordBody) -> Record {
    RecordFactory::new("m").make(at(t), &[&t.to_string()], body)
}

pub(in crate::cli::top) fn published(jid: &str, minions: &[&str]) -> RecordBody {
    RecordBody::JobPublished(Box::new(JobPublished {
        jid: jid.into(),
        fun: "test.sleep".into(),
        arg: None,
        tgt: vec!["*".into()],
        tgt_type: Some("glob".into()),
        user: Some("root".into()),
        expected: minions.iter().map(|m| (*m).into()).collect(),
        expected_count: u32::try_from(minions.len()).expect("few"),
        not_connected: Vec::new(),
        deadline: at(8),
        context: Default::default(),
        commits: BTreeMap::new(),
        batch: None,
    }))
}

pub(in crate::cli::top) fn returned(jid: &str, minion: &str, succeeded: bool) -> RecordBody {
    RecordBody::MinionReturn(MinionReturn {
        jid: jid.into(),
        minion: minion.into(),
        fun: Some("test.sleep".into()),
        retcode: Some(if succeeded { 0 } else { 1 }),
        salt_success: Some(succeeded),
        succeeded,
        context: Default::default(),
        schedule: None,
        duration_ms: Some(3000),
        states: None,
        trimmed: None,
        return_trace: None,
    })
}

pub(in crate::cli::top) fn missing(jid: &str, minion: &str) -> RecordBody {
    RecordBody::MinionMissing(MinionMissing {
        jid: jid.into(),
        minion: minion.into(),
        fun: "test.sleep".into(),
        reason: MissingReason::NotConnected,
        evidence: MissingEvidence::NewEventMissing,
        disconnected_at: None,
        address: None,
        missing_since: None,
        streak: 1,
        published_at: at(0),
        deadline: at(8),
        during_master_pressure: None,
        context: Default::default(),
    })
}

pub(in crate::cli::top) fn completed(
    jid: &str,
    returned: u32,
    failed: u32,
    missing: u32,
) -> RecordBody {
    RecordBody::JobCompleted(JobCompleted {
        jid: jid.into(),
        fun: "test.sleep".into(),
        tgt: vec!["*".into()],
        expected: returned + missing,
        returned,
        succeeded: returned - failed,
        failed,
        missing: if missing > 0 {
            BTreeMap::from([(MissingReason::NotConnected, missing)])
        } else {
            BTreeMap::new()
        },
        published_at: at(0),
        duration_ms: 8000,
        first_return_ms: Some(3000),
        revision: 0,
        evicted: false,
        during_master_pressure: None,
        context: Default::default(),
        batch: None,
    })
}

fn group(jid: &str, fingerprint: &str, count: u32, minions: &[&str]) -> RecordBody {
    RecordBody::FailureGroup(Box::new(FailureGroup {
        jid: jid.into(),
        fingerprint: fingerprint.into(),
        sls: Some("web".into()),
        pillar: false,
        state_id: Some("nginx".into()),
        function: Some("pkg.installed".into()),
        cause: Classification {
            category: Category::DependencyPackage,
            rule: "apt".into(),
            evidence: None,
            host: None,
            url: None,
            package: None,
        },
        comment: "E: Unable to locate package nginx".into(),
        comment_len: 33,
        normalised: "unable to locate package".into(),
        output: CommandOutput::default(),
        count,
        minions: minions.iter().map(|m| (*m).to_owned()).collect(),
        first_seen_jid: jid.into(),
        first_seen_at: at(0),
        revision: 0,
        incident: None,
        context: Default::default(),
        correlation: Correlation::default().into(),
    }))
}

#[test]
fn returns_arrive_against_expected_then_the_job_closes_with_its_verdicts() {
    let mut m = Model::new(Limits::default());
    m.apply(&record(0, published("1", &["web1", "web2", "db1"])));
    m.apply(&record(3, returned("1", "web1", true)));
    m.apply(&record(3, returned("1", "web2", false)));
    let job = m.jobs().next().expect("in flight");
    assert_eq!((job.expected, job.returned, job.failed), (3, 2, 1));
    assert!(job.is_open());
    assert_eq!(job.age_micros(at(5)), 5_000_000);
    assert_eq!(m.in_flight(), 1);

    m.apply(&record(8, missing("1", "db1")));
    m.apply(&record(8, completed("1", 2, 1, 1)));
    assert_eq!(m.in_flight(), 0);
    let job = m.jobs().next().expect("closed");
    assert!(!job.is_open());
    assert_eq!((job.returned, job.missing), (2, 1));
    assert_eq!(
        job.age_micros(at(100)),
        8_000_000,
        "a closed job's age is its duration"
    );
    let verdicts: Vec<_> = m.verdicts().collect();
    assert_eq!(verdicts.len(), 2, "{verdicts:?}");
    assert_eq!(verdicts[0].minion, "db1");
    assert_eq!(
        verdicts[0].kind,
        VerdictKind::Missing {
            reason: "not_connected".into(),
            evidence: "new_event_missing".into()
        }
    );
    assert_eq!(verdicts[1].kind, VerdictKind::Failed { retcode: Some(1) });
    assert_eq!(m.behind_micros(at(10)), Some(2_000_000));
}

#[test]
fn a_return_for_an_unseen_publication_opens_the_job() {
    let mut m = Model::new(Limits::default());
    m.apply(&record(1, returned("7", "web1", true)));
    let job = m.jobs().next().expect("opened");
    assert_eq!((job.jid.as_str(), job.expected, job.returned), ("7", 0, 1));
}

#[test]
fn in_flight_jobs_list_before_closed_ones_newest_first() {
    let mut m = Model::new(Limits::default());
    for jid in ["1", "2", "3"] {
        m.apply(&record(0, published(jid, &["web1"])));
    }
    m.apply(&record(1, completed("2", 1, 0, 0)));
    let order: Vec<&str> = m.jobs().map(|j| j.jid.as_str()).collect();
    assert_eq!(order, ["3", "1", "2"]);
}

#[test]
fn groups_add_up_across_jobs_and_a_revision_replaces_its_jobs_count() {
    let mut m = Model::new(Limits::default());
    m.apply(&record(1, group("1", "f", 2, &["web1", "web2"])));
    m.apply(&record(2, group("2", "f", 1, &["db1"])));
    m.apply(&record(3, group("1", "f", 3, &["web1", "web2", "web3"])));
    m.apply(&record(4, group("2", "g", 1, &["db1"])));
    let groups: Vec<_> = m.groups().collect();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].fingerprint, "g", "most recently seen first");
    assert_eq!(groups[1].count(), 4);
    assert_eq!(groups[1].minions, ["db1", "web1", "web2", "web3"]);
    assert_eq!(groups[1].place, "web:nginx");
    assert_eq!(groups[1].category, "dependency.package");
}

#[test]
fn every_list_is_bounded_and_what_it_drops_is_counted() {
    let limits = Limits {
        in_flight: 2,
        closed: 1,
        verdicts: 2,
        groups: 1,
    };
    let mut m = Model::new(limits);
    for jid in ["1", "2", "3"] {
        m.apply(&record(0, published(jid, &["web1"])));
    }
    assert_eq!(m.in_flight(), 2);
    assert_eq!(m.jobs().map(|j| j.jid.as_str()).last(), Some("2"));
    m.apply(&record(1, completed("2", 1, 0, 0)));
    m.apply(&record(1, completed("3", 1, 0, 0)));
    assert_eq!(m.jobs().count(), 1);
    for minion in ["a", "b", "c"] {
        m.apply(&record(1, returned("9", minion, false)));
    }
    assert_eq!(m.verdicts().count(), 2);
    m.apply(&record(1, group("1", "f", 1, &["a"])));
    m.apply(&record(1, group("1", "g", 1, &["a"])));
    assert_eq!(m.groups().count(), 1);
    assert!(m.dropped >= 4, "{}", m.dropped);
}

#[test]
fn a_bus_gap_is_kept_with_its_reason() {
    let mut m = Model::new(Limits::default());
    m.apply(&record(
        5,
        RecordBody::BusGap(BusGapRecord {
            reason: "disconnected",
            started_at: at(3),
            ended_at: at(5),
            duration_ms: 2000,
            dropped_frames: 0,
        }),
    ));
    assert_eq!(m.gaps, 1);
    let gap = m.last_gap.as_ref().expect("gap");
    assert_eq!(
        (gap.reason.as_str(), gap.duration_ms),
        ("disconnected", 2000)
    );
}

#[test]
fn drift_falls_among_the_verdicts() {
    let mut model = Model::new(Limits::default());
    let state = |id: &str| DriftedState {
        sls: "web".into(),
        state_id: id.into(),
        function: "file.managed".into(),
        name: format!("/etc/{id}"),
        change: ChangeKind::Corrected,
        summary: "-by hand".into(),
    };
    let drift = Drift {
        jid: "j1".into(),
        minion: "web1".into(),
        fun: "state.highstate".into(),
        change: ChangeKind::Corrected,
        repo: "states".into(),
        commit: "c1".into(),
        states: vec![state("motd"), state("issue")],
        states_not_listed: 1,
        changed_not_read: 0,
        intentional: 0,
        unsettled: 0,
        never_settles: 0,
        trimmed: None,
        context: Default::default(),
    };
    let record = RecordFactory::new("m").make(Stamp(5), &["j1", "web1"], RecordBody::Drift(drift));
    model.apply(&record);
    let verdicts: Vec<&Verdict> = model.verdicts().collect();
    assert_eq!(verdicts.len(), 1);
    assert_eq!(
        verdicts[0].kind,
        VerdictKind::Drift {
            change: "corrected".into(),
            state: "web:motd file.managed".into(),
            states: 3
        }
    );
}
