//! Architecture rules from ARCHITECTURE.md, checked: every source file says what
//! it holds in a `//!` first line; stages import only stages to their left and the
//! leaves; no file grows past a screenful of screens.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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

#[test]
fn every_source_file_opens_with_a_module_doc() {
    for (path, text) in src_files() {
        assert!(
            text.starts_with("//!"),
            "src/{path} must start with a `//!` line saying what it holds"
        );
    }
}

/// The top-level modules a source file names through `crate::` paths, including
/// grouped imports (`use crate::{app, bus::X}`).
fn crate_modules(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            for item in body.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.insert(name);
        }
    }
    found
}

#[test]
fn stages_import_only_to_their_left() {
    // Stage → crate modules it must not name. `config` is a leaf that may name
    // `bus` for the `Endpoint` type it resolves; nothing else of the pipeline.
    let forbidden: &[(&str, &[&str])] = &[
        (
            "bus/",
            &[
                "event", "jobs", "record", "app", "cli", "sink", "metrics", "lab", "shutdown",
                "service",
            ],
        ),
        (
            "event/",
            &[
                "jobs", "record", "app", "cli", "sink", "metrics", "lab", "shutdown", "service",
            ],
        ),
        (
            "jobs/",
            &[
                "app", "cli", "sink", "metrics", "lab", "shutdown", "service",
            ],
        ),
        (
            "triage/",
            &["app", "cli", "sink", "metrics", "lab", "service"],
        ),
        (
            "correlate/",
            &["app", "cli", "sink", "metrics", "lab", "service"],
        ),
        (
            "record/",
            &[
                "bus", "jobs", "app", "cli", "sink", "metrics", "lab", "service",
            ],
        ),
        (
            "config/",
            &[
                "event", "jobs", "record", "app", "cli", "sink", "metrics", "lab", "service",
            ],
        ),
        (
            "sink/",
            &[
                "jobs",
                "triage",
                "correlate",
                "app",
                "cli",
                "metrics",
                "lab",
                "service",
            ],
        ),
        // Metrics see events and records (and read the reader's and spools'
        // atomics), never the stages that judge them.
        (
            "metrics/",
            &[
                "triage",
                "correlate",
                "app",
                "cli",
                "lab",
                "shutdown",
                "service",
            ],
        ),
        ("app.rs", &["cli", "lab"]),
    ];
    for (path, text) in src_files() {
        // `super::super::` would leave the stage's own directory.
        assert!(
            !text.contains("super::super::"),
            "src/{path} reaches out with super::super::"
        );
        let named = crate_modules(&text);
        for (stage, banned) in forbidden {
            if !path.starts_with(stage) {
                continue;
            }
            for module in *banned {
                assert!(
                    !named.contains(*module),
                    "src/{path} names crate::{module}: {stage} may not depend on {module}"
                );
            }
        }
    }
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
fn no_source_file_is_longer_than_700_lines() {
    for (path, text) in src_files() {
        let lines = text.lines().count();
        assert!(
            lines <= 700,
            "src/{path} has {lines} lines; split it by what it does"
        );
    }
}
