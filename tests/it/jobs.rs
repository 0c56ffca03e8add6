//! Job tracking on the captures, through `saltsight replay` on event time
//! (`support::replay`): every missing minion named with its jid and reason, exactly; late
//! returns amend their job; CLI bookkeeping (find_job) is not a user job.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::support::replay::{of_kind, replay};

/// (jid, minion, reason) of every `minion_missing`; a minion judged twice in one
/// job fails the test.
fn missing(records: &[Value]) -> BTreeSet<(String, String, String)> {
    let all: Vec<(String, String, String)> = of_kind(records, "minion_missing")
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("jid"), s("minion"), s("reason"))
        })
        .collect();
    let judged: BTreeSet<(&str, &str)> = all
        .iter()
        .map(|(j, m, _)| (j.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        judged.len(),
        all.len(),
        "a minion was judged twice: {all:?}"
    );
    all.into_iter().collect()
}

fn set(items: &[(&str, &str, &str)]) -> BTreeSet<(String, String, String)> {
    items
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

fn completed<'a>(records: &'a [Value], jid: &str) -> Vec<&'a Value> {
    of_kind(records, "job_completed")
        .into_iter()
        .filter(|r| r["jid"] == jid)
        .collect()
}

#[test]
fn a_minion_killed_mid_job_and_restarted_is_minion_restarted() {
    // db1 was SIGKILLed 3 s into `test.sleep 20` and restarted at +38 s, inside the
    // default 10 min deadline; find_job jobs asked about it and got no answer.
    let records = replay("3008.3_ipc_minion_sigkill_mid_job", "");
    assert_eq!(
        missing(&records),
        set(&[("20261121193400660690", "db1", "minion_restarted")])
    );
    let done = completed(&records, "20261121193400660690");
    assert_eq!(done.len(), 1);
    assert_eq!(
        (done[0]["expected"].as_u64(), done[0]["returned"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(
        done[0]["missing"],
        serde_json::json!({"minion_restarted": 1})
    );
    // The salt CLI's three find_job jobs are not user jobs.
    assert_eq!(of_kind(&records, "job_published").len(), 1);
}

#[test]
fn minions_still_running_at_the_deadline_are_running_past_deadline_then_late() {
    // With an 18 s deadline, web1 and web2 had answered find_job "running" (at +5 s
    // and +15 s) and return at +20 s; db1 never answered anything.
    let records = replay(
        "3008.3_ipc_minion_sigkill_mid_job",
        "[jobs]\ndeadlines = { \"test.sleep\" = \"18s\" }",
    );
    let jid = "20261121193400660690";
    assert_eq!(
        missing(&records),
        set(&[
            (jid, "db1", "no_response"),
            (jid, "web1", "running_past_deadline"),
            (jid, "web2", "running_past_deadline")
        ])
    );
    let late: BTreeSet<&str> = of_kind(&records, "late_return")
        .iter()
        .filter_map(|r| r["minion"].as_str())
        .collect();
    assert_eq!(late, BTreeSet::from(["web1", "web2"]));
    let revisions: Vec<u64> = completed(&records, jid)
        .iter()
        .filter_map(|r| r["revision"].as_u64())
        .collect();
    assert_eq!(revisions, vec![0, 1, 2]);
    let last = completed(&records, jid)[2];
    assert_eq!(last["missing"], serde_json::json!({"no_response": 1}));
    assert_eq!(last["returned"], 2);
}

#[test]
fn a_hung_minion_is_no_response_then_its_late_return_amends_the_job() {
    // web2 was SIGSTOPped 2 s into `test.sleep 8`, answered no find_job, and returned
    // at +29.3 s after SIGCONT: past a 20 s deadline.
    let records = replay(
        "3008.3_ipc_minion_sigstop_hang",
        "[jobs]\ndeadlines = { \"test.sleep\" = \"20s\" }",
    );
    let jid = "20261121193554332166";
    assert_eq!(missing(&records), set(&[(jid, "web2", "no_response")]));
    let late = of_kind(&records, "late_return");
    assert_eq!(late.len(), 1);
    assert_eq!(
        (late[0]["jid"].as_str(), late[0]["minion"].as_str()),
        (Some(jid), Some("web2"))
    );
    assert!(
        late[0]["duration_ms"]
            .as_u64()
            .is_some_and(|ms| (29_000..30_000).contains(&ms)),
        "{}",
        late[0]
    );
    let done = completed(&records, jid);
    assert_eq!(done.len(), 2, "the verdict, then its amendment");
    assert_eq!(
        (done[1]["revision"].as_u64(), done[1]["returned"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(done[1]["missing"], serde_json::json!({}));
    // The same 20 s job, at the default 10 min deadline: nothing is missing.
    assert!(missing(&replay("3008.3_ipc_minion_sigstop_hang", "")).is_empty());
}

#[test]
fn a_stopped_minion_is_no_response_and_an_unknown_one_not_connected() {
    let records = replay(
        "3008.3_ipc_minion_stopped_before_publish",
        "[jobs]\ndeadlines = { \"test.ping\" = \"15s\" }",
    );
    assert_eq!(
        missing(&records),
        set(&[
            ("20261121193506755834", "ghost1", "not_connected"),
            ("20261121193506755834", "db1", "no_response"),
            ("20261121193522364634", "db1", "no_response"),
        ])
    );
}

#[test]
fn scheduled_runs_that_failed_states_are_failures_although_salt_says_success() {
    let records = replay("3008.3_ipc_schedule", "");
    let scheduled: Vec<&Value> = of_kind(&records, "minion_return")
        .into_iter()
        .filter(|r| r["run_kind"] == "scheduled")
        .collect();
    assert_eq!(scheduled.len(), 6);
    let web1: Vec<&&Value> = scheduled
        .iter()
        .filter(|r| r["schedule"] == "lab_sched")
        .collect();
    assert_eq!(web1.len(), 3);
    for r in web1 {
        assert_eq!(
            (
                r["salt_success"].as_bool(),
                r["succeeded"].as_bool(),
                r["retcode"].as_i64()
            ),
            (Some(true), Some(false), Some(2))
        );
        assert_eq!(r["states"]["failed"], 2);
    }
    assert!(
        scheduled
            .iter()
            .filter(|r| r["schedule"] == "lab_ping")
            .all(|r| r["succeeded"] == true)
    );
}

#[test]
fn a_find_job_answer_decides_between_running_past_the_deadline_and_returned() {
    // db1 answered the CLI's find_job at +5 s ("running") and returned at +7.4 s:
    // past a 6 s deadline it was running; within the default one it returned.
    let records = replay(
        "3008.3_ipc_pkg_missing",
        "[jobs]\ndeadlines = { \"state.*\" = \"6s\" }",
    );
    let jid = "20261121193321720484";
    assert_eq!(
        missing(&records),
        set(&[(jid, "db1", "running_past_deadline")])
    );
    let records = replay("3008.3_ipc_pkg_missing", "");
    assert!(missing(&records).is_empty());
    let done = completed(&records, jid);
    assert_eq!(
        (done[0]["returned"].as_u64(), done[0]["failed"].as_u64()),
        (Some(3), Some(3))
    );
}

#[test]
fn metadata_from_publish_reaches_the_completed_job() {
    let records = replay("3008.3_ipc_metadata", "");
    let done = completed(&records, "20261121193347520181");
    assert_eq!(done[0]["metadata"], serde_json::json!({"release": "r42"}));
    let rets = of_kind(&records, "minion_return");
    assert!(
        rets.iter()
            .filter(|r| r["jid"] == "20261121193347520181")
            .all(|r| r["metadata"]["release"] == "r42")
    );
}

#[test]
fn runner_jobs_are_published_and_completed() {
    let records = replay("3008.3_ipc_runner", "");
    let runners = of_kind(&records, "job_completed");
    assert_eq!(runners.len(), 4);
    assert!(
        runners
            .iter()
            .all(|r| r["run_kind"] == "runner" && r["succeeded"] == 1)
    );
}

#[test]
fn no_capture_without_a_lost_minion_reports_one_and_ids_are_unique() {
    let quiet = [
        "3006.25_ipc_ping_and_fail",
        "3006.30_ipc_ping_and_fail",
        "3006.30_tcp_ping_and_fail",
        "3007.17_ipc_ping_and_fail",
        "3008.3_ipc_big_highstate",
        "3008.3_ipc_big_trimmed",
        "3008.3_ipc_cmd_run_fail",
        "3008.3_ipc_cmd_run_ok",
        "3008.3_ipc_file_missing_source",
        "3008.3_ipc_highstate",
        "3008.3_ipc_key_events",
        "3008.3_ipc_master_restart",
        "3008.3_ipc_render_jinja_error",
        "3008.3_ipc_render_yaml_error",
        "3008.3_ipc_state_apply_fail",
        "3008.3_ipc_state_apply_ok",
        "3008.3_ipc_state_events",
        "3008.3_ipc_test_ping",
        "3008.3_tcp_ping_and_fail",
    ];
    for capture in quiet {
        let records = replay(capture, "");
        assert!(
            missing(&records).is_empty(),
            "{capture}: {:?}",
            missing(&records)
        );
        let ids: BTreeSet<&str> = records.iter().filter_map(|r| r["id"].as_str()).collect();
        assert_eq!(
            ids.len(),
            records.len(),
            "{capture}: record ids must be unique"
        );
        for r in &records {
            assert_eq!(
                (r["schema_version"].as_u64(), r["master"].as_str()),
                (
                    Some(u64::from(saltsight::record::SCHEMA_VERSION)),
                    Some("lab")
                ),
                "{capture}"
            );
        }
        for done in of_kind(&records, "job_completed")
            .iter()
            .filter(|r| r["run_kind"] == "published")
        {
            assert_eq!(done["expected"], done["returned"], "{capture}: {done}");
        }
    }
}

#[test]
fn render_errors_are_failures_with_no_state_counts() {
    let records = replay("3008.3_ipc_render_yaml_error", "");
    let rets = of_kind(&records, "minion_return");
    assert_eq!(rets.len(), 3);
    assert!(
        rets.iter()
            .all(|r| r["succeeded"] == false && r["retcode"] == 1 && r.get("states").is_none())
    );
}
