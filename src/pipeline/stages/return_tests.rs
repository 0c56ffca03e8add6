//! A return as the tracker counts it: what triage found in a duplicate is
//! neither counted nor given again, and the room of the tracker's records
//! is kept for a return's few.

use super::tests::{config, frame};
use super::*;
use crate::event::decode;
use serde_json::json;

/// A minion's failing return sent twice while its job is open, and
/// another's again once it closed: each state failure is given once, and
/// the failure group counts each minion once, also past its example
/// minions.
#[test]
fn a_duplicate_failing_return_is_counted_and_given_once() {
    let mut config = config();
    config.triage.example_minions = 1;
    let mut stages = Stages::from_config(&config);
    let jid = "20261128100000000000";
    let stamp = |s: u32| format!("2026-11-28T10:00:{s:02}.000000+00:00");
    let ret = |minion: &str, s: u32| {
        frame(
            &format!("salt/job/{jid}/ret/{minion}"),
            json!({"jid": jid, "id": minion, "fun": "state.apply", "fun_args": ["web"],
                "retcode": 2, "success": false, "_stamp": stamp(s),
                "return": {"cmd_|-broken_|-false_|-run": {"result": false,
                    "comment": "Command \"false\" run", "__sls__": "web",
                    "__id__": "broken", "__run_num__": 0, "name": "false",
                    "changes": {"retcode": 1, "stderr": "", "stdout": ""}}}}),
        )
    };
    let new = frame(
        &format!("salt/job/{jid}/new"),
        json!({"jid": jid, "fun": "state.apply", "arg": ["web"], "tgt": "web*",
            "tgt_type": "glob", "minions": ["web1", "web2", "web3"], "missing": [],
            "user": "root", "_stamp": stamp(0)}),
    );
    let mut records = Vec::new();
    for f in [
        new,
        ret("web2", 1),
        ret("web3", 2),
        ret("web3", 3),
        ret("web1", 4),
        ret("web2", 5),
    ] {
        let event = decode(&f).expect("decode");
        stages.on_event(&event, event.stamp.expect("stamped"), &mut records);
    }
    let failures: Vec<&str> = records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::StateFailure(f) => Some(&*f.minion),
            _ => None,
        })
        .collect();
    assert_eq!(failures, ["web2", "web3", "web1"]);
    let counts: Vec<u32> = records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::FailureGroup(g) => Some(g.count),
            _ => None,
        })
        .collect();
    assert_eq!(counts, [3]);
}

/// The room of the tracker's records is kept from event to event for a
/// return's few, not for a job published with a hundred minions not
/// connected.
#[test]
fn the_tracker_records_room_is_kept_for_a_few() {
    let mut stages = Stages::from_config(&config());
    let jid = "20261128110000000000";
    let absent: Vec<String> = (0..100).map(|n| format!("db{n}")).collect();
    let new = frame(
        &format!("salt/job/{jid}/new"),
        json!({"jid": jid, "fun": "test.ping", "arg": [], "tgt": "*", "tgt_type": "glob",
            "minions": ["web1"], "missing": absent, "user": "root",
            "_stamp": "2026-11-28T11:00:00.000000+00:00"}),
    );
    let ret = frame(
        &format!("salt/job/{jid}/ret/web1"),
        json!({"jid": jid, "id": "web1", "fun": "test.ping", "return": true,
            "retcode": 0, "success": true, "_stamp": "2026-11-28T11:00:01.000000+00:00"}),
    );
    let mut kept = Vec::new();
    for f in [ret.clone(), new, ret] {
        let event = decode(&f).expect("decode");
        let mut records = Vec::new();
        stages.on_event(&event, event.stamp.expect("stamped"), &mut records);
        kept.push(stages.tracked.capacity());
    }
    assert!(kept[0] > 0 && kept[0] <= KEPT_TRACKED, "{kept:?}");
    assert_eq!(kept[1], 0, "{kept:?}");
    assert!(kept[2] > 0, "{kept:?}");
}
