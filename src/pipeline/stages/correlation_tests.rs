//! A job's failures are made into records once: the minions failing alike
//! share one correlation and one statement of the state, its cause and its
//! output; a minion whose state flipped (it passed under an earlier HEAD)
//! has a correlation of its own, with the suspects between.

use serde_json::json;

use super::Stages;
use super::tests::{a_watched_tree, frame};
use crate::correlate::git::tests::commit;
use crate::event::decode;
use crate::record::{Record, RecordBody, Shared, StateFailure};

/// Minion `minion`'s return of job `jid` of state `web`, at `second`.
fn returned(jid: &str, minion: &str, second: u32, result: bool) -> Vec<u8> {
    frame(
        &format!("salt/job/{jid}/ret/{minion}"),
        json!({"jid": jid, "id": minion, "fun": "state.apply", "fun_args": ["web"],
            "retcode": if result { 0 } else { 2 }, "success": result,
            "_stamp": stamp(second),
            "return": {"cmd_|-broken_|-false_|-run": {"result": result,
                "comment": "Command \"false\" run", "__sls__": "web", "__id__": "broken",
                "__run_num__": 0, "changes": {"retcode": 1, "stderr": "", "stdout": ""},
                "name": "false"}}}),
    )
}

fn stamp(second: u32) -> String {
    format!("2026-11-27T10:00:{second:02}.000000+00:00")
}

/// The frames' records, in order.
fn records_of(stages: &mut Stages, frames: &[Vec<u8>]) -> Vec<Record> {
    let mut records = Vec::new();
    for f in frames {
        let event = decode(f).expect("decode");
        stages.on_event(&event, event.stamp.expect("stamped"), &mut records);
    }
    records
}

/// Job `jid` of state `web` on `minions`, each returning `result`: its records.
fn run(stages: &mut Stages, jid: &str, minions: &[&str], second: u32, result: bool) -> Vec<Record> {
    let mut frames = vec![frame(
        &format!("salt/job/{jid}/new"),
        json!({"jid": jid, "fun": "state.apply", "arg": ["web"], "tgt": "*", "tgt_type": "glob",
            "minions": minions, "missing": [], "user": "root", "_stamp": stamp(second)}),
    )];
    frames.extend(minions.iter().map(|m| returned(jid, m, second + 1, result)));
    records_of(stages, &frames)
}

fn failure_of<'a>(records: &'a [Record], minion: &str) -> &'a StateFailure {
    records
        .iter()
        .find_map(|r| match &r.body {
            RecordBody::StateFailure(f) if &*f.minion == minion => Some(&**f),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no state_failure of {minion}"))
}

fn same<T>(a: &Shared<T>, b: &Shared<T>) -> bool {
    std::ptr::eq::<T>(&**a, &**b)
}

#[test]
fn minions_failing_alike_share_their_parts_and_a_flip_has_its_own_correlation() {
    let (repo, config) = a_watched_tree();
    let mut stages = Stages::from_config(&config);
    run(&mut stages, "20261127100000000001", &["web1"], 0, true);
    commit(repo.path(), "web.sls", "a: 2\n", "web: second");
    let minions = ["web1", "web2", "web3"];
    let records = run(&mut stages, "20261127100000000002", &minions, 10, false);
    let [web1, web2, web3] = minions.map(|m| failure_of(&records, m));
    assert!(
        same(&web2.correlation, &web3.correlation),
        "one correlation for the job's failure"
    );
    let correlation = &web2.correlation;
    assert!(correlation.introduced_by.is_some() && correlation.suspect_commits.is_none());
    let suspects = web1.correlation.suspect_commits.as_ref();
    assert_eq!(suspects.expect("web1 passed before").commits.len(), 1);
    assert!(!same(&web1.correlation, &web2.correlation));
    for other in [web2, web3] {
        assert!(same(&web1.state, &other.state) && same(&web1.cause, &other.cause));
        assert!(same(&web1.output, &other.output));
    }
    assert_eq!(web1.state.comment, "Command \"false\" run");
}

/// A job published unseen (scheduled, or before saltsight started) runs
/// under the HEADs of its first record: a commit made while its returns come
/// in is not taken for the one they ran, and the move is seen with the next
/// job, as a `config_change` before it.
#[test]
fn a_job_published_unseen_keeps_the_heads_of_its_first_record() {
    let (repo, config) = a_watched_tree();
    let mut stages = Stages::from_config(&config);
    let jid = "20261127100000000003";
    let first = records_of(&mut stages, &[returned(jid, "web1", 1, false)]);
    let head = failure_of(&first, "web1").correlation.commits.clone();
    assert_eq!(head.len(), 1, "the watched tree's HEAD: {head:?}");
    commit(repo.path(), "web.sls", "a: 2\n", "web: second");
    let second = records_of(&mut stages, &[returned(jid, "web2", 2, false)]);
    assert_eq!(failure_of(&second, "web2").correlation.commits, head);
    let next = run(&mut stages, "20261127100000000004", &["web1"], 3, true);
    assert!(
        next.iter()
            .any(|r| matches!(r.body, RecordBody::ConfigChange(_))),
        "the move, with the next job"
    );
}
