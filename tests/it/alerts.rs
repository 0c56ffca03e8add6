//! The shipped Prometheus rules and Grafana dashboard: `promtool check rules` and
//! `promtool test rules` (Debian's prometheus package) on every rule, the
//! dashboard well formed, and every metric name both reference made by the
//! in-process registry (and, in `metrics_live`, by a live `/metrics`).

use std::collections::BTreeSet;
use std::process::Command;

use crate::support::prometheus::{PROMTOOL, packaging};

fn promtool(args: &[&str]) -> String {
    let out = Command::new(PROMTOOL)
        .args(args)
        .current_dir(packaging("prometheus"))
        .output()
        .unwrap_or_else(|e| {
            panic!("{PROMTOOL} ({e}): install Debian's prometheus (scripts/setup-debs does)")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// The metric names in PromQL expressions: `saltsight_*`, `salt_*`, `process_*`.
pub fn metric_names(exprs: &[String]) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\b((?:saltsight|salt|process)_[a-z0-9_]+)\b").expect("regex");
    exprs
        .iter()
        .flat_map(|e| {
            re.find_iter(e)
                .map(|m| m.as_str().to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Salt 3008's own metrics, as its Prometheus exporter names them (the
/// master's `metrics:` option; only the main process's reach it): the
/// dashboard shows them beside saltsight's where a master exports them.
/// Series that exist once a watched state tree has a rollout (a `repo` label
/// per checkout): the rollouts' live test scrapes them.
pub const NEED_A_WATCHED_STATE_TREE: &[&str] = &[
    "saltsight_rollout_minions",
    "saltsight_rollout_stalled",
    "saltsight_rollout_pending_since_timestamp_seconds",
    "saltsight_release_delay_seconds_bucket",
    "saltsight_release_delay_seconds_count",
    "saltsight_release_delay_seconds_sum",
];

pub const SALT_OWN_METRICS: &[&str] = &[
    "salt_master_workers_queue_depth",
    "salt_master_connected_minions_count",
    // Salt 3008's OpenTelemetry metrics as Prometheus names them (the
    // dashboard's "Salt's own metrics" row; docs/opentelemetry.md).
    "salt_jobs_published_total",
    "salt_jobs_completed_total",
    "salt_master_requests_duration_milliseconds_bucket",
    "salt_events_fired_total",
    "salt_auth_attempts_total",
];

/// Every `expr:` of the shipped rules (the YAML's block scalars included).
pub fn rule_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(packaging("prometheus/saltsight-rules.yml")).expect("rules");
    let mut exprs = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let indent = line.len() - line.trim_start().len();
        let mut expr = rest.trim().trim_start_matches('|').to_owned();
        while let Some(next) = lines.peek() {
            let next_indent = next.len() - next.trim_start().len();
            if next.trim().is_empty() || next_indent <= indent {
                break;
            }
            expr.push('\n');
            expr.push_str(next.trim());
            lines.next();
        }
        exprs.push(expr);
    }
    exprs
}

/// Every query of the shipped dashboard (panels and template variables).
pub fn dashboard_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(packaging("grafana/saltsight.json")).expect("dashboard");
    let json: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("expr" | "definition", serde_json::Value::String(s)) => {
                            out.push(s.clone())
                        }
                        _ => walk(v, out),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    walk(&json, &mut exprs);
    exprs
}

#[test]
fn the_rules_pass_promtool_check_and_their_unit_tests() {
    let checked = promtool(&["check", "rules", "saltsight-rules.yml"]);
    assert!(checked.contains("SUCCESS: 19 rules found"), "{checked}");
    let tested = promtool(&["test", "rules", "saltsight-rules.test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// Every rule links a runbook, and docs/runbooks.md has a section of that name
/// (its anchor as GitHub and most renderers make it: the heading, lowercased).
#[test]
fn every_rule_links_a_runbook_section_that_exists() {
    let rules =
        std::fs::read_to_string(packaging("prometheus/saltsight-rules.yml")).expect("rules");
    let runbooks = std::fs::read_to_string(packaging("../docs/runbooks.md")).expect("runbooks");
    let sections: BTreeSet<String> = runbooks
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(str::to_lowercase)
        .collect();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    let links: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("runbook_url: "))
        .collect();
    assert_eq!(alerts.len(), links.len(), "every rule has a runbook_url");
    for (alert, link) in alerts.iter().zip(&links) {
        let expected = format!(
            "\"file:///usr/share/doc/saltsight/runbooks.md#{}\"",
            alert.to_lowercase()
        );
        assert_eq!(*link, expected, "{alert}");
        assert!(
            sections.contains(&alert.to_lowercase()),
            "docs/runbooks.md has no section {alert}"
        );
    }
}

#[test]
fn the_rules_and_dashboard_reference_saltsight_metrics_only() {
    let rules = metric_names(&rule_exprs());
    let dashboard = metric_names(&dashboard_exprs());
    assert_eq!(rule_exprs().len(), 19, "one expr per rule");
    assert!(
        rules.contains("saltsight_missing_returns_total"),
        "{rules:?}"
    );
    assert!(dashboard.len() >= 20, "{dashboard:?}");
    for name in rules.iter().chain(&dashboard) {
        assert!(
            name.starts_with("saltsight_")
                || name.starts_with("process_")
                || SALT_OWN_METRICS.contains(&name.as_str()),
            "{name}: the shipped rules and dashboard use saltsight's own names"
        );
    }
    assert!(
        rules
            .iter()
            .all(|n| !SALT_OWN_METRICS.contains(&n.as_str())),
        "no rule depends on Salt's own exporter"
    );
    // Every panel queries the chosen data source and instance.
    for expr in dashboard_exprs() {
        if expr.contains("saltsight_") && !expr.starts_with("label_values") {
            assert!(expr.contains("$instance"), "{expr}");
        }
    }
}

/// The sample names of an exposition (`name{labels} value` or `name value`).
/// The series names an exposition has, and those its families will have once
/// they have a series (a family whose labels come from records, such as a
/// state tree's rollout, is declared before its first series).
pub fn sample_names(exposition: &str) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect();
    for declared in exposition.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let mut parts = declared.split(' ');
        let (name, kind) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        for suffix in suffixes {
            let series = if name.ends_with(suffix) {
                name.to_owned()
            } else {
                format!("{name}{suffix}")
            };
            names.insert(series);
        }
    }
    names
}

/// The registry `run` serves, built in-process with every stage's counts and a
/// spooled output (so the upstream families are there too), as text.
fn exposition() -> String {
    exposition_with("")
}

/// [`exposition`] with more `[metrics]` keys.
fn exposition_with(metrics: &str) -> String {
    let (metrics, _dir) = metrics_with(metrics);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &metrics.registry).expect("encode");
    text
}

/// The whole registry `run` serves, from the one assembly `run` opens, with
/// these `[metrics]` lines and every optional part on: an `http` output, the
/// history, the checkpoint, presence from the master's connections and the
/// Reactor, so that every family the agent can make is there.
fn metrics_with(metrics: &str) -> (saltsight::metrics::Metrics, tempfile::TempDir) {
    use saltsight::pipeline::{AgentOptions, Assembly, OutputChoice, load_config};
    let dir = tempfile::tempdir().expect("tempdir");
    let at = |name: &str| dir.path().join(name).display().to_string();
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "[bus]\nendpoint = \"unix:/unused\"\n[correlate]\ndiscover = false\nstate_repos = {{ states = {states:?} }}\n\
             [metrics]\n{metrics}\n[spool]\ndir = {spool:?}\n[state]\ndir = {state:?}\n[history]\npath = {history:?}\n\
             [presence]\nconnections = true\npublish_port = 1\ncachedir = {cache:?}\n\
             [reactor]\nenabled = true\nendpoint = {pull:?}\n\
             [[output]]\ntype = \"http\"\nname = \"up\"\nurl = \"http://127.0.0.1:1/\"\n",
            states = dir.path().display().to_string(),
            spool = at("spool"),
            state = at("state"),
            history = at("history.db"),
            cache = at("cache"),
            pull = format!("unix:{}", at("pull.ipc")),
        ),
    )
    .expect("config");
    let (config, outputs) = load_config(&saltsight::config::Overrides {
        config: Some(config),
        ..Default::default()
    })
    .expect("config loads");
    let assembly = Assembly::open(
        &config,
        &outputs,
        AgentOptions::service(OutputChoice::Config, Default::default()),
    )
    .expect("the agent's parts open");
    let metrics = assembly.metrics(
        &config,
        Default::default(),
        saltsight::record::redact::Redactor::new(&config.redact).expect("redactor"),
    );
    (metrics, dir)
}

