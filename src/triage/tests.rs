//! Triage of whole returns: groups forgotten, minions counted once, the
//! job's texts shared, orchestration steps read.

use super::*;
use crate::event::{Body, decode, salt_frame};
use serde_json::json;

fn failing_return(jid: &str, minion: &str) -> Vec<u8> {
    salt_frame(
        &format!("salt/job/{jid}/ret/{minion}"),
        &json!({"fun": "state.apply", "fun_args": ["web"], "jid": jid, "id": minion,
            "retcode": 2, "success": true, "return": {
                "pkg_|-nginx_|-nginx_|-installed": {
                    "result": false, "comment": "The following packages failed to install/update: nginx",
                    "__sls__": "web", "__id__": "nginx", "__run_num__": 0,
                    "changes": {}, "name": "nginx"}}}),
        false,
    )
}

#[test]
fn a_closed_jobs_groups_are_forgotten_after_the_late_window() {
    let mut triage = Triage::new(TriageConfig::default());
    let minute = |m: i64| Stamp(m * 60_000_000);
    let frame = failing_return("20261126180000000000", "web1");
    let event = decode(&frame).expect("decode");
    let Body::JobReturn(r) = &event.body else {
        panic!("a job return")
    };
    triage.on_return(r, minute(0)).expect("findings");
    let window = std::time::Duration::from_secs(3600);
    triage.forget_idle(minute(30), window, |_| false);
    assert_eq!(triage.jobs.len(), 1, "within the late window");
    triage.forget_idle(minute(61), window, |_| true);
    assert_eq!(triage.jobs.len(), 1, "still open");
    // Looked at once a minute at most.
    triage.forget_idle(minute(61).plus(FORGET_EVERY / 2), window, |_| false);
    assert_eq!(triage.jobs.len(), 1);
    triage.forget_idle(minute(63), window, |_| false);
    assert!(triage.jobs.is_empty() && triage.jobs_order.is_empty());
    assert_eq!(triage.stats.forgotten_jobs.get(), 1);
    assert!(triage.close_job("20261126180000000000").is_empty());
}

/// A group counts each minion once (a return read twice is not two
/// minions) and names the first few, sorted.
#[test]
fn a_group_counts_each_minion_once_and_names_the_first_few_sorted() {
    let mut triage = Triage::new(TriageConfig {
        example_minions: 2,
        ..TriageConfig::default()
    });
    let jid = "20261127210000000000";
    for minion in ["web3", "web1", "web3", "web2"] {
        let frame = failing_return(jid, minion);
        let event = decode(&frame).expect("decode");
        let Body::JobReturn(r) = &event.body else {
            panic!("a job return")
        };
        triage.on_return(r, Stamp(0)).expect("findings");
    }
    let groups: Vec<_> = triage.jobs[jid].groups.values().collect();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].count, 3, "web3 twice is one minion");
    assert_eq!(groups[0].minions, ["web1", "web3"]);
}

/// The same failure on a job's next minion is judged once: the second
/// finding shares the first's judgment, and it is counted as recalled.
#[test]
fn a_failure_judged_on_one_minion_is_not_judged_again_on_the_next() {
    let mut triage = Triage::new(TriageConfig::default());
    let mut found = Vec::new();
    for minion in ["web1", "web2"] {
        let frame = failing_return("20261127090000000000", minion);
        let event = decode(&frame).expect("decode");
        let Body::JobReturn(r) = &event.body else {
            panic!("a job return")
        };
        found.push(triage.on_return(r, Stamp(0)).expect("findings"));
    }
    let (first, second) = (&found[0].state_failures[0], &found[1].state_failures[0]);
    assert!(Arc::ptr_eq(&first.judged, &second.judged));
    assert_eq!(second.classification.category, Category::DependencyPackage);
    assert_eq!(
        (triage.memo.hits, triage.stats.texts_recalled.get()),
        (0, 1),
        "judged once, through the memo; recalled once, with the decode"
    );
}

