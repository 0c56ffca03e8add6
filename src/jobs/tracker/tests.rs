//! Tests of the job tracker: verdicts, evidence, deadlines, caps.
use super::*;
use crate::event::{decode, salt_frame};
use crate::record::{MissingEvidence, RunKind, Trimmed};
use serde_json::json;

const S: i64 = 1_000_000;

struct Lab {
    tracker: JobTracker,
    out: Vec<Record>,
}

impl Lab {
    fn new(config: TrackerConfig) -> Self {
        Self {
            tracker: JobTracker::new(config, RecordFactory::new("m")),
            out: Vec::new(),
        }
    }

    /// Feeds one event whose `_stamp` is `t` seconds.
    fn feed(&mut self, t: i64, tag: &str, mut data: serde_json::Value) {
        data["_stamp"] = json!(Stamp(t * S).to_string());
        let frame = salt_frame(tag, &data, false);
        let event = decode(&frame).expect("decode");
        self.tracker.advance(Stamp(t * S), &mut self.out);
        self.tracker.on_event(&event, Stamp(t * S), &mut self.out);
    }

    fn new_job(&mut self, t: i64, jid: &str, fun: &str, arg: serde_json::Value, minions: &[&str]) {
        self.feed(t, &format!("salt/job/{jid}/new"), json!({"jid": jid, "fun": fun, "arg": arg, "minions": minions, "missing": [], "tgt": "*"}));
    }

    fn ret(&mut self, t: i64, jid: &str, minion: &str, fun: &str, ret: serde_json::Value) {
        self.feed(t, &format!("salt/job/{jid}/ret/{minion}"), json!({"jid": jid, "id": minion, "fun": fun, "return": ret, "retcode": 0, "success": true}));
    }

    fn missing(&self) -> Vec<(String, String, MissingReason)> {
        self.out
            .iter()
            .filter_map(|r| match &r.body {
                RecordBody::MinionMissing(m) => Some((m.jid.clone(), m.minion.clone(), m.reason)),
                _ => None,
            })
            .collect()
    }
}

fn short(fun: &str, secs: u64) -> TrackerConfig {
    TrackerConfig {
        deadlines: vec![(fun.into(), Duration::from_secs(secs))],
        ..TrackerConfig::default()
    }
}

#[test]
fn find_job_saying_not_running_without_a_return_is_lost() {
    let mut lab = Lab::new(short("test.sleep", 30));
    lab.new_job(0, "1", "test.sleep", json!([20]), &["a", "b"]);
    lab.ret(20, "1", "a", "test.sleep", json!(true));
    lab.new_job(25, "2", "saltutil.find_job", json!(["1"]), &["b"]);
    lab.ret(25, "2", "b", "saltutil.find_job", json!({}));
    lab.tracker.advance(Stamp(31 * S), &mut lab.out);
    assert_eq!(
        lab.missing(),
        vec![("1".into(), "b".into(), MissingReason::Lost)]
    );
    assert_eq!(
        lab.tracker.stats.jobs_published.get(),
        1,
        "find_job is not a user job"
    );
    assert_eq!(lab.tracker.open_jobs(), 0);
    assert_eq!(lab.tracker.expected_outstanding(), 0);
}

#[test]
fn a_gap_during_a_job_makes_its_missing_minions_unknown_and_hides_re_announcements() {
    let mut lab = Lab::new(short("test.sleep", 30));
    lab.new_job(0, "1", "test.sleep", json!([20]), &["a", "b"]);
    lab.tracker
        .on_gap(Stamp(5 * S), Stamp(8 * S), "disconnected", 0, &mut lab.out);
    // Every minion re-sends minion_start to a restarted master: not a restart.
    lab.feed(10, "minion_start", json!({"id": "b"}));
    lab.ret(20, "1", "a", "test.sleep", json!(true));
    lab.tracker.advance(Stamp(31 * S), &mut lab.out);
    assert_eq!(
        lab.missing(),
        vec![("1".into(), "b".into(), MissingReason::UnknownGap)]
    );
    assert_eq!(lab.tracker.stats.restarts_ignored_after_gap.get(), 1);
}

