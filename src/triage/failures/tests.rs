//! Failed states walked from return shapes: fallout chains and their roots,
//! requisite labels with dots, a failure decoded once per job, cycles, list
//! comments, the state hash, and what a failed state may cost.

use super::*;
use serde_json::Value;
use serde_json::json;

fn pack(v: &Value) -> Vec<u8> {
    rmp_serde::to_vec_named(v).unwrap()
}

fn state(sls: &str, id: &str, run: u64, result: Value, comment: &str) -> (String, Value) {
    (
        format!("cmd_|-{id}_|-{id}_|-run"),
        json!({"result": result, "comment": comment, "__sls__": sls, "__id__": id,
               "__run_num__": run, "changes": {}, "name": id, "duration": 1.5}),
    )
}

#[test]
fn fallout_chains_lead_back_to_their_root() {
    let ret: serde_json::Map<String, Value> = [
        state("a", "good", 0, json!(true), "ok"),
        state("a", "root", 1, json!(false), "Command \"x\" run"),
        state(
            "a",
            "child",
            2,
            json!(false),
            "One or more requisite failed: a.root",
        ),
        state(
            "b",
            "grandchild",
            3,
            json!(false),
            "One or more requisite failed: a.child",
        ),
        state("b", "other_root", 4, json!(false), "boom"),
        state(
            "b",
            "orphan",
            5,
            json!(false),
            "One or more requisite failed: c.gone",
        ),
        state("b", "maybe", 6, json!(null), "would change"),
    ]
    .into_iter()
    .collect();
    let mut run = walk(&pack(&Value::Object(ret)), true).unwrap();
    assert_eq!((run.states, run.would_change, run.failed.len()), (7, 1, 5));
    assert_eq!(run.outcomes.len(), 6, "null results are not outcomes");
    let (causes, unexplained) = root_causes(&mut run.failed, &mut RootScratch::default());
    let got: Vec<_> = causes
        .iter()
        .map(|c| (c.state.state_id.as_str(), c.fallout))
        .collect();
    assert_eq!(got, [("root", 2), ("other_root", 0)]);
    assert_eq!(unexplained, 1);
    assert_eq!(causes.capacity(), 2, "sized for the root causes");
    assert!(
        run.failed.is_empty() && run.failed.capacity() >= 5,
        "emptied, room kept"
    );
    assert_eq!(causes[0].state.function, "cmd.run");
    assert_eq!(causes[0].state.duration_ms, Some(1.5));
}

/// A label is `sls.id`, and both may hold dots: a requisite is found by
/// the whole of it, never by a prefix.
#[test]
fn labels_with_dots_find_their_state_whole() {
    let ret: serde_json::Map<String, Value> = [
        state("web.app", "conf.d", 0, json!(false), "boom"),
        state("web", "app.conf", 1, json!(false), "bang"),
        state(
            "web",
            "reload",
            2,
            json!(false),
            "One or more requisite failed: web.app.conf.d",
        ),
        state(
            "web",
            "restart",
            3,
            json!(false),
            "One or more requisite failed: web.app.conf, web.app",
        ),
    ]
    .into_iter()
    .collect();
    let mut run = walk(&pack(&Value::Object(ret)), false).unwrap();
    let (causes, unexplained) = root_causes(&mut run.failed, &mut RootScratch::default());
    let got: Vec<_> = causes
        .iter()
        .map(|c| (c.state.sls.as_str(), c.state.state_id.as_str(), c.fallout))
        .collect();
    assert_eq!(got, [("web.app", "conf.d", 1), ("web", "app.conf", 1)]);
    assert_eq!(unexplained, 0);
}

/// One failed command's return, as a minion of a job sends it.
fn command_failure(comment: &str, run: u64, duration: f64, start: &str) -> Vec<u8> {
    pack(&json!({"cmd_|-deploy_|-/opt/deploy.sh_|-run": {
        "result": false, "comment": comment, "__sls__": "app", "__id__": "deploy",
        "__run_num__": run, "duration": duration, "start_time": start, "name": "/opt/deploy.sh",
        "changes": {"pid": run * 7, "retcode": -9, "stdout": "", "stderr": "killed"}}}))
}

