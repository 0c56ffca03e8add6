//! A job's failures are correlated once: the minions failing alike share one
//! correlation, and a minion whose state flipped (it passed under an earlier
//! HEAD) has its own, with the suspects between.

use serde_json::json;

use super::Stages;
use super::tests::{config_with, frame};
use crate::correlate::git::tests::{commit, git};
use crate::event::decode;
use crate::record::{Correlation, Record, RecordBody, Shared};

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

fn correlation_of<'a>(records: &'a [Record], minion: &str) -> &'a Shared<Correlation> {
    records
        .iter()
        .find_map(|r| match &r.body {
            RecordBody::StateFailure(f) if f.minion == minion => Some(&f.correlation),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no state_failure of {minion}"))
}

#[test]
fn minions_failing_alike_share_one_correlation_and_a_flip_has_its_own() {
    let repo = tempfile::tempdir().expect("tempdir");
    git(repo.path(), &["init", "-q", "-b", "main"]);
    commit(repo.path(), "web.sls", "a: 1\n", "web: first");
    let config = config_with(&format!(
        "state_repos = {{ states = {:?} }}\n",
        repo.path().display().to_string()
    ));
    let mut stages = Stages::from_config(&config);
    run(&mut stages, "20261127100000000001", &["web1"], 0, true);
    commit(repo.path(), "web.sls", "a: 2\n", "web: second");
    let minions = ["web1", "web2", "web3"];
    let records = run(&mut stages, "20261127100000000002", &minions, 10, false);
    let [flipped, web2, web3] = minions.map(|m| correlation_of(&records, m));
    assert!(
        std::ptr::eq::<Correlation>(&**web2, &**web3),
        "one correlation for the job's failure"
    );
    assert!(web2.introduced_by.is_some() && web2.suspect_commits.is_none());
    let suspects = flipped
        .suspect_commits
        .as_ref()
        .expect("web1 passed before");
    assert_eq!(suspects.commits.len(), 1, "{suspects:?}");
    assert!(!std::ptr::eq::<Correlation>(&**flipped, &**web2));
}