#[test]
fn a_start_after_publish_is_a_restart_and_verdicts_fire_at_the_deadline_not_before() {
    let mut lab = Lab::new(short("test.*", 30));
    lab.new_job(0, "1", "test.ping", json!([]), &["a"]);
    lab.feed(10, "salt/minion/a/start", json!({"id": "a"}));
    lab.tracker.advance(Stamp(30 * S - 1), &mut lab.out);
    assert!(lab.missing().is_empty());
    assert_eq!(lab.tracker.next_deadline(), Some(Stamp(30 * S)));
    lab.tracker.advance(Stamp(30 * S), &mut lab.out);
    assert_eq!(
        lab.missing(),
        vec![("1".into(), "a".into(), MissingReason::MinionRestarted)]
    );
    assert_eq!(lab.tracker.next_deadline(), None);
}

#[test]
fn the_longest_glob_wins_and_a_timeout_kwarg_extends_the_deadline() {
    let config = TrackerConfig {
        deadlines: vec![
            ("*".into(), Duration::from_secs(60)),
            ("state.*".into(), Duration::from_secs(1800)),
        ],
        ..TrackerConfig::default()
    };
    let mut lab = Lab::new(config);
    lab.new_job(0, "1", "state.apply", json!([]), &["a"]);
    lab.new_job(
        0,
        "2",
        "cmd.run",
        json!(["sleep 100", {"__kwarg__": true, "timeout": 300}]),
        &["a"],
    );
    lab.new_job(0, "3", "cmd.run", json!(["true"]), &["a"]);
    let deadlines: Vec<Stamp> = lab
        .out
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::JobPublished(p) => Some(p.deadline),
            _ => None,
        })
        .collect();
    assert_eq!(
        deadlines,
        vec![Stamp(1800 * S), Stamp(310 * S), Stamp(60 * S)]
    );
}

#[test]
fn caps_evict_and_count() {
    let config = TrackerConfig {
        max_jobs: 2,
        max_expected: 3,
        ..short("*", 100)
    };
    let mut lab = Lab::new(config);
    lab.new_job(0, "1", "test.ping", json!([]), &["a", "b"]);
    lab.new_job(1, "2", "test.ping", json!([]), &["a"]);
    // A third job: over max_jobs and over max_expected; job 1 goes first.
    lab.new_job(2, "3", "test.ping", json!([]), &["c"]);
    assert_eq!(lab.tracker.stats.evicted_jobs.get(), 1);
    assert_eq!(lab.tracker.open_jobs(), 2);
    assert_eq!(lab.tracker.expected_outstanding(), 2);
    let evicted: Vec<&JobCompleted> = lab
        .out
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::JobCompleted(c) if c.evicted => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(evicted.len(), 1);
    assert_eq!(evicted[0].jid, "1");
}