#[test]
fn a_failure_seen_on_another_minion_is_decoded_once_and_keeps_its_own_run() {
    let mut decoded = Decoded::default();
    let first = command_failure("Command \"/opt/deploy.sh\" run", 4, 12.5, "10:00:01.1");
    let second = command_failure("Command \"/opt/deploy.sh\" run", 5, 99.0, "10:00:02.2");
    let a = walk_with(
        &States::of(&first).unwrap(),
        false,
        &mut decoded,
        Spare::default(),
    );
    // The second walk is given the first's failed states (and an outcome)
    // as its spare vectors: they are not kept.
    let b = walk_with(
        &States::of(&second).unwrap(),
        false,
        &mut decoded,
        Spare {
            failed: a.failed.clone(),
            outcomes: vec![(1, true)],
        },
    );
    assert_eq!(
        decoded.recalled, 1,
        "the second minion's failure is recalled"
    );
    // What is recalled is what a decode from scratch says, with its own run.
    assert_eq!(a, walk(&first, false).unwrap());
    assert_eq!(b, walk(&second, false).unwrap());
    let s = &b.failed[0];
    assert!(
        std::sync::Arc::ptr_eq(&a.failed[0].shared, &s.shared),
        "a recalled state shares its decode, not a copy"
    );
    assert_eq!(
        (a.failed[0].key_hash, s.key_hash),
        (state_hash(s.key.as_bytes()), state_hash(s.key.as_bytes())),
        "a recalled state keeps its key's hash"
    );
    assert_eq!(
        (s.run_num, s.duration_ms, s.start_time.as_deref()),
        (Some(5), Some(99.0), Some("10:00:02.2"))
    );
    assert_eq!(
        (s.exit_code, s.stderr.as_deref()),
        (Some(-9), Some("killed"))
    );
    // Another comment is another failure.
    let other = command_failure("Command \"/opt/deploy.sh\" timed out", 5, 1.0, "x");
    let c = walk_with(
        &States::of(&other).unwrap(),
        false,
        &mut decoded,
        Spare::default(),
    );
    assert_eq!(decoded.recalled, 1);
    assert_eq!(c.failed[0].comment, "Command \"/opt/deploy.sh\" timed out");
    // Past the bound the oldest are forgotten, counted.
    for i in 0..DECODED_STATES {
        walk_with(
            &States::of(&command_failure(&format!("boom {i}"), 1, 1.0, "x")).unwrap(),
            false,
            &mut decoded,
            Spare::default(),
        );
    }
    assert_eq!(decoded.forgotten, 2);
    assert_eq!(decoded.known.len(), DECODED_STATES);
    // A state larger than the bound is decoded, not remembered.
    let long = "x".repeat(DECODED_STATE_MAX_BYTES);
    let big = command_failure(&long, 1, 1.0, "x");
    let d = walk_with(
        &States::of(&big).unwrap(),
        false,
        &mut decoded,
        Spare::default(),
    );
    walk_with(
        &States::of(&big).unwrap(),
        false,
        &mut decoded,
        Spare::default(),
    );
    assert_eq!(d.failed[0].comment, long);
    assert_eq!((decoded.recalled, decoded.forgotten), (1, 2));
}

#[test]
fn a_requisite_cycle_ends() {
    let ret: serde_json::Map<String, Value> = [
        state(
            "a",
            "x",
            0,
            json!(false),
            "One or more requisite failed: a.y",
        ),
        state(
            "a",
            "y",
            1,
            json!(false),
            "One or more requisite failed: a.x",
        ),
    ]
    .into_iter()
    .collect();
    let mut run = walk(&pack(&Value::Object(ret)), false).unwrap();
    let (causes, unexplained) = root_causes(&mut run.failed, &mut RootScratch::default());
    assert!(causes.is_empty());
    assert_eq!(unexplained, 2);
}

