//! `salt -b` batches on the captures (issue 68): one job for the whole batch
//! with every minion's verdict, each return counted once, and the minions
//! the batch never sent to named with why; on 3008.3 (one jid, batch events)
//! and 3006.25 (a jid per sub-batch).

use serde_json::Value;

use crate::support::replay::{of_kind, replay};

/// The batch's `job_completed`: the one with a `batch`.
fn batch_job(records: &[Value]) -> &Value {
    let mut batches = of_kind(records, "job_completed")
        .into_iter()
        .filter(|r| r.get("batch").is_some());
    let job = batches.next().expect("a batch's job_completed");
    assert!(batches.next().is_none(), "one batch, one job");
    job
}

/// (minion, succeeded) of every return counted in `jid`.
fn returns(records: &[Value], jid: &str) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = of_kind(records, "minion_return")
        .into_iter()
        .filter(|r| r["jid"] == jid)
        .map(|r| {
            (
                r["minion"].as_str().unwrap_or_default().to_owned(),
                r["succeeded"].as_bool().unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

/// (minion, reason, evidence) of `jid`'s verdicts.
fn verdicts(records: &[Value], jid: &str) -> Vec<(String, String, String)> {
    let mut out: Vec<_> = of_kind(records, "minion_missing")
        .into_iter()
        .filter(|r| r["jid"] == jid)
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("minion"), s("reason"), s("evidence"))
        })
        .collect();
    out.sort();
    out
}

fn counts(job: &Value) -> (u64, u64, u64, u64) {
    let n = |k: &str| job[k].as_u64().unwrap_or(u64::MAX);
    (n("expected"), n("returned"), n("succeeded"), n("failed"))
}

fn names(list: &[(&str, bool)]) -> Vec<(String, bool)> {
    list.iter().map(|(m, s)| (m.to_string(), *s)).collect()
}

fn triple(m: &str, r: &str, e: &str) -> (String, String, String) {
    (m.into(), r.into(), e.into())
}

#[test]
fn a_failing_batch_is_one_job_with_every_minion_failed_on_3008_and_3006() {
    for capture in [
        "3008.3_ipc_batch_state_apply_fail",
        "3006.25_ipc_batch_state_apply_fail",
    ] {
        let records = replay(capture, "");
        let job = batch_job(&records);
        let jid = job["jid"].as_str().expect("jid");
        assert_eq!(
            counts(job),
            (3, 3, 0, 3),
            "{capture}: Salt reports 3 failed"
        );
        assert_eq!(job["batch"]["sub_batches"], 3, "{capture}");
        assert_eq!(job["batch"]["ended"], "complete", "{capture}");
        assert_eq!(
            returns(&records, jid),
            names(&[("db1", false), ("web1", false), ("web2", false)]),
            "{capture}: every return in the batch's job, once"
        );
        let groups = of_kind(&records, "failure_group");
        assert_eq!(groups.len(), 1, "{capture}: one root cause");
        assert_eq!(groups[0]["jid"], jid, "{capture}");
        assert_eq!(groups[0]["count"], 3, "{capture}: all three minions");
    }
    // 3006.25: the later sub-batches' own jids are the batch's.
    let records = replay("3006.25_ipc_batch_state_apply_fail", "");
    assert_eq!(
        batch_job(&records)["batch"]["sub_jids"],
        serde_json::json!(["20261207042759687806", "20261207042800100245"])
    );
}

#[test]
fn a_minion_that_missed_the_batchs_ping_is_named_never_sent() {
    for capture in [
        "3008.3_ipc_batch_db1_down_state_apply_ok",
        "3006.25_ipc_batch_db1_down_state_apply_ok",
        "3008.3_ipc_batch_async_cli_db1_down_test_ping",
    ] {
        let records = replay(capture, "");
        let job = batch_job(&records);
        let jid = job["jid"].as_str().expect("jid");
        assert_eq!(counts(job), (3, 2, 2, 0), "{capture}");
        assert_eq!(
            job["missing"],
            serde_json::json!({"not_sent": 1}),
            "{capture}"
        );
        assert_eq!(
            verdicts(&records, jid),
            [triple("db1", "not_sent", "batch_ping_unanswered")],
            "{capture}"
        );
        assert!(job["batch"]["ping_jid"].is_string(), "{capture}");
    }
}

#[test]
fn a_halted_batch_names_the_minions_it_never_sent_to() {
    // --failhard on 3008.3: the first minion fails, the batch halts.
    let records = replay("3008.3_ipc_batch_failhard_state_apply_fail", "");
    let job = batch_job(&records);
    let jid = job["jid"].as_str().expect("jid");
    assert_eq!(counts(job), (3, 1, 0, 1));
    assert_eq!(job["batch"]["ended"], "halted");
    assert_eq!(job["batch"]["halted_reason"], "failhard");
    assert_eq!(
        verdicts(&records, jid),
        [
            triple("web1", "not_sent", "batch_halted"),
            triple("web2", "not_sent", "batch_halted"),
        ]
    );
    // `salt-run batch.stop` while db1 ran: its return still counts, the
    // others were never sent.
    let records = replay("3008.3_ipc_batch_sync_cli_batch_stop", "");
    let job = batch_job(&records);
    let jid = job["jid"].as_str().expect("jid");
    assert_eq!(counts(job), (3, 1, 1, 0));
    assert_eq!(job["batch"]["halted_reason"], "stop");
    assert_eq!(returns(&records, jid), names(&[("db1", true)]));
    assert_eq!(verdicts(&records, jid).len(), 2);
}

#[test]
fn a_refilled_window_counts_each_return_once() {
    for capture in [
        "3008.3_ipc_batch_b2_state_apply_slowvar",
        "3006.25_ipc_batch_b2_state_apply_slowvar",
    ] {
        let records = replay(capture, "");
        let job = batch_job(&records);
        let jid = job["jid"].as_str().expect("jid");
        assert_eq!(counts(job), (3, 3, 3, 0), "{capture}");
        assert_eq!(job["batch"]["size"], 2, "{capture}");
        assert_eq!(returns(&records, jid).len(), 3, "{capture}");
        assert!(verdicts(&records, jid).is_empty(), "{capture}");
    }
}

/// 3006.25 with --failhard: one sub-batch, then nothing. Nothing on the bus
/// says it was a batch, so it is one ordinary job of one minion (its queued
/// minions forgotten, not judged).
#[test]
fn a_lone_first_sub_batch_on_3006_is_an_ordinary_job() {
    let records = replay("3006.25_ipc_batch_failhard_state_apply_fail", "");
    assert!(
        of_kind(&records, "job_completed")
            .iter()
            .all(|r| r.get("batch").is_none())
    );
    let failed: Vec<&Value> = of_kind(&records, "job_completed")
        .into_iter()
        .filter(|r| r["fun"] == "state.apply")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(counts(failed[0]), (1, 1, 0, 1));
    assert!(of_kind(&records, "minion_missing").is_empty());
}