#[test]
fn returns_for_jobs_published_before_start_are_recorded_as_unknown() {
    let mut lab = Lab::new(TrackerConfig::default());
    lab.ret(5, "9", "a", "test.ping", json!(true));
    match &lab.out[0].body {
        RecordBody::MinionReturn(r) => {
            assert_eq!(
                (r.context.run_kind, r.duration_ms, r.succeeded),
                (RunKind::Unknown, None, true)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(lab.tracker.stats.unknown_job_returns.get(), 1);
}

#[test]
fn runners_without_a_return_are_bounded_oldest_first() {
    let mut lab = Lab::new(TrackerConfig {
        max_jobs: 2,
        ..TrackerConfig::default()
    });
    for (t, jid) in [(1, "r1"), (2, "r2"), (3, "r3")] {
        lab.feed(
            t,
            &format!("salt/run/{jid}/new"),
            json!({"jid": jid, "fun": "runner.test.sleep"}),
        );
    }
    assert_eq!(lab.tracker.stats.evicted_jobs.get(), 1);
    lab.out.clear();
    // r1 was forgotten: its return is still reported, timed from the return itself.
    lab.feed(
        9,
        "salt/run/r1/ret",
        json!({"jid": "r1", "fun": "runner.test.sleep", "success": true}),
    );
    lab.feed(
        9,
        "salt/run/r3/ret",
        json!({"jid": "r3", "fun": "runner.test.sleep", "success": true}),
    );
    let durations: Vec<u64> = lab
        .out
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::JobCompleted(c) => Some(c.duration_ms),
            _ => None,
        })
        .collect();
    assert_eq!(durations, vec![0, 6000]);
}

#[test]
fn a_minion_start_soon_after_a_master_restart_is_a_re_announcement_not_a_restart() {
    let mut lab = Lab::new(short("test.*", 30));
    lab.tracker
        .on_gap(Stamp(5 * S), Stamp(8 * S), "disconnected", 0, &mut lab.out);
    // Published after the gap: the job does not overlap it.
    lab.new_job(9, "1", "test.ping", json!([]), &["a"]);
    lab.feed(12, "minion_start", json!({"id": "a"}));
    lab.tracker.advance(Stamp(40 * S), &mut lab.out);
    assert_eq!(
        lab.missing(),
        vec![("1".into(), "a".into(), MissingReason::NoResponse)]
    );
    // A start long after the gap is a restart again.
    lab.new_job(100, "2", "test.ping", json!([]), &["a"]);
    lab.feed(110, "minion_start", json!({"id": "a"}));
    lab.tracker.advance(Stamp(131 * S), &mut lab.out);
    assert_eq!(
        lab.missing()[1],
        ("2".into(), "a".into(), MissingReason::MinionRestarted)
    );
}

#[test]
fn dropped_frames_do_not_hide_a_real_restart() {
    let mut lab = Lab::new(short("test.*", 30));
    lab.tracker
        .on_gap(Stamp(5 * S), Stamp(6 * S), "queue_full", 3, &mut lab.out);
    lab.new_job(7, "1", "test.ping", json!([]), &["a"]);
    lab.feed(10, "minion_start", json!({"id": "a"}));
    lab.tracker.advance(Stamp(40 * S), &mut lab.out);
    assert_eq!(
        lab.missing(),
        vec![("1".into(), "a".into(), MissingReason::MinionRestarted)]
    );
}

#[test]
fn a_gap_that_has_begun_stops_judgement_at_once() {
    let mut lab = Lab::new(short("test.*", 30));
    lab.new_job(0, "1", "test.ping", json!([]), &["a"]);
    // The connection is lost at 20 s; the wall clock passes the deadline before
    // the reader reconnects and reports the whole gap.
    lab.tracker.on_gap_start();
    lab.tracker.advance(Stamp(31 * S), &mut lab.out);
    assert_eq!(
        lab.missing(),
        vec![("1".into(), "a".into(), MissingReason::UnknownGap)]
    );
}

#[test]
fn the_earliest_deadline_is_evicted_not_the_oldest_job_and_without_verdicts() {
    let config = TrackerConfig {
        max_jobs: 2,
        deadlines: vec![
            ("state.*".into(), Duration::from_secs(1800)),
            ("test.*".into(), Duration::from_secs(30)),
        ],
        ..TrackerConfig::default()
    };
    let mut lab = Lab::new(config);
    lab.new_job(0, "old", "state.apply", json!([]), &["a"]);
    lab.new_job(1, "soon", "test.ping", json!([]), &["a"]);
    lab.new_job(2, "new", "test.ping", json!([]), &["b"]);
    let evicted: Vec<&str> = lab
        .out
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::JobCompleted(c) if c.evicted => Some(c.jid.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(evicted, vec!["soon"]);
    assert!(
        lab.missing().is_empty(),
        "saltsight stopped watching: no verdict"
    );
}

#[test]
fn a_job_larger_than_the_cap_alone_is_evicted_without_emptying_the_tracker() {
    let mut lab = Lab::new(TrackerConfig {
        max_expected: 3,
        ..short("*", 30)
    });
    lab.new_job(0, "small", "test.ping", json!([]), &["a", "b"]);
    lab.new_job(
        1,
        "huge",
        "test.ping",
        json!([]),
        &["a", "b", "c", "d", "e"],
    );
    assert_eq!(lab.tracker.open_jobs(), 1, "the small job is still tracked");
    assert_eq!(lab.tracker.expected_outstanding(), 2);
    assert_eq!(lab.tracker.stats.evicted_jobs.get(), 1);
    assert!(lab.missing().is_empty());
}

#[test]
fn a_repeated_new_after_every_return_does_not_reopen_the_job() {
    let mut lab = Lab::new(short("test.*", 30));
    lab.new_job(0, "1", "test.ping", json!([]), &["a"]);
    lab.ret(1, "1", "a", "test.ping", json!(true));
    lab.new_job(2, "1", "test.ping", json!([]), &["a"]);
    lab.tracker.advance(Stamp(40 * S), &mut lab.out);
    assert!(lab.missing().is_empty());
    assert_eq!(lab.tracker.open_jobs(), 0);
}

#[test]
fn a_late_first_return_fills_first_return_latency() {
    let mut lab = Lab::new(short("test.*", 30));
    lab.new_job(0, "1", "test.ping", json!([]), &["a"]);
    lab.tracker.advance(Stamp(31 * S), &mut lab.out);
    lab.ret(40, "1", "a", "test.ping", json!(true));
    let amended = lab
        .out
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::JobCompleted(c) if c.revision == 1 => Some(c),
            _ => None,
        })
        .next()
        .expect("amended job");
    assert_eq!(amended.first_return_ms, Some(40_000));
}