#[test]
fn a_list_comment_is_joined_and_command_details_kept() {
    let ret = json!({"pkg_|-p_|-nginx_|-installed": {
        "result": false, "comment": ["line one", "line two"],
        "changes": {"retcode": 100, "stderr": "E: oops"}, "__sls__": "web", "__id__": "p"}});
    let run = walk(&pack(&ret), false).unwrap();
    let s = &run.failed[0];
    assert_eq!(s.comment, "line one\nline two");
    assert_eq!(
        (s.exit_code, s.stderr.as_deref()),
        (Some(100), Some("E: oops"))
    );
    assert_eq!(s.function, "pkg.installed");
    assert_eq!((s.run_num, s.start_time.as_deref()), (None, None));
}

#[test]
fn a_state_whose_module_is_not_loaded_takes_its_sls_from_the_comment() {
    let ret = json!({"saltsight_lab_missing_|-m_|-x_|-present": {
        "result": false, "changes": {}, "__id__": "m", "__run_num__": 0,
        "comment": "State 'saltsight_lab_missing.present' was not found in SLS 'lab.failures'\nReason: 'saltsight_lab_missing.present' is not available.\n"}});
    let run = walk(&pack(&ret), false).unwrap();
    assert_eq!(run.failed[0].sls, "lab.failures");
    assert_eq!(sls_named_in("State 'x' was not found in SLS ''"), None);
    assert_eq!(sls_named_in("Something else"), None);
}

#[test]
fn the_state_hash_ignores_the_name() {
    assert_eq!(
        state_hash(b"file_|-conf_|-/tmp/web1/x_|-managed"),
        state_hash(b"file_|-conf_|-/tmp/db1/x_|-managed")
    );
    assert_ne!(
        state_hash(b"file_|-conf_|-x_|-managed"),
        state_hash(b"file_|-conf2_|-x_|-managed")
    );
}

#[test]
fn what_a_failed_state_costs_is_bounded() {
    let mut ret = serde_json::Map::new();
    let big = format!("{}the last line says why", "noise\n".repeat(200_000));
    ret.insert(
        "cmd_|-loud_|-loud_|-run".into(),
        json!({"result": false, "comment": "Command \"loud\" run", "__run_num__": 0,
            "__sls__": "s", "__id__": "loud", "name": "loud",
            "changes": {"retcode": 2, "stdout": big, "stderr": "", "pid": 7}}),
    );
    for i in 0..MAX_DECODED_FAILURES + 5 {
        ret.insert(
            format!("test_|-f{i}_|-f{i}_|-fail_without_changes"),
            json!({"result": false, "comment": "Failure!", "__run_num__": i + 1, "changes": {}}),
        );
    }
    let run = walk(&pack(&Value::Object(ret)), false).unwrap();
    assert_eq!(run.failed.len(), MAX_DECODED_FAILURES);
    assert_eq!(run.not_examined, 6);
    let loud = run
        .failed
        .iter()
        .find(|s| s.state_id == "loud")
        .expect("decoded");
    let stdout = loud.stdout.as_deref().unwrap();
    assert!(stdout.len() <= OUTPUT_MAX && stdout.ends_with("the last line says why"));
    assert_eq!((loud.exit_code, loud.stderr.as_deref()), (Some(2), None));
}

/// Two states may share a label (`cmd` and `file` states of one id): a
/// requisite naming it leads to the later one, as the lookup always has.
#[test]
fn a_label_two_states_share_leads_to_the_later_one() {
    let (_, mut file_app) = state("web", "app", 1, json!(false), "");
    file_app["comment"] = json!("One or more requisite failed: web.base");
    let ret: serde_json::Map<String, Value> = [
        state("web", "app", 0, json!(false), "boom"),
        ("file_|-app_|-/etc/app_|-managed".to_owned(), file_app),
        state("web", "base", 2, json!(false), "bang"),
        state(
            "web",
            "x",
            3,
            json!(false),
            "One or more requisite failed: web.app",
        ),
    ]
    .into_iter()
    .collect();
    let mut run = walk(&pack(&Value::Object(ret)), false).unwrap();
    let (causes, unexplained) = root_causes(&mut run.failed, &mut RootScratch::default());
    let got: Vec<_> = causes
        .iter()
        .map(|c| (c.state.state_id.as_str(), c.fallout))
        .collect();
    assert_eq!(got, [("app", 0), ("base", 2)]);
    assert_eq!(unexplained, 0);
}

