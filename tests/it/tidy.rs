//! Architecture rules from ARCHITECTURE.md, checked: every source file says what
//! it holds in a `//!` first line; modules import only modules to their left in
//! the data flow (and stages reach the bus only through `event`); no file imports
//! a sibling that imports it back; no file grows past a screenful of screens.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every top-level module, left to right: a module may name only modules to its
/// left. The leaves come first (labels, time, rate limits), then the data flow
/// (bytes → events → stages → outputs and metrics), then the wiring.
const ORDER: &[&str] = &[
    "label",
    "counter",
    "time",
    "ratelimit",
    "fifo",
    "cow",
    "minion_states",
    "names",
    "plain",
    "bus",
    "master_processes",
    "master_connections",
    "master_keys",
    "config",
    "record",
    "event",
    "jobs",
    "triage",
    "correlate",
    "incident",
    "pressure",
    "drift",
    "history",
    "sink",
    "metrics",
    "reactor",
    "service",
    "shutdown",
    "pipeline",
    "lab",
    "cli",
];

/// Modules to the left that a module still may not name: stages see the bus only
/// through `event` (bytes carry no Salt meaning), and outputs and metrics know
/// records, not the stages that make them.
const SKIPS: &[(&str, &[&str])] = &[
    ("jobs", &["bus"]),
    ("triage", &["bus", "jobs"]),
    ("correlate", &["bus", "event", "jobs"]),
    ("incident", &["bus", "event", "jobs", "triage", "correlate"]),
    (
        "pressure",
        &["bus", "jobs", "triage", "correlate", "incident"],
    ),
    (
        "sink",
        &[
            "bus",
            "event",
            "jobs",
            "triage",
            "correlate",
            "incident",
            "pressure",
        ],
    ),
    (
        "metrics",
        &["jobs", "triage", "correlate", "incident", "pressure"],
    ),
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .expect("read src")
        .filter_map(Result::ok)
    {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn src_files() -> Vec<(String, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&root)
                .expect("under src")
                .to_string_lossy()
                .into_owned();
            (rel, std::fs::read_to_string(&p).expect("read source"))
        })
        .collect()
}

/// `config/file.rs` → `config`; `app.rs` → `app`; `main.rs`, `lib.rs` → none.
fn top_module(path: &str) -> Option<&str> {
    let first = path.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "main" | "lib")).then_some(name)
}

#[test]
fn every_source_file_opens_with_a_module_doc() {
    for (path, text) in src_files() {
        assert!(
            text.starts_with("//!"),
            "src/{path} must start with a `//!` line saying what it holds"
        );
    }
}

/// The paths after `prefix` (`crate::`, `super::`) a text names, one per item of
/// a grouped import (`use crate::{app, bus::X}` → `app`, `bus::X`).
fn paths_after(text: &str, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect::<String>()
            .trim_end_matches(':')
            .to_owned()
    };
    for (at, _) in text.match_indices(prefix) {
        // `super::super::` is seen at its first `super::`.
        if prefix == "super::" && text[..at].ends_with("super::") {
            continue;
        }
        let rest = &text[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            found.extend(
                body.split(',')
                    .map(|i| word(i.trim()))
                    .filter(|w| !w.is_empty()),
            );
        } else {
            found.push(word(rest));
        }
    }
    found
}

/// The top-level modules a source file names through `crate::` paths.
fn crate_modules(text: &str) -> BTreeSet<String> {
    paths_after(text, "crate::")
        .into_iter()
        .filter_map(|p| p.split("::").next().map(str::to_owned))
        // The crate's exported macros are named from the crate root.
        .filter(|m| !m.is_empty() && !matches!(m.as_str(), "label_set" | "counts"))
        .collect()
}

#[test]
fn the_import_scanner_sees_grouped_imports() {
    let named =
        crate_modules("use crate::{app, bus::X};\nuse crate::event::Y;\nlet z = crate::jobs::f();");
    assert_eq!(
        named,
        BTreeSet::from(["app", "bus", "event", "jobs"].map(String::from))
    );
}

#[test]
fn every_module_has_its_place_in_the_order() {
    for (path, _) in src_files() {
        if let Some(module) = top_module(&path) {
            assert!(
                ORDER.contains(&module),
                "src/{path}: module `{module}` is not in tidy.rs's ORDER; place it in the data flow"
            );
        }
    }
}

/// Every rule a file breaks: a module to its right, or one it must reach
/// through another.
fn back_arrows(path: &str, text: &str) -> Vec<String> {
    let Some(module) = top_module(path) else {
        return Vec::new();
    };
    let Some(at) = ORDER.iter().position(|m| *m == module) else {
        return Vec::new();
    };
    let skipped: &[&str] = SKIPS
        .iter()
        .find(|(m, _)| *m == module)
        .map_or(&[], |(_, s)| s);
    let mut broken = Vec::new();
    for named in crate_modules(text) {
        if named == module {
            continue;
        }
        match ORDER.iter().position(|m| *m == named) {
            Some(i) if i > at => broken.push(format!(
                "src/{path} names crate::{named}, which is to the right of {module}"
            )),
            Some(_) if skipped.contains(&named.as_str()) => broken.push(format!(
                "src/{path} names crate::{named}; {module} reaches it only through the stage between"
            )),
            Some(_) => {}
            None => broken.push(format!("src/{path} names crate::{named}, not in ORDER")),
        }
    }
    if text.contains("super::super::") {
        broken.push(format!("src/{path} reaches out with super::super::"));
    }
    broken
}

