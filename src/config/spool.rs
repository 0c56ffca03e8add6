//! Where records go, as the config file says: the `[spool]` section, resolved
//! here, and the `[[output]]` list, kept as written ([`RawOutput`]): each
//! output kind (`sink`'s registry) reads its own keys, and its problems join
//! the config's through [`super::load_with`].

use std::path::PathBuf;

use serde::Deserialize;

use super::defaults::{DEFAULT_SPOOL_DIR, DEFAULT_SPOOL_MAX_BYTES};

/// `[spool]` as written.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SpoolSection {
    pub dir: Option<PathBuf>,
    pub max_bytes: Option<u64>,
    pub fsync: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolConfig {
    /// Each output that spools keeps its batches in `<dir>/<output name>/`.
    pub dir: PathBuf,
    /// Bound on each output's spool; past it the oldest batches are dropped.
    pub max_bytes: u64,
    /// fsync each batch (and its directory) when it is sealed.
    pub fsync: bool,
}

impl Default for SpoolConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from(DEFAULT_SPOOL_DIR),
            max_bytes: DEFAULT_SPOOL_MAX_BYTES,
            fsync: true,
        }
    }
}

pub fn resolve_spool(section: &SpoolSection, errors: &mut Vec<String>) -> SpoolConfig {
    let defaults = SpoolConfig::default();
    let max_bytes = section.max_bytes.unwrap_or(defaults.max_bytes);
    // Each output's batch_max_bytes must fit four times (checked per output).
    if max_bytes < 4096 {
        errors.push(format!(
            "spool.max_bytes is {max_bytes}; it must be at least 4096"
        ));
    }
    let dir = section.dir.clone().unwrap_or(defaults.dir);
    if !dir.is_absolute() {
        errors.push(format!("spool.dir {} must be absolute", dir.display()));
    } else if let Some(problem) = not_a_directory_path(&dir) {
        errors.push(format!("spool.dir {}: {problem}", dir.display()));
    }
    SpoolConfig {
        dir,
        max_bytes,
        fsync: section.fsync.unwrap_or(defaults.fsync),
    }
}

/// Why `dir` cannot be (or become) a directory: it is something else, or
/// what would hold it is. `None` when it is one, or can be made.
pub fn not_a_directory_path(dir: &std::path::Path) -> Option<String> {
    let mut at = Some(dir);
    while let Some(path) = at {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => return None,
            Ok(_) if path == dir => return Some("it exists and is not a directory".into()),
            Ok(_) => return Some(format!("{} is not a directory", path.display())),
            Err(_) => at = path.parent(),
        }
    }
    None
}

/// One `[[output]]` as written: its position, its `type` and `name` (the name
/// defaults to the type), and every key (the type and name included).
#[derive(Debug, Clone, PartialEq)]
pub struct RawOutput {
    pub index: usize,
    pub kind: String,
    pub name: String,
    pub table: toml::Table,
}

impl RawOutput {
    /// `output[2] (clickhouse)`: how problems name it.
    pub fn at(&self) -> String {
        format!("output[{}] ({})", self.index, self.name)
    }

    /// The one output used when none is configured.
    pub fn stdout() -> Self {
        let mut table = toml::Table::new();
        table.insert("type".into(), "stdout".into());
        Self {
            index: 0,
            kind: "stdout".into(),
            name: "stdout".into(),
            table,
        }
    }
}

/// The `[[output]]` tables with their type and name read; a missing `type` or a
/// name that cannot name a spool directory, or a repeated one, is a problem here.
/// None configured means one: stdout.
pub fn raw_outputs(tables: &[toml::Table], errors: &mut Vec<String>) -> Vec<RawOutput> {
    if tables.is_empty() {
        return vec![RawOutput::stdout()];
    }
    let mut names = std::collections::BTreeSet::new();
    let mut outputs = Vec::new();
    for (index, table) in tables.iter().enumerate() {
        let text = |key: &str| match table.get(key) {
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            None => Ok(None),
            Some(other) => Err(format!(
                "`{key}` must be a string, not {}",
                other.type_str()
            )),
        };
        let kind = match text("type") {
            Ok(Some(kind)) => kind,
            Ok(None) => {
                errors.push(format!("output[{index}]: `type` is missing"));
                continue;
            }
            Err(problem) => {
                errors.push(format!("output[{index}]: {problem}"));
                continue;
            }
        };
        let name = match text("name") {
            Ok(name) => name.unwrap_or_else(|| kind.clone()),
            Err(problem) => {
                errors.push(format!("output[{index}]: {problem}"));
                continue;
            }
        };
        let at = format!("output[{index}] ({name})");
        if !valid_name(&name) {
            errors.push(format!(
                "{at}: name {name:?} must be letters, digits, '-' or '_' (it names a spool directory)"
            ));
        } else if !names.insert(name.clone()) {
            errors.push(format!(
                "{at}: two outputs are named {name:?}; give each a unique name"
            ));
        }
        outputs.push(RawOutput {
            index,
            kind,
            name,
            table: table.clone(),
        });
    }
    outputs
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> (Vec<RawOutput>, Vec<String>) {
        #[derive(Deserialize)]
        struct Doc {
            #[serde(default)]
            output: Vec<toml::Table>,
        }
        let doc: Doc = toml::from_str(text).expect("toml");
        let mut errors = Vec::new();
        (raw_outputs(&doc.output, &mut errors), errors)
    }

    #[test]
    fn no_output_means_stdout() {
        assert_eq!(raw(""), (vec![RawOutput::stdout()], vec![]));
    }

    #[test]
    fn names_default_to_the_type_and_must_be_unique_and_a_directory_name() {
        let (outputs, errors) = raw(
            "[[output]]\ntype = \"file\"\n[[output]]\ntype = \"file\"\n[[output]]\ntype = \"http\"\nname = \"a/b\"\n[[output]]\nname = \"x\"\n",
        );
        assert_eq!(outputs.len(), 3);
        assert_eq!(outputs[0].at(), "output[0] (file)");
        let all = errors.join("\n");
        for expected in [
            "output[1] (file): two outputs are named \"file\"",
            "output[2] (a/b): name \"a/b\" must be",
            "output[3]: `type` is missing",
        ] {
            assert!(all.contains(expected), "{expected:?} not in:\n{all}");
        }
    }

    #[test]
    fn a_spool_dir_that_is_a_file_is_named_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("spool");
        std::fs::write(&file, "").unwrap();
        for path in [file.clone(), file.join("below")] {
            let mut errors = Vec::new();
            resolve_spool(
                &SpoolSection {
                    dir: Some(path.clone()),
                    ..SpoolSection::default()
                },
                &mut errors,
            );
            assert!(
                errors.len() == 1 && errors[0].contains("not a directory"),
                "{path:?}: {errors:?}"
            );
        }
        let mut errors = Vec::new();
        let fine = dir.path().join("new/spool");
        resolve_spool(
            &SpoolSection {
                dir: Some(fine),
                ..SpoolSection::default()
            },
            &mut errors,
        );
        assert!(errors.is_empty(), "{errors:?}");
    }
}