/// The shape of `salt/run/<jid>/ret` for `state.orchestrate` (Salt's runner
/// returns `{data: {<master id>: <states>}, outputter, retcode}`).
#[test]
fn an_orchestration_step_failure_is_a_root_cause_of_the_master_run() {
    let frame = salt_frame(
        "salt/run/20261121200000000000/ret",
        &json!({"fun": "runner.state.orchestrate", "jid": "20261121200000000000",
            "success": false, "return": {"outputter": "highstate", "retcode": 1, "data": {
                "saltmaster_master": {
                    "salt_|-deploy_web_|-deploy_web_|-state": {
                        "result": false, "comment": "Run failed on minions: web1",
                        "__sls__": "orch.deploy", "__id__": "deploy_web", "__run_num__": 0,
                        "changes": {}, "name": "deploy_web"},
                    "salt_|-notify_|-notify_|-function": {
                        "result": false, "comment": "One or more requisite failed: orch.deploy.deploy_web",
                        "__sls__": "orch.deploy", "__id__": "notify", "__run_num__": 1,
                        "changes": {}, "name": "notify"}}}}}),
        false,
    );
    let event = decode(&frame).expect("decode");
    let Body::RunReturn(r) = &event.body else {
        panic!("a runner return")
    };
    let mut triage = Triage::new(TriageConfig::default());
    let found = triage.on_runner_return(r).expect("findings");
    triage.add_to_groups(&found, Stamp(0));
    assert_eq!(&*found.minion, "saltmaster_master");
    let causes: Vec<_> = found
        .state_failures
        .iter()
        .map(|f| {
            (
                f.state.sls.as_str(),
                f.state.state_id.as_str(),
                f.state.function.as_str(),
                f.fallout,
            )
        })
        .collect();
    assert_eq!(causes, [("orch.deploy", "deploy_web", "salt.state", 1)]);
    let groups = triage.close_job("20261121200000000000");
    assert_eq!((groups.len(), groups[0].count), (1, 1));
    // Other runners are not state runs.
    let frame = salt_frame(
        "salt/run/1/ret",
        &json!({"fun": "runner.jobs.list_jobs", "jid": "1", "return": {"data": {}}}),
        false,
    );
    let event = decode(&frame).expect("decode");
    let Body::RunReturn(r) = &event.body else {
        panic!("a runner return")
    };
    assert_eq!(triage.on_runner_return(r), None);
}

/// A return of an open job holds the job's jid and function as the tracker
/// does (one text for the job's returns); a return of no open job, or of
/// another function, holds its own.
#[test]
fn an_open_jobs_jid_and_function_are_shared_not_copied() {
    let mut triage = Triage::new(TriageConfig::default());
    let jid = "20261128040000000000";
    let frame = failing_return(jid, "web1");
    let event = decode(&frame).expect("decode");
    let Body::JobReturn(r) = &event.body else {
        panic!("a job return")
    };
    let (held_jid, held_fun): (Arc<str>, Arc<str>) = (jid.into(), "state.apply".into());
    let shared = triage
        .on_job_return(r, Some((&held_jid, &held_fun)))
        .expect("findings");
    assert!(Arc::ptr_eq(&shared.jid, &held_jid));
    assert!(Arc::ptr_eq(&shared.fun, &held_fun));
    let other_fun: Arc<str> = "state.highstate".into();
    let own = triage
        .on_job_return(r, Some((&held_jid, &other_fun)))
        .expect("findings");
    assert!(Arc::ptr_eq(&own.jid, &held_jid));
    assert_eq!(
        (&*own.fun, Arc::ptr_eq(&own.fun, &other_fun)),
        ("state.apply", false)
    );
    let unseen = triage.on_return(r, Stamp(0)).expect("findings");
    assert!(!Arc::ptr_eq(&unseen.jid, &held_jid));
    assert_eq!(&*unseen.jid, jid);
}
