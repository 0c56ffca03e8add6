//! Render and compile errors in every form Salt writes them: the SLS, the
//! template's line, the pillar header, duplicates, a refused run.

use super::*;

fn raw(v: serde_json::Value) -> Vec<u8> {
    rmp_serde::to_vec_named(&v).expect("encode")
}

fn one(text: &str) -> RenderError {
    let mut all = errors(&[text]);
    assert_eq!(all.len(), 1, "{text}");
    all.remove(0)
}

/// (saltenv, sls, line, rule) of a string.
fn named(text: &str) -> (Option<String>, Option<String>, Option<u32>, String) {
    let e = one(text);
    (e.saltenv, e.sls, e.line, e.classification.rule.into_owned())
}

fn some(s: &str) -> Option<String> {
    Some(s.to_owned())
}

#[test]
fn yaml_error_names_sls_line_and_column() {
    let e = render_errors(
        &raw(serde_json::json!(["Rendering SLS 'base:yaml_error' failed: while parsing a flow sequence\n  in \"<unicode string>\", line 3, column 13\ndid not find expected ',' or ']'"])),
        Some(1),
    )
    .expect("a render return");
    assert_eq!(e.len(), 1);
    assert_eq!(
        (
            e[0].saltenv.as_deref(),
            e[0].sls.as_deref(),
            e[0].line,
            e[0].column
        ),
        (Some("base"), Some("yaml_error"), Some(3), Some(13))
    );
    assert!(e[0].message.starts_with("while parsing a flow sequence"));
    assert_eq!(e[0].classification.category, Category::Render);
}

#[test]
fn the_yaml_problem_mark_is_the_line_not_the_context_mark() {
    let e = one(
        "Rendering SLS 'base:r.yaml_indent' failed: while parsing a block mapping\n  in \"<unicode string>\", line 2, column 3\ndid not find expected key\n  in \"<unicode string>\", line 5, column 4",
    );
    assert_eq!((e.line, e.column), (Some(5), Some(4)));
    // The pure loader prints a snippet after each mark.
    let e = one(
        "Rendering SLS 'base:foo.bar' failed: while constructing a mapping\n  in \"<unicode string>\", line 1, column 1:\n    prereqs:\n    ^\nfound conflicting ID 'x'\n  in \"<unicode string>\", line 41, column 1:\n    x:\n    ^",
    );
    assert_eq!((e.line, e.column), (Some(41), Some(1)));
}

#[test]
fn the_line_is_the_template_s_never_salt_s_traceback_frame() {
    let jinja = "Rendering SLS 'base:r.jinja_exc' failed: Jinja error: integer division or modulo by zero\nTraceback (most recent call last):\n  File \"/opt/saltstack/salt/lib/python3.10/site-packages/salt/utils/templates.py\", line 476, in render_jinja_tmpl\n    output = template.render(**decoded_context)\n  File \"<template>\", line 1, in top-level template code\nZeroDivisionError: integer division or modulo by zero\n\n; line 1\n\n---\n{% set workers = 16 // 0 %}    <======================\n---";
    assert_eq!(named(jinja).2, Some(1));
    let imported = "Rendering SLS 'base:r.nginx' failed: Jinja variable 'dict object' has no attribute 'release'\n/var/cache/salt/minion/files/base/r/nginx/map.jinja(67):\n---\n{% set version = nginx.release.version %}    <======================\n---";
    assert_eq!(named(imported).2, Some(67));
    let py = "Rendering SLS roles.web failed, render error: 'NoneType' object is not iterable\nTraceback (most recent call last):\n  File \"/usr/lib/python3/dist-packages/salt/state.py\", line 4078, in render_state\n    state = compile_template(fn_,\n  File \"/var/cache/salt/minion/files/base/roles/web.sls\", line 9, in run\n    for site in __pillar__.get('sites'):\nTypeError: 'NoneType' object is not iterable\n";
    assert_eq!(
        named(py),
        (None, some("roles.web"), Some(9), "rendering_sls".into())
    );
    // Without a position, no line: C-loader YAML errors say none.
    assert_eq!(
        named("Rendering SLS 'base:t.cmd' failed: mapping values are not allowed in this context")
            .2,
        None
    );
}

