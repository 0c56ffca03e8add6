//! The map kept true (issue 29): every record kind, output kind, subcommand
//! and top-level module that the code has is named where ARCHITECTURE.md's
//! recipes say it must be, so one left out fails here instead of drifting.

use std::path::Path;

use clap::CommandFactory;
use saltsight::record::RecordKind;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_record_kind_is_documented() {
    let records = read("docs/records.md");
    for kind in RecordKind::NAMES {
        assert!(
            records.contains(&format!("## `{kind}`")),
            "docs/records.md has no `## `{kind}`` section (ARCHITECTURE.md: Add a record kind)"
        );
    }
}

#[test]
fn every_output_kind_is_in_the_example_and_the_docs() {
    let example = read("packaging/saltsight.toml");
    let readme = read("README.md");
    for kind in saltsight::sink::TYPES {
        assert!(
            example.contains(&format!("type = \"{kind}\"")),
            "packaging/saltsight.toml does not show an output of type {kind:?}"
        );
        assert!(
            readme.contains(&format!("`{kind}`")) || readme.contains(&format!("type = \"{kind}\"")),
            "README.md does not name the {kind:?} output"
        );
    }
}

#[test]
fn every_subcommand_is_on_the_map_and_in_the_readme() {
    let map = read("ARCHITECTURE.md");
    let readme = read("README.md");
    let cli = saltsight::cli::Cli::command();
    let mut named = 0;
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        let file = name.replace('-', "_");
        assert!(
            map.contains(&format!("`{file}.rs`")) || map.contains(&format!("`{file}/`")),
            "ARCHITECTURE.md's codemap does not name cli/{file}.rs (Add a subcommand)"
        );
        assert!(
            readme.contains(&format!("saltsight {name}"))
                || readme.contains(&format!("scripts/{name}")),
            "README.md does not show `saltsight {name}`"
        );
        named += 1;
    }
    assert!(named >= 10, "{named} subcommands");
}

#[test]
fn every_top_level_module_is_on_the_map() {
    let map = read("ARCHITECTURE.md");
    let lib = read("src/lib.rs");
    for module in lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';'))
    {
        assert!(
            map.contains(&format!("src/{module}/")) || map.contains(&format!("src/{module}.rs")),
            "ARCHITECTURE.md's codemap does not name src/{module}"
        );
        assert!(
            lib.contains(&format!("[`{module}`]")),
            "src/lib.rs's map does not name {module}"
        );
    }
}