/// One scratch serves return after return: what a run finds with it is what
/// it finds with a new one.
#[test]
fn root_causes_with_a_used_scratch_are_those_with_a_new_one() {
    // Each run's failed states, in run order: (sls, id, the requisite it
    // failed by, if it is fallout).
    let chain = [
        ("a", "r", None),
        ("a", "f1", Some("a.r")),
        ("a", "f2", Some("a.f1")),
    ];
    let other = [
        ("b", "x", None),
        ("b", "y", Some("b.x")),
        ("b", "z", Some("c.gone")),
    ];
    let run_of = |failed: &[(&str, &str, Option<&str>)]| {
        let states = failed.iter().zip(0u64..).map(|(&(sls, id, by), run)| {
            let comment = by.map_or("boom".to_owned(), |by| {
                format!("One or more requisite failed: {by}")
            });
            state(sls, id, run, json!(false), &comment)
        });
        walk(&pack(&Value::Object(states.collect())), false).unwrap()
    };
    let found = |mut run: StateRun, scratch: &mut RootScratch| {
        let (causes, unexplained) = root_causes(&mut run.failed, scratch);
        let causes: Vec<_> = causes
            .iter()
            .map(|c| (c.state.state_id.clone(), c.fallout))
            .collect();
        (causes, unexplained)
    };
    let mut used = RootScratch::default();
    for failed in [&chain, &other, &chain] {
        assert_eq!(
            found(run_of(failed), &mut used),
            found(run_of(failed), &mut RootScratch::default())
        );
    }
    assert_eq!(
        found(run_of(&other), &mut used),
        (vec![("x".to_owned(), 1)], 1)
    );
}

/// A failed state is recalled whether or not the last return failed it at
/// the same place (compared there in place, else found by its hash); a
/// state alike but for one field, even one absent where the other's is
/// empty, is decoded anew.
#[test]
fn a_failure_is_recalled_at_its_place_or_another_and_only_when_the_same() {
    let state = |comment: &str, named: bool| {
        let mut state = json!({"result": false, "comment": comment, "__run_num__": 0,
            "changes": {}});
        if named {
            state["name"] = json!("");
        }
        state
    };
    let run = |states: Value| pack(&states);
    let a = |comment| ("cmd_|-a_|-a_|-run", state(comment, true));
    let b = |comment| ("cmd_|-b_|-b_|-run", state(comment, true));
    let both = run(json!({a("x").0: a("x").1, b("y").0: b("y").1}));
    let b_alone = run(json!({b("y").0: b("y").1}));
    let a_unnamed = run(json!({a("x").0: state("x", false)}));
    let mut decoded = Decoded::default();
    let walked = |raw: &[u8], decoded: &mut Decoded| {
        walk_with(&States::of(raw).unwrap(), false, decoded, Spare::default())
    };
    walked(&both, &mut decoded);
    assert_eq!(decoded.recalled, 0);
    walked(&both, &mut decoded);
    assert_eq!(decoded.recalled, 2, "both at their places");
    let unnamed = walked(&a_unnamed, &mut decoded);
    assert_eq!(decoded.recalled, 2, "a without its name is another state");
    assert_eq!(unnamed, walk(&a_unnamed, false).unwrap());
    let moved = walked(&b_alone, &mut decoded);
    assert_eq!(decoded.recalled, 3, "b at a's place");
    assert_eq!(moved, walk(&b_alone, false).unwrap());
    // What a state's shared fields wrote, read in place.
    let (states, unnamed) = (States::of(&both).unwrap(), States::of(&a_unnamed).unwrap());
    let [first, second] = [0, 1].map(|i| Fields::of(&states.entries()[i]));
    let mut written = Vec::new();
    first.write_shared(&mut written);
    assert!(first.wrote(&written));
    assert!(!second.wrote(&written));
    assert!(!Fields::of(&unnamed.entries()[0]).wrote(&written));
    assert!(!first.wrote(&written[..written.len() - 1]));
    written.push(0);
    assert!(!first.wrote(&written));
}