#[test]
fn every_compile_error_form_names_its_sls() {
    let base = some("base");
    for (text, want) in [
        (
            "No matching sls found for 'nope' in env 'base'",
            (base.clone(), some("nope"), "no_matching_sls"),
        ),
        (
            "Specified SLS r.common.users in saltenv base is not available on the salt master or through a configured fileserver",
            (base.clone(), some("r.common.users"), "sls_not_available"),
        ),
        (
            "Detected conflicting IDs, SLS IDs need to be globally unique.\n    The conflicting ID is 'common_pkgs' and is found in SLS 'base:r.web' and SLS 'base:r.db'",
            (base.clone(), some("r.web"), "conflicting_ids"),
        ),
        (
            "Cannot extend ID 'nginx_service' in 'base:r.extend'. It is not part of the high state.",
            (base.clone(), some("r.extend"), "cannot_extend"),
        ),
        (
            "Nonexistent saltenv 'dev' found in include of 'common.users' within SLS 'base:app.web'",
            (base, some("app.web"), "include"),
        ),
        (
            "Recursive requisites were found: ({'SLS': 'r.recursive', 'ID': 'b'}, 'require', {'SLS': 'r.recursive', 'ID': 'a'})",
            (None, some("r.recursive"), "requisite"),
        ),
        (
            "Referenced state does not exist for requisite [require: (pkg: nginx-package)] in state [svc] in SLS [r.reqmissing]",
            (None, some("r.reqmissing"), "requisite"),
        ),
        (
            "The function \"managed name=/tmp/q\" in state \"x\" in SLS \"r.ws\" has whitespace",
            (None, some("r.ws"), "compile"),
        ),
        (
            "A recursive requisite was found, SLS \"app.order\" ID \"b\" ID \"a\"",
            (None, some("app.order"), "requisite"),
        ),
        (
            "State '/etc/motd' in SLS 'r.notlist' is not formed as a list",
            (None, some("r.notlist"), "compile"),
        ),
        (
            "Invalid requisite type 'pkg.installed' in state 'app_conf', in SLS 'r.badreq'. Requisite types must not contain dots, did you mean 'pkg'?",
            (None, some("r.badreq"), "compile"),
        ),
        (
            "ID mystate in SLS r.notdict is not a dictionary",
            (None, some("r.notdict"), "compile"),
        ),
        (
            "SLS r.notrender does not render to a dictionary",
            (None, some("r.notrender"), "compile"),
        ),
        (
            "SLS 'users' does not render to a dictionary",
            (None, some("users"), "compile"),
        ),
        (
            "Rendering Primary Top file failed, render error:\ncould not find expected ':'",
            (None, some("top"), "pillar_top"),
        ),
        (
            "Rendering Top file roles failed, render error:\nboom",
            (None, some("roles"), "pillar_top"),
        ),
    ] {
        let (saltenv, sls, _, rule) = named(text);
        assert_eq!((saltenv, sls, rule.as_str()), want, "{text}");
    }
    assert_eq!(
        named("Error when rendering state with contents: ['a', 'b']").1,
        None
    );
}

#[test]
fn the_pillar_header_is_not_a_failure_and_its_sls_are_pillar_s() {
    let e = errors(&[
        "Pillar failed to render with the following messages:",
        "Rendering SLS 'secrets.db' failed. Please see master log for details.",
        "Specified SLS 'app.settings' in environment 'base' is not available on the salt master",
    ]);
    let got: Vec<_> = e
        .iter()
        .map(|e| (e.sls.as_deref(), e.saltenv.as_deref(), e.pillar))
        .collect();
    assert_eq!(
        got,
        [
            (Some("secrets.db"), None, true),
            (Some("app.settings"), Some("base"), true)
        ]
    );
    assert_eq!(
        e[0].message,
        "Rendering SLS 'secrets.db' failed. Please see master log for details."
    );
}

#[test]
fn identical_messages_are_one_failure_and_continued_lines_join() {
    let users = "Rendering SLS 'users' failed. Please see master log for details.";
    let e = errors(&[
        "Pillar failed to render with the following messages:",
        users,
        users,
    ]);
    assert_eq!(e.len(), 1);
    let e = errors(&[
        "Detected conflicting IDs, SLS IDs need to be globally unique.",
        "    The conflicting ID is '/usr/local/bin/sbt' and is found in SLS 'base:sbt' and SLS 'RC2:sbt'",
    ]);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].sls.as_deref(), Some("sbt"));
}

#[test]
fn a_run_refused_because_one_is_running_is_one_already_running() {
    let e = errors(&[
        "The function \"state.highstate\" is running as PID 48530 and was started at 2024, Jun 16 09:23:05.584905 with jid 20240616092305584905",
        "The function \"state.sls\" is running as PID 33139 and was started at 2024, Jun 08 09:48:09.707602 with jid 20240608094809707602",
    ]);
    assert_eq!(e.len(), 1);
    assert_eq!(
        (e[0].classification.category, e[0].sls.as_deref()),
        (Category::AlreadyRunning, None)
    );
}

#[test]
fn other_shapes_are_not_render_failures() {
    let errors = |v: serde_json::Value, retcode| render_errors(&raw(v), Some(retcode));
    assert_eq!(errors(serde_json::json!(["x"]), 0), None, "retcode 0");
    assert_eq!(errors(serde_json::json!("text"), 1), None);
    assert_eq!(errors(serde_json::json!([]), 1), None);
    assert_eq!(errors(serde_json::json!(["a", 1]), 1), None);
    let unknown = errors(serde_json::json!(["Pillar failed"]), 1).expect("a list");
    assert_eq!(
        (unknown[0].sls.as_deref(), unknown[0].message.as_str()),
        (None, "Pillar failed")
    );
}
