//! Normalisation on what really varies between minions, and fingerprints that
//! group one failure and keep two apart.

use super::*;
use crate::record::Category;
use crate::triage::category::{FailureText, classify};

#[test]
fn minion_specific_parts_are_replaced() {
    let web1 = "Unable to manage file: /tmp/slA/m/web1/cache/labout/x.txt: mode 0644 on 10.0.0.12 failed after 3 tries";
    let db1 = "Unable to manage file: /tmp/slA/m/db1/cache/labout/x.txt: mode 0644 on 10.0.0.7 failed after 4 tries";
    assert_eq!(normalise(web1), normalise(db1));
    assert_eq!(
        normalise(web1),
        "Unable to manage file: <path>: mode <n> on <ip> failed after <n> tries"
    );
}

#[test]
fn urls_hosts_and_ids_are_replaced() {
    assert_eq!(
        normalise("Failed to fetch http://deb.example.org/a.deb from mirror3.example.org"),
        "Failed to fetch <url> from <host>"
    );
    assert_eq!(
        normalise("container 3f2a9c1d failed, request 123e4567-e89b-12d3-a456-426614174000"),
        "container <hex> failed, request <id>"
    );
}

#[test]
fn words_and_state_names_stay() {
    assert_eq!(
        normalise("One or more requisite failed: fail.lab_failing_cmd"),
        "One or more requisite failed: fail.lab_failing_cmd"
    );
    assert_eq!(
        normalise("Command \"exit 1\" run"),
        "Command \"exit <n>\" run"
    );
    assert_eq!(
        normalise("deadbeef accede"),
        "deadbeef accede",
        "hex without a digit"
    );
}

#[test]
fn systemd_scope_units_and_their_banner_go() {
    let with = |banner: &str| {
        normalise(&format!(
            "errors:\n    - {banner}\n      E: Unable to locate package checkinstall"
        ))
    };
    let plain = normalise("errors:\n    - E: Unable to locate package checkinstall");
    for banner in [
        "Running scope as unit: run-r41e6097fc95b4ce1b5ed496d3728e58e.scope",
        "Running scope as unit run-rc80a75904a23fdfa494f45ad0b35e932.scope.",
        "Running scope as unit run-50509.scope.",
    ] {
        assert_eq!(with(banner), plain, "{banner}");
    }
    // Outside the banner, a unit id is still an id.
    assert_eq!(
        normalise("Failed to stop run-r41e6097fc95b4ce1b5ed496d3728e58e.scope"),
        normalise("Failed to stop run-r94266788d30c052f4658bcd76ab6336a.scope")
    );
}

#[test]
fn addresses_times_and_dates_are_replaced() {
    assert_eq!(
        normalise("<urllib3.connection.HTTPSConnection object at 0x7fed8a077860>"),
        normalise("<urllib3.connection.HTTPSConnection object at 0x7f5dc0c4ede8>")
    );
    assert_eq!(
        normalise(
            "Last metadata expiration check: 1 day, 2:10:05 ago on Sat May 20 10:01:02 2023."
        ),
        normalise("Last metadata expiration check: 0:19:01 ago on Fri Jun 23 22:41:43 2023.")
    );
    assert_eq!(
        normalise(
            "Last metadata expiration check: 3 days, 0:00:41 ago on Sat 20 May 2023 10:01:02 AM UTC."
        ),
        "Last metadata expiration check: <dur> ago on <date>."
    );
    assert_eq!(
        normalise("--2024-05-21 10:01:11--  <x>"),
        normalise("--2024-06-01 23:59:59--  <x>")
    );
    assert_eq!(
        normalise(
            "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 2231 (unattended-upgr)"
        ),
        normalise(
            "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 977 (apt-get)"
        )
    );
}

#[test]
fn traceback_frames_go_and_the_exception_stays() {
    let deb = "Traceback (most recent call last):\n  File \"/usr/lib/python3/dist-packages/salt/state.py\", line 2485, in call\n    ret = self.states[cdata[\"full\"]](\n  File \"/usr/lib/python3/dist-packages/salt/states/file.py\", line 3911, in directory\n    os.makedirs(name)\nPermissionError: [Errno 13] Permission denied: '/srv/a'\n";
    let onedir = "Traceback (most recent call last):\n  File \"/opt/saltstack/salt/lib/python3.10/site-packages/salt/state.py\", line 2433, in call\n    ret = self.states[cdata[\"full\"]](\n          ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File \"/opt/saltstack/salt/lib/python3.10/site-packages/salt/states/file.py\", line 3887, in directory\n    os.makedirs(name)\nPermissionError: [Errno 13] Permission denied: '/srv/a'\n";
    assert_eq!(normalise(deb), normalise(onedir));
    assert!(normalise(deb).ends_with("PermissionError: [Errno <n>] Permission denied: '<path>'"));
}

fn key<'a>(function: &'a str, normalised: &'a str) -> StateKey<'a> {
    StateKey {
        function,
        sls: "app.register",
        state_id: "register",
        normalised,
        exit_code: Some(1),
        stderr_line: "",
    }
}