#[test]
fn every_metric_the_rules_and_dashboard_name_is_in_the_registry() {
    let made = sample_names(&exposition());
    let referenced: BTreeSet<String> = metric_names(&rule_exprs())
        .into_iter()
        .chain(metric_names(&dashboard_exprs()))
        .collect();
    let absent: Vec<&String> = referenced
        .iter()
        .filter(|n| !made.contains(*n) && !SALT_OWN_METRICS.contains(&n.as_str()))
        .collect();
    assert!(
        absent.is_empty(),
        "named by the rules or the dashboard, made by no metric: {absent:?}"
    );
}

/// Every family the registry makes is in docs/metrics.md, under its exposed
/// name (a counter's `_total` included), and has help text.
#[test]
fn every_metric_made_is_documented_with_help() {
    let exposition = exposition();
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md"),
    )
    .expect("docs/metrics.md");
    let mut undocumented = Vec::new();
    let mut no_help = Vec::new();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            if help.trim().is_empty() {
                no_help.push(name.to_owned());
            }
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let (name, kind) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let exposed = if kind == "counter" && !name.ends_with("_total") {
                format!("{name}_total")
            } else {
                name.to_owned()
            };
            if !docs.contains(&format!("`{exposed}`")) && !docs.contains(&format!("`{name}`")) {
                undocumented.push(exposed);
            }
        }
    }
    assert!(
        undocumented.is_empty(),
        "not in docs/metrics.md: {undocumented:?}"
    );
    assert!(no_help.is_empty(), "no help text: {no_help:?}");
}