#[test]
fn a_running_answer_is_stale_once_a_later_find_job_goes_unanswered() {
    let mut lab = Lab::new(short("test.sleep", 30));
    lab.new_job(0, "1", "test.sleep", json!([60]), &["a", "b"]);
    // Both answer "running" at 5 s; at 15 s only b answers again (a was killed).
    lab.new_job(5, "f1", "saltutil.find_job", json!(["1"]), &["a", "b"]);
    lab.ret(
        5,
        "f1",
        "a",
        "saltutil.find_job",
        json!({"jid": "1", "fun": "test.sleep"}),
    );
    lab.ret(
        5,
        "f1",
        "b",
        "saltutil.find_job",
        json!({"jid": "1", "fun": "test.sleep"}),
    );
    lab.new_job(15, "f2", "saltutil.find_job", json!(["1"]), &["a", "b"]);
    lab.ret(
        15,
        "f2",
        "b",
        "saltutil.find_job",
        json!({"jid": "1", "fun": "test.sleep"}),
    );
    // A question asked just before the deadline cannot be held against anyone.
    lab.new_job(29, "f3", "saltutil.find_job", json!(["1"]), &["b"]);
    lab.tracker.advance(Stamp(30 * S), &mut lab.out);
    let mut verdicts = lab.missing();
    verdicts.sort();
    assert_eq!(
        verdicts,
        vec![
            ("1".into(), "a".into(), MissingReason::NoResponse),
            ("1".into(), "b".into(), MissingReason::RunningPastDeadline),
        ]
    );
}

fn published_context(lab: &Lab, jid: &str) -> JobContext {
    lab.out
        .iter()
        .find_map(|r| match &r.body {
            RecordBody::JobPublished(p) if p.jid == jid => Some((*p.context).clone()),
            _ => None,
        })
        .expect("job_published")
}

/// A job's records hold its one context, not a copy each: its JSON is made
/// once a job. A publish event that adds to it makes a new one for the
/// records after, and leaves those before as they were.
#[test]
fn a_jobs_records_share_its_one_context() {
    let mut lab = Lab::new(TrackerConfig::default());
    lab.new_job(0, "1", "test.ping", json!([]), &["a", "b", "c"]);
    lab.ret(1, "1", "a", "test.ping", json!(true));
    lab.feed(
        1,
        "salt/job/1/publish",
        json!({"jid": "1", "fun": "test.ping", "metadata": {"release": "r7"}}),
    );
    lab.ret(2, "1", "b", "test.ping", json!(true));
    lab.ret(3, "1", "c", "test.ping", json!(true));
    let contexts: Vec<&Shared<JobContext>> = lab
        .out
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::JobPublished(p) => Some(&p.context),
            RecordBody::MinionReturn(m) => Some(&m.context),
            RecordBody::JobCompleted(c) => Some(&c.context),
            _ => None,
        })
        .collect();
    assert_eq!(contexts.len(), 5, "published, three returns, completed");
    let same = |a: &Shared<JobContext>, b: &Shared<JobContext>| Arc::ptr_eq(a.arc(), b.arc());
    assert!(
        same(contexts[0], contexts[1]),
        "published and the first return"
    );
    assert!(
        contexts[1].metadata.is_none(),
        "as it was before the publish"
    );
    assert!(
        !same(contexts[1], contexts[2]),
        "the publish made a new one"
    );
    assert!(same(contexts[2], contexts[3]) && same(contexts[3], contexts[4]));
    assert_eq!(contexts[4].metadata, Some(json!({"release": "r7"})));
}

