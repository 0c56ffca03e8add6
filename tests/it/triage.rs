//! Triage on the captures, through `saltsight replay`: the root-cause state told
//! apart from its requisite fallout, the category with its evidence, render errors
//! named with their SLS, and one group per failure across minions. Exact records.

use serde_json::{Value, json};

use crate::support::replay;

/// The records of `kinds` a capture replays to (`support::replay`).
fn replay(capture: &str, kinds: &[&str]) -> Vec<Value> {
    replay::replay(capture, "")
        .into_iter()
        .filter(|r| kinds.iter().any(|k| r["kind"] == *k))
        .collect()
}

/// The named fields of each record.
fn project(records: &[Value], fields: &[&str]) -> Vec<Value> {
    records
        .iter()
        .map(|r| {
            fields
                .iter()
                .map(|f| (f.to_string(), r[*f].clone()))
                .collect::<serde_json::Map<_, _>>()
                .into()
        })
        .collect()
}

#[test]
fn a_failing_command_is_the_root_cause_and_its_requisite_fallout_is_counted() {
    let records = replay(
        "3008.3_ipc_state_apply_fail",
        &["state_failure", "failure_group"],
    );
    // One root cause per minion (lab_needs_failing is fallout), then one group.
    let kinds: Vec<(&str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap(),
                r["minion"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("state_failure", "db1"),
            ("state_failure", "web1"),
            ("state_failure", "web2"),
            ("failure_group", "-")
        ]
    );
    let web1 = &records[1];
    assert_eq!(
        *web1,
        json!({"kind":"state_failure","schema_version":2,"id":"4e3d0cfc0d6d86752e23d75c6e10f102",
            "master":"lab","at":"2026-11-21T19:33:17.593904Z","jid":"20261121193316907494",
            "minion":"web1","fun":"state.apply","sls":"fail","state_id":"lab_failing_cmd",
            "function":"cmd.run","name":"echo about to fail; echo err >&2; exit 1",
            "comment":"Command \"echo about to fail; echo err >&2; exit 1\" run","comment_len":54,
            "run_num":1,"duration_ms":9.455,"start_time":"19:33:17.565051","category":"command",
            "rule":"command_exit","evidence":"exit code 1","fallout":1,
            "output":{"retcode":1,"stderr":"err","stdout":"about to fail"},
            "fingerprint":"a39589446928c917","run_kind":"adhoc","test":false})
    );
    assert_eq!(
        records[3],
        json!({"kind":"failure_group","schema_version":2,"id":"8fd76a0888b0d76123bc819ddeeac049",
            "master":"lab","at":"2026-11-21T19:33:17.632236Z","jid":"20261121193316907494",
            "fingerprint":"a39589446928c917","sls":"fail","state_id":"lab_failing_cmd",
            "function":"cmd.run","category":"command","rule":"command_exit",
            "evidence":"exit code 1",
            "comment":"Command \"echo about to fail; echo err >&2; exit 1\" run","comment_len":54,
            "normalised":"Command \"echo about to fail; echo err >&<n>; exit <n>\" run",
            "output":{"retcode":1,"stderr":"err","stdout":"about to fail"},
            "count":3,"minions":["db1","web1","web2"],
            "first_seen_jid":"20261121193316907494","first_seen_at":"2026-11-21T19:33:17.535082Z",
            "revision":0,"run_kind":"adhoc","test":false})
    );
}

#[test]
fn a_package_that_does_not_exist_is_a_package_dependency_naming_it() {
    let records = replay("3008.3_ipc_pkg_missing", &["failure_group"]);
    assert_eq!(
        project(
            &records,
            &[
                "sls", "state_id", "function", "category", "rule", "package", "count"
            ]
        ),
        [
            json!({"sls": "badpkg", "state_id": "lab_badpkg", "function": "pkg.installed",
            "category": "dependency.package", "rule": "apt_no_package",
            "package": "saltlab-package-that-cannot-exist", "count": 3})
        ]
    );
}

