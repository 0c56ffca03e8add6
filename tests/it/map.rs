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

/// The codemap's rows under `src/`: each row's folder and its cells.
fn codemap_rows(map: &str) -> Vec<(String, Vec<String>)> {
    let section = map
        .split("\n## Codemap")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("ARCHITECTURE.md has a ## Codemap section");
    section
        .lines()
        .filter(|line| line.starts_with("| `src/"))
        .map(|line| {
            let cells: Vec<String> = line
                .trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().to_owned())
                .collect();
            (cells[0].trim_matches('`').to_owned(), cells)
        })
        .collect()
}

fn source_files(dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("src/ reads") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            source_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            let relative = path.strip_prefix(root).expect("under the crate");
            found.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// Every file under `src/` is named in the codemap row of its folder (the
/// row of the longest folder holding it): by its path from that folder, a
/// folder's `mod.rs` by the folder (`tracker/`); and each row says what its
/// folder holds in at most two lines.
#[test]
fn every_file_under_src_is_named_in_its_codemap_row() {
    let map = read("ARCHITECTURE.md");
    let rows = codemap_rows(&map);
    assert!(rows.len() >= 10, "{} codemap rows under src/", rows.len());
    let mut files = Vec::new();
    source_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    files.sort();
    let mut unnamed = Vec::new();
    for file in &files {
        let Some((folder, cells)) = rows
            .iter()
            .filter(|(folder, _)| file.starts_with(folder.as_str()))
            .max_by_key(|(folder, _)| folder.len())
        else {
            unnamed.push(format!("{file} (no row holds it)"));
            continue;
        };
        let row = cells.join(" | ");
        let relative = &file[folder.len()..];
        let named = match relative.strip_suffix("mod.rs") {
            Some("") => true,
            Some(sub) => row.contains(&format!("`{sub}`")),
            None => row.contains(&format!("`{relative}`")),
        };
        if !named {
            unnamed.push(format!("{file} (row {folder})"));
        }
    }
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md's codemap does not name these files in their folder's row: {unnamed:#?}"
    );
    for (folder, cells) in &rows {
        let holds = cells.get(1).map_or(0, |c| c.chars().count());
        assert!(
            holds <= 220,
            "the codemap row of {folder} says what it holds in {holds} characters: two lines (220) at most, the files named in their own column"
        );
    }
}