#[test]
fn run_kinds_come_from_the_user_an_orchestration_step_and_test_kwarg() {
    let mut lab = Lab::new(TrackerConfig {
        api_users: vec!["saltapi".into()],
        ..TrackerConfig::default()
    });
    let new = |jid: &str, user: &str, tgt: &str, arg: serde_json::Value| {
        (
            format!("salt/job/{jid}/new"),
            json!({"jid": jid, "fun": "state.sls", "arg": arg, "minions": ["a"], "missing": [], "tgt": tgt, "user": user}),
        )
    };
    let (tag, data) = new(
        "1",
        "root",
        "*",
        json!(["web", {"__kwarg__": true, "test": true}]),
    );
    lab.feed(1, &tag, data);
    let (tag, data) = new("2", "saltapi", "*", json!(["web"]));
    lab.feed(1, &tag, data);
    let (tag, data) = new("3", "Reactor", "*", json!(["web"]));
    lab.feed(1, &tag, data);
    // An orchestration step to `web*`, then a job to `web*` 1 s later.
    lab.feed(
        2,
        "salt/run/900/args",
        json!({"type": "state", "tgt": "web*", "name": "deploy", "args": {}}),
    );
    let (tag, data) = new("4", "root", "web*", json!(["web"]));
    lab.feed(3, &tag, data);
    // The step is used once; and a step 20 s old no longer counts.
    let (tag, data) = new("5", "root", "web*", json!(["web"]));
    lab.feed(3, &tag, data);
    lab.feed(
        4,
        "salt/run/901/args",
        json!({"type": "state", "tgt": "db*", "name": "db", "args": {}}),
    );
    let (tag, data) = new("6", "root", "db*", json!(["db"]));
    lab.feed(30, &tag, data);
    let kinds: Vec<(RunKind, bool, Option<String>)> = ["1", "2", "3", "4", "5", "6"]
        .iter()
        .map(|jid| {
            let c = published_context(&lab, jid);
            (c.run_kind, c.test, c.orchestration_jid)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (RunKind::Adhoc, true, None),
            (RunKind::Api, false, None),
            (RunKind::Reactor, false, None),
            (RunKind::Orchestrated, false, Some("900".into())),
            (RunKind::Adhoc, false, None),
            (RunKind::Adhoc, false, None),
        ]
    );
}

/// A job of 10,000 minions that none answer: its verdicts come a batch at a
/// time, every minion judged once, the job completed last; its missing minions
/// are remembered within `max_expected`.
#[test]
fn a_large_jobs_verdicts_come_in_bounded_batches() {
    let mut config = short("test.ping", 30);
    config.max_expected = 15_000;
    let mut lab = Lab::new(config);
    let names: Vec<String> = (0..10_000).map(|i| format!("m{i:05}")).collect();
    let minions: Vec<&str> = names.iter().map(String::as_str).collect();
    lab.new_job(0, "1", "test.ping", json!([]), &minions);
    lab.out.clear();
    lab.tracker.advance(Stamp(31 * S), &mut lab.out);
    assert_eq!(lab.out.len(), closing::VERDICT_BATCH);
    assert!(lab.tracker.has_more());
    let mut batches = 1;
    while lab.tracker.has_more() {
        let before = lab.out.len();
        lab.tracker.more(&mut lab.out);
        assert!(lab.out.len() - before <= closing::VERDICT_BATCH + 1);
        batches += 1;
    }
    assert_eq!(batches, 3);
    assert_eq!(lab.missing().len(), 10_000);
    assert!(matches!(
        lab.out.last().map(|r| &r.body),
        Some(RecordBody::JobCompleted(c)) if c.missing.get(&MissingReason::NoResponse) == Some(&10_000)
    ));
    assert_eq!(lab.tracker.drain_closed().len(), 1);
    // A second such job: the first is forgotten to keep 15,000 missing in all.
    lab.new_job(40, "2", "test.ping", json!([]), &minions);
    lab.tracker.advance(Stamp(71 * S), &mut lab.out);
    while lab.tracker.has_more() {
        lab.tracker.more(&mut lab.out);
    }
    assert_eq!(lab.tracker.stats.closed_jobs_forgotten.get(), 1);
    assert!(lab.tracker.context("1").is_none() && lab.tracker.context("2").is_some());
}