#[test]
fn a_missing_salt_source_is_source_missing_with_its_url() {
    let records = replay(
        "3008.3_ipc_file_missing_source",
        &["state_failure", "failure_group"],
    );
    let fields = [
        "kind", "minion", "state_id", "function", "category", "url", "fallout", "count",
    ];
    assert_eq!(
        project(&records, &fields),
        [
            json!({"kind": "state_failure", "minion": "web2", "state_id": "lab_missing_source",
                "function": "file.managed", "category": "source_missing",
                "url": "salt://files/does-not-exist.txt", "fallout": 0, "count": null}),
            json!({"kind": "state_failure", "minion": "db1", "state_id": "lab_missing_source",
                "function": "file.managed", "category": "source_missing",
                "url": "salt://files/does-not-exist.txt", "fallout": 0, "count": null}),
            json!({"kind": "state_failure", "minion": "web1", "state_id": "lab_missing_source",
                "function": "file.managed", "category": "source_missing",
                "url": "salt://files/does-not-exist.txt", "fallout": 0, "count": null}),
            json!({"kind": "failure_group", "minion": null, "state_id": "lab_missing_source",
                "function": "file.managed", "category": "source_missing",
                "url": "salt://files/does-not-exist.txt", "fallout": null, "count": 3}),
        ]
    );
    // Each minion's path differs in the state's name; the group is one.
    let names: Vec<&str> = records[..3]
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[0], "/tmp/slA/m/web2/cache/labout/missing.txt");
}

#[test]
fn yaml_and_jinja_render_errors_name_their_sls_and_line() {
    let fields = [
        "minion", "saltenv", "sls", "line", "column", "category", "state_id",
    ];
    let yaml = replay("3008.3_ipc_render_yaml_error", &["render_failure"]);
    let web1 = yaml.iter().find(|r| r["minion"] == "web1").expect("web1");
    assert_eq!(
        project(std::slice::from_ref(web1), &fields),
        [
            // YAML's problem mark (the last one), not where the flow sequence began.
            json!({"minion": "web1", "saltenv": "base", "sls": "yaml_error", "line": 4,
            "column": 6, "category": "render", "state_id": null})
        ]
    );
    assert!(
        web1["message"]
            .as_str()
            .unwrap()
            .starts_with("while parsing a flow sequence")
    );
    assert_eq!(yaml.len(), 3);
    let jinja = replay(
        "3008.3_ipc_render_jinja_error",
        &["render_failure", "failure_group"],
    );
    let group = jinja
        .iter()
        .find(|r| r["kind"] == "failure_group")
        .expect("group");
    assert_eq!(
        project(
            std::slice::from_ref(group),
            &["sls", "category", "count", "minions"]
        ),
        [
            json!({"sls": "jinja_error", "category": "render", "count": 3,
            "minions": ["db1", "web1", "web2"]})
        ]
    );
    assert!(
        group["comment"]
            .as_str()
            .unwrap()
            .starts_with("Jinja syntax error: unexpected '}'; line 3")
    );
}

#[test]
fn scheduled_failures_are_scheduled_and_grouped_by_first_sighting() {
    let records = replay("3008.3_ipc_schedule", &["failure_group"]);
    assert_eq!(
        project(
            &records,
            &["jid", "state_id", "run_kind", "count", "first_seen_jid"]
        ),
        [
            "20261121193652146519",
            "20261121193702158711",
            "20261121193712072066"
        ]
        .iter()
        .map(
            |jid| json!({"jid": jid, "state_id": "lab_failing_cmd", "run_kind": "scheduled",
                "count": 1, "first_seen_jid": "20261121193652146519"})
        )
        .collect::<Vec<_>>()
    );
}

#[test]
fn successful_state_runs_give_no_failure_records() {
    for capture in [
        "3008.3_ipc_state_apply_ok",
        "3008.3_ipc_highstate",
        "3008.3_ipc_big_highstate",
    ] {
        let records = replay(
            capture,
            &["state_failure", "render_failure", "failure_group"],
        );
        assert!(records.is_empty(), "{capture}: {records:?}");
    }
}