#[test]
fn modules_import_only_to_their_left() {
    let broken: Vec<String> = src_files()
        .iter()
        .flat_map(|(path, text)| back_arrows(path, text))
        .collect();
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn each_known_back_arrow_is_caught() {
    // The arrows issue 16 removed: each must fail the rule if it came back.
    for (path, line) in [
        (
            "config/file.rs",
            "let t = crate::triage::TriageConfig::default();",
        ),
        (
            "config/example.rs",
            "use crate::correlate::CorrelateConfig;",
        ),
        ("jobs/states.rs", "use crate::bus::msgpack::Cursor;"),
        ("triage/mod.rs", "use crate::bus::msgpack::Cursor;"),
        ("sink/http.rs", "use crate::event::Stamp;"),
        ("sink/retry.rs", "use crate::event::stamp::days_from_civil;"),
        (
            "metrics/salt_exporter.rs",
            "use crate::jobs::{args, states};",
        ),
        ("event/mod.rs", "use crate::jobs::JobTracker;"),
        ("sink/mod.rs", "use crate::pipeline::Clock;"),
    ] {
        assert!(
            !back_arrows(path, line).is_empty(),
            "{path}: `{line}` is not caught"
        );
    }
}

/// `config/file.rs` → ["config", "file"]; `config/mod.rs` → ["config"].
fn module_path(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = path
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The files of one module that `text` (the file at `path`) names, through
/// `crate::` or `super::` paths, as module paths (the deepest that is a file).
fn named_files(path: &str, text: &str, files: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let me = module_path(path);
    let is_mod_rs = path.ends_with("mod.rs");
    let mut named = BTreeSet::new();
    let mut resolve = |mut base: Vec<String>, rest: &str| {
        for part in rest.split("::").filter(|p| !p.is_empty()) {
            let mut next = base.clone();
            next.push(part.to_owned());
            if files.contains(&next) {
                base = next;
            } else {
                break;
            }
        }
        named.insert(base);
    };
    for p in paths_after(text, "crate::") {
        resolve(Vec::new(), &p);
    }
    // `super::` from a file is its folder's module; from a mod.rs, the parent's.
    let parent: Vec<String> =
        me[..me.len() - 1 - usize::from(is_mod_rs).min(me.len() - 1)].to_vec();
    for p in paths_after(text, "super::") {
        resolve(parent.clone(), &p);
    }
    named.remove(&me);
    named.remove(&Vec::new());
    named
}

#[test]
fn no_file_imports_a_sibling_that_imports_it_back() {
    let sources = src_files();
    let files: BTreeSet<Vec<String>> = sources.iter().map(|(p, _)| module_path(p)).collect();
    // Edges within one top-level module; a parent declaring or re-exporting its
    // children (`mod.rs` → child) is its structure, not a dependency.
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (path, text) in &sources {
        let me = module_path(path);
        for to in named_files(path, text, &files) {
            let same_module = to.first() == me.first();
            let to_descendant = to.len() > me.len() && to[..me.len()] == me[..];
            if same_module && !to_descendant {
                edges.entry(me.clone()).or_default().insert(to);
            }
        }
    }
    let mut circles = Vec::new();
    for (from, tos) in &edges {
        for to in tos {
            if reaches(&edges, to, from, &mut BTreeSet::new()) && from < to {
                circles.push(format!("{} <-> {}", from.join("::"), to.join("::")));
            }
        }
    }
    assert!(circles.is_empty(), "import circles: {}", circles.join(", "));
}

fn reaches(
    edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    from: &Vec<String>,
    to: &Vec<String>,
    seen: &mut BTreeSet<Vec<String>>,
) -> bool {
    if from == to {
        return true;
    }
    if !seen.insert(from.clone()) {
        return false;
    }
    edges
        .get(from)
        .is_some_and(|next| next.iter().any(|n| reaches(edges, n, to, seen)))
}

#[test]
fn the_circle_check_sees_a_sibling_circle() {
    let files: BTreeSet<Vec<String>> = ["config/file.rs", "config/resolve.rs", "config/mod.rs"]
        .iter()
        .map(|p| module_path(p))
        .collect();
    let file = named_files("config/file.rs", "use super::resolve::DEFAULT_X;", &files);
    let resolve = named_files("config/resolve.rs", "use super::file::FileConfig;", &files);
    assert!(file.contains(&module_path("config/resolve.rs")), "{file:?}");
    assert!(
        resolve.contains(&module_path("config/file.rs")),
        "{resolve:?}"
    );
}

#[test]
fn no_source_file_is_longer_than_700_lines() {
    for (path, text) in src_files() {
        let lines = text.lines().count();
        assert!(
            lines <= 700,
            "src/{path} has {lines} lines; split it by what it does"
        );
    }
}
