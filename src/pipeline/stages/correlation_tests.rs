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

/// Job `jid` of state `web` on `minions`, each returning `result`: its records.
fn run(stages: &mut Stages, jid: &str, minions: &[&str], second: u32, result: bool) -> Vec<Record> {
    let stamp = |s: u32| format!("2026-11-27T10:00:{s:02}.000000+00:00");
    let mut frames = vec![frame(
        &format!("salt/job/{jid}/new"),
        json!({"jid": jid, "fun": "state.apply", "arg": ["web"], "tgt": "*", "tgt_type": "glob",
            "minions": minions, "missing": [], "user": "root", "_stamp": stamp(second)}),
    )];
    for m in minions {
        frames.push(frame(
            &format!("salt/job/{jid}/ret/{m}"),
            json!({"jid": jid, "id": m, "fun": "state.apply", "fun_args": ["web"],
                "retcode": if result { 0 } else { 2 }, "success": result,
                "_stamp": stamp(second + 1),
                "return": {"cmd_|-broken_|-false_|-run": {"result": result,
                    "comment": "Command \"false\" run", "__sls__": "web", "__id__": "broken",
                    "__run_num__": 0, "changes": {"retcode": 1, "stderr": "", "stdout": ""},
                    "name": "false"}}}),
        ));
    }
    let mut records = Vec::new();
    for f in frames {
        let event = decode(&f).expect("decode");
        stages.on_event(&event, event.stamp.expect("stamped"), &mut records);
    }
    records
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