/// A scheduler's run and a salt-call run have no `new`: each is a job of its
/// own, completed by its one return, counted as what it is and not as a
/// return to an unseen job.
#[test]
fn scheduled_and_salt_call_returns_are_jobs_of_their_own() {
    let mut lab = Lab::new(TrackerConfig::default());
    lab.feed(1, "salt/job/20261124000001000001/ret/a", json!({"jid": "20261124000001000001", "id": "a", "fun": "state.apply", "schedule": "highstate", "return": {}, "retcode": 2, "success": true, "tgt": "a", "tgt_type": "glob"}));
    lab.feed(2, "salt/job/20261124000002000002/ret/b", json!({"jid": "20261124000002000002", "id": "b", "fun": "test.ping", "return": true, "retcode": 0, "tgt": ["b"], "tgt_type": "glob"}));
    let kinds: Vec<(&str, RunKind, u32, u32)> = lab
        .out
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::JobCompleted(c) => {
                Some((c.jid.as_str(), c.context.run_kind, c.succeeded, c.failed))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("20261124000001000001", RunKind::Scheduled, 0, 1),
            ("20261124000002000002", RunKind::Call, 1, 0),
        ]
    );
    assert_eq!(
        lab.out.len(),
        4,
        "a return and a completion each: {:?}",
        lab.out
    );
    let stats = &lab.tracker.stats;
    assert_eq!(
        (
            stats.scheduled_returns.get(),
            stats.salt_call_returns.get(),
            stats.unknown_job_returns.get()
        ),
        (1, 1, 0)
    );
    assert_eq!(lab.tracker.drain_closed().len(), 2);
}

/// A minion that misses job after job has a streak; the gauge counts minions
/// at three or more; a gap's unknown_gap neither counts nor breaks it; a
/// return ends it.
#[test]
fn a_minion_missing_job_after_job_has_a_streak_until_it_returns() {
    let mut lab = Lab::new(short("test.ping", 10));
    let streaks = |lab: &Lab| -> Vec<u32> {
        lab.out
            .iter()
            .filter_map(|r| match &r.body {
                RecordBody::MinionMissing(m) if m.minion == "b" => Some(m.streak),
                _ => None,
            })
            .collect()
    };
    for (i, t) in [0, 20, 40].into_iter().enumerate() {
        let jid = format!("{}", i + 1);
        lab.new_job(t, &jid, "test.ping", json!([]), &["a", "b"]);
        lab.ret(t + 1, &jid, "a", "test.ping", json!(true));
        lab.tracker.advance(Stamp((t + 11) * S), &mut lab.out);
    }
    assert_eq!(streaks(&lab), [1, 2, 3]);
    assert_eq!(lab.tracker.stats.minions_missing_repeatedly.get(), 1);
    lab.new_job(60, "4", "test.ping", json!([]), &["a", "b"]);
    lab.ret(61, "4", "b", "test.ping", json!(true));
    assert_eq!(lab.tracker.stats.minions_missing_repeatedly.get(), 0);
    lab.tracker.advance(Stamp(71 * S), &mut lab.out);
    lab.new_job(80, "5", "test.ping", json!([]), &["a", "b"]);
    lab.tracker.advance(Stamp(91 * S), &mut lab.out);
    assert_eq!(streaks(&lab), [1, 2, 3, 1]);
}

/// Salt's VALUE_TRIMMED: flagged and counted; a state run trimmed whole or by
/// state is never a success, a command's trimmed output keeps its retcode's word.
#[test]
fn a_trimmed_return_is_flagged_and_a_trimmed_state_run_never_succeeds() {
    let mut lab = Lab::new(TrackerConfig::default());
    lab.new_job(0, "1", "state.apply", json!([]), &["a", "b"]);
    lab.feed(1, "salt/job/1/ret/a", json!({"jid": "1", "id": "a", "fun": "state.apply", "return": "VALUE_TRIMMED", "retcode": 0, "success": true}));
    lab.feed(1, "salt/job/1/ret/b", json!({"jid": "1", "id": "b", "fun": "state.apply", "return": {"file_|-f_|-/f_|-managed": {"result": true, "changes": {"diff": "VALUE_TRIMMED"}}}, "retcode": 0, "success": true}));
    lab.new_job(2, "2", "cmd.run", json!(["yes | head -c 2000000"]), &["a"]);
    lab.feed(3, "salt/job/2/ret/a", json!({"jid": "2", "id": "a", "fun": "cmd.run", "return": "VALUE_TRIMMED", "retcode": 0, "success": true}));
    let returns: Vec<(String, String, bool, Option<Trimmed>)> = lab
        .out
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::MinionReturn(m) => Some((
                m.jid.to_string(),
                m.minion.to_string(),
                m.succeeded,
                m.trimmed,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        returns,
        [
            ("1".into(), "a".into(), false, Some(Trimmed::Return)),
            ("1".into(), "b".into(), true, Some(Trimmed::Values)),
            ("2".into(), "a".into(), true, Some(Trimmed::Return)),
        ]
    );
    assert_eq!(lab.tracker.stats.trimmed_returns.get(), 3);
}

mod intake;
mod presence;
