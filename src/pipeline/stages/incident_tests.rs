//! External incidents told from a job's failures: the same unreachable
//! target on three minions is one incident.

use super::tests::{config, frame};
use super::*;
use crate::event::decode;
use crate::record::RecordKind;
use serde_json::json;

/// The same unreachable mirror on three minions: one `external_incident`,
/// opened by the third failure; the failures from then on and the job's
/// group carry its id; an unrelated failure in the same job does not.
#[test]
fn failures_against_one_host_on_three_minions_are_one_incident() {
    let mut stages = Stages::from_config(&config());
    let jid = "20261124100000000000";
    let stamp = |s: u32| format!("2026-11-24T10:00:{s:02}.000000+00:00");
    let minions = ["web1", "web2", "web3"];
    let mut records = Vec::new();
    let new = frame(
        &format!("salt/job/{jid}/new"),
        json!({"jid": jid, "fun": "state.apply", "arg": [], "tgt": "*", "tgt_type": "glob",
            "minions": minions, "missing": [], "user": "root", "_stamp": stamp(0)}),
    );
    let mut frames = vec![new];
    for (i, m) in minions.iter().enumerate() {
        frames.push(frame(
            &format!("salt/job/{jid}/ret/{m}"),
            json!({"jid": jid, "id": m, "fun": "state.apply", "retcode": 2, "success": false,
                "_stamp": stamp(1 + i as u32),
                "return": {
                    "cmd_|-fetch_|-curl_|-run": {"result": false, "__sls__": "app", "__id__": "fetch",
                        "__run_num__": 0, "name": "curl",
                        "comment": "Command \"curl -fsS https://mirror.example.net/app.tgz\" run",
                        "changes": {"retcode": 6, "stderr": "curl: (6) Could not resolve host: mirror.example.net", "stdout": ""}},
                    "cmd_|-broken_|-false_|-run": {"result": false, "__sls__": "app", "__id__": "broken",
                        "__run_num__": 1, "name": "false", "comment": "Command \"false\" run",
                        "changes": {"retcode": 1, "stderr": "", "stdout": ""}}}}),
        ));
    }
    for f in frames {
        let event = decode(&f).expect("decode");
        let now = event.stamp.expect("stamped");
        stages.on_event(&event, now, &mut records);
    }
    let incidents: Vec<_> = records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::ExternalIncident(i) => Some(i.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    assert_eq!(
        (incidents[0].target.as_str(), incidents[0].minions),
        ("mirror.example.net", 3)
    );
    let id = incidents[0].incident.clone();
    let failures: Vec<(String, String, Option<String>)> = records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::StateFailure(s) => Some((
                s.minion.to_string(),
                s.state.state_id.clone(),
                s.incident.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        failures,
        [
            ("web1".into(), "fetch".into(), None),
            ("web1".into(), "broken".into(), None),
            ("web2".into(), "fetch".into(), None),
            ("web2".into(), "broken".into(), None),
            ("web3".into(), "fetch".into(), Some(id.clone())),
            ("web3".into(), "broken".into(), None),
        ]
    );
    let groups: Vec<(String, Option<String>)> = records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::FailureGroup(g) => {
                Some((g.state_id.clone().unwrap_or_default(), g.incident.clone()))
            }
            _ => None,
        })
        .collect();
    assert!(groups.contains(&("fetch".into(), Some(id))), "{groups:?}");
    assert!(groups.contains(&("broken".into(), None)), "{groups:?}");
    assert!(records.iter().any(|r| r.kind == RecordKind::JobCompleted));
}