/// `promtool check metrics` on an exposition: whether it passed, and what it said.
fn promtool_check(text: &str) -> (bool, String) {
    let mut child = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{PROMTOOL}: {e}"));
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// salt-exporter's own name for a gauge, kept for its dashboards: the one lint
/// a drop-in must carry.
const INHERITED_LINT: &str =
    "salt_health_minions_total non-counter metrics should not have \"_total\" suffix";

/// promtool's problems, but the inherited one.
fn lint_problems(said: &str) -> Vec<&str> {
    said.lines()
        .filter(|l| !l.trim().is_empty() && *l != INHERITED_LINT)
        .collect()
}

/// More distinct functions (and SLS) than their bounds, through the registry
/// `run` serves: the first ones get values, the rest are `other` and counted
/// once each, and the exposition stays clean for promtool.
#[test]
fn every_metric_stays_bounded_past_max_functions() {
    use saltsight::event::{decode, encode_frame};
    let (mut metrics, _dir) = metrics_with("max_functions = 16\nsalt_exporter_compat = true\n");
    let mut event = |tag: &str, data: serde_json::Value| {
        let frame = encode_frame(tag, &rmp_serde::to_vec_named(&data).unwrap(), false);
        metrics.observer.event(&decode(&frame).expect("decode"));
    };
    for i in 0..40 {
        let jid = format!("2026112601000000{i:04}");
        let fun = format!("custom_module.function_{i}");
        event(
            &format!("salt/job/{jid}/new"),
            serde_json::json!({"jid": jid, "fun": fun, "arg": [], "minions": ["web1"], "tgt": "web1"}),
        );
        event(
            &format!("salt/job/{jid}/ret/web1"),
            serde_json::json!({"jid": jid, "id": "web1", "fun": fun, "fun_args": [], "retcode": 0, "return": true}),
        );
    }
    for i in 0..600 {
        let jid = format!("2026112602000000{i:04}");
        event(
            &format!("salt/job/{jid}/new"),
            serde_json::json!({"jid": jid, "fun": "state.sls", "arg": [format!("role{i}")], "minions": ["web1"]}),
        );
    }
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &metrics.registry).expect("encode");
    let functions: BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("salt_new_job_total{"))
        .filter_map(|l| l.split("function=\"").nth(1)?.split('"').next())
        .collect();
    // 14 default functions, so 2 learned, then `other`.
    assert_eq!(functions.len(), 3 + 1, "{functions:?}");
    assert!(functions.contains("other") && functions.contains("custom_module.function_1"));
    let refused = |label: &str| {
        text.lines()
            .find(|l| {
                l.starts_with(&format!(
                    "saltsight_metric_label_values_refused_total{{label=\"{label}\"}}"
                ))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
    };
    assert_eq!(refused("function"), Some(38));
    assert_eq!(refused("state"), Some(600 - 499));
    let (ok, said) = promtool_check(&saltsight::metrics::exposition::to_text_format(&text));
    assert!(
        ok || lint_problems(&said).is_empty(),
        "promtool check metrics:\n{said}"
    );
}

/// `promtool check metrics` (which reads Prometheus' 0.0.4 text format) passes
/// on what `/metrics` serves a scraper that does not ask for OpenMetrics, with
/// every optional family on; and on the OpenMetrics form it would fail (its
/// counters' help is under the family's name, not the `_total` series').
#[test]
fn every_metric_passes_promtool_check_metrics() {
    let check = promtool_check;
    for metrics in ["", "per_minion = true\nsalt_exporter_compat = true\n"] {
        let openmetrics = exposition_with(metrics);
        let text = saltsight::metrics::exposition::to_text_format(&openmetrics);
        let (ok, said) = check(&text);
        // salt-exporter's own name for a gauge, kept for its dashboards: the
        // one lint a drop-in must carry.
        let inherited =
            "salt_health_minions_total non-counter metrics should not have \"_total\" suffix";
        let other_problems: Vec<&str> = said
            .lines()
            .filter(|l| !l.trim().is_empty() && *l != inherited)
            .collect();
        assert!(
            ok || other_problems.is_empty(),
            "promtool check metrics with [metrics] {metrics:?}:\n{said}"
        );
        let (ok, said) = check(&openmetrics);
        assert!(!ok && said.contains("no help text"), "{said}");
    }
}
