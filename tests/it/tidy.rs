//! Architecture rules from ARCHITECTURE.md, checked: every source file says what
//! it holds in a `//!` first line; stages import only stages to their left and the
//! leaves; no file grows past a screenful of screens.

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

#[test]
fn stages_import_only_to_their_left() {
    // Stage → crate modules it must not name.
    let forbidden: &[(&str, &[&str])] = &[
        ("bus/", &["event", "app", "cli", "sink", "lab", "shutdown"]),
        ("event/", &["app", "cli", "sink", "lab", "shutdown"]),
        ("config/", &["event", "app", "cli", "sink", "lab"]),
        ("sink/", &["app", "cli", "lab"]),
        ("app.rs", &["cli", "lab"]),
    ];
    for (path, text) in src_files() {
        for (stage, banned) in forbidden {
            if !path.starts_with(stage) {
                continue;
            }
            for module in *banned {
                let needle = format!("crate::{module}");
                assert!(
                    !text.contains(&needle),
                    "src/{path} uses {needle}: {stage} may not depend on {module}"
                );
            }
        }
    }
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