fn cmd(stderr: &str) -> Classification {
    classify(&FailureText {
        function: "cmd.run",
        comment: "Command \"curl -fsS -X PUT http://consul.example.net:8500/v1/agent\" run",
        stderr: Some(stderr),
        stdout: None,
        exit_code: Some(7),
    })
}

#[test]
fn one_failure_in_two_tool_versions_is_one_fingerprint() {
    let old =
        cmd("curl: (7) Failed to connect to consul.example.net port 8500: Connection refused");
    let new = cmd(
        "curl: (7) Failed to connect to consul.example.net port 8500 after 0 ms: Couldn't connect to server",
    );
    let n = "Command <x> run";
    assert_eq!(
        of_state(&key("cmd.run", n), &old),
        of_state(&key("cmd.run", n), &new)
    );
}

#[test]
fn a_refusal_and_a_name_that_does_not_resolve_are_two_failures_of_one_state() {
    let refused = cmd(
        "curl: (7) Failed to connect to consul.example.net port 8500 after 0 ms: Couldn't connect to server",
    );
    let dns = cmd("curl: (6) Could not resolve host: consul.example.net");
    let n = "Command <x> run";
    assert_ne!(
        of_state(&key("cmd.run", n), &refused),
        of_state(&key("cmd.run", n), &dns)
    );
    // The function is part of it too.
    assert_ne!(
        of_state(&key("cmd.run", n), &dns),
        of_state(&key("cmd.wait", n), &dns)
    );
}

#[test]
fn two_packages_are_two_failures() {
    let missing = |p: &str| {
        classify(&FailureText::comment(&format!(
            "Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: Unable to locate package {p}"
        )))
    };
    let n = "<x>";
    assert_ne!(
        of_state(&key("pkg.installed", n), &missing("jq")),
        of_state(&key("pkg.installed", n), &missing("yq"))
    );
}

#[test]
fn a_command_no_rule_explains_is_its_comment_exit_code_and_last_error_line() {
    let exit = classify(&FailureText {
        function: "cmd.run",
        comment: "Command \"./migrate\" run",
        stderr: Some("x"),
        stdout: None,
        exit_code: Some(3),
    });
    assert_eq!(exit.category, Category::Command);
    let of = |code: i64, stderr: &str| {
        of_state(
            &StateKey {
                exit_code: Some(code),
                stderr_line: &last_line(Some(stderr)),
                ..key("cmd.run", "Command \"./migrate\" run")
            },
            &exit,
        )
    };
    let web1 = "started at 10:01:02\nERROR: migration 0042 failed on 10.0.0.12";
    let web2 = "started at 11:12:13\nERROR: migration 0042 failed on 10.0.0.7\n\n";
    assert_eq!(of(3, web1), of(3, web2));
    assert_ne!(of(3, web1), of(4, web1), "exit code");
    assert_ne!(
        of(3, web1),
        of(3, "ERROR: relation exists"),
        "what it said last"
    );
}

#[test]
fn render_fingerprints_keep_pillar_and_state_apart_and_a_refusal_one() {
    let render = Classification {
        category: Category::Render,
        rule: "rendering_sls".into(),
        evidence: None,
        host: None,
        url: None,
        package: None,
    };
    assert_ne!(
        of_render(Some("users"), true, "x", &render),
        of_render(Some("users"), false, "x", &render)
    );
    let running = Classification {
        category: Category::AlreadyRunning,
        rule: "already_running".into(),
        ..render.clone()
    };
    let message = |pid: u32, jid: &str| {
        normalise(&format!(
            "The function \"state.apply\" is running as PID {pid} and was started at 2024, May 27 07:47:27.482442 with jid {jid}"
        ))
    };
    assert_eq!(
        of_render(
            None,
            false,
            &message(53176, "20240527074727482442"),
            &running
        ),
        of_render(None, false, &message(811, "20240601101010000001"), &running)
    );
}

#[test]
fn fingerprints_are_stable_and_separate_parts() {
    assert_eq!(fingerprint(&["a", "b"]), fingerprint(&["a", "b"]));
    assert_ne!(fingerprint(&["ab", "c"]), fingerprint(&["a", "bc"]));
    assert_eq!(fingerprint(&["a"]).len(), 16);
    // Pinned: a fingerprint must not change between builds.
    assert_eq!(fingerprint(&["state", "cmd.run"]), "5b8628b63f61eedf");
}

/// Every string in the triage corpus: the patterns compiled with ASCII
/// classes, as they are, normalise it as they did compiled with the Unicode
/// classes they are written with, so fingerprints of texts like these stay
/// what they were.
#[test]
fn ascii_classes_normalise_the_corpus_as_unicode_ones_did() {
    let as_written = |pattern: &str| pattern.to_owned();
    let varying = compile(varying_patterns(), as_written);
    let last = compile(last_patterns(), as_written);
    let texts = crate::triage::patterns::corpus_texts();
    assert!(texts.len() > 5000, "only {} texts", texts.len());
    for text in &texts {
        assert_eq!(
            normalise(text),
            normalise_with(&varying, &last, text),
            "{text}"
        );
    }
    // Outside ASCII, digits and spaces are words like any other.
    assert_eq!(normalise("retry ٣ of 3"), "retry ٣ of <n>");
}
