//! The `file` output: JSON lines appended to a file, rotated by size
//! (`records.jsonl` → `records.jsonl.1` → ... → `.<keep>`, the oldest removed).
//! Files are 0600: records may carry what the bus carried.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::SinkError;
use super::output::{Lost, OpenContext, Output, OutputError, OutputKind};
use crate::config::defaults::{DEFAULT_FILE_KEEP, DEFAULT_FILE_MAX_BYTES};
use crate::config::spool::SpoolConfig;
use crate::record::Record;

/// `type = "file"`.
pub struct File;

/// Its keys as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSection {
    /// Absolute path of the file records are appended to.
    pub path: Option<PathBuf>,
    /// Rotate when the file would grow past this.
    pub max_bytes: Option<u64>,
    /// Rotated files kept.
    pub keep: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSettings {
    pub path: PathBuf,
    pub max_bytes: u64,
    pub keep: usize,
}

impl OutputKind for File {
    const TYPE: &'static str = "file";
    type Section = FileSection;
    type Settings = FileSettings;

    fn resolve(
        section: FileSection,
        _: &SpoolConfig,
        problems: &mut Vec<String>,
    ) -> Option<FileSettings> {
        let Some(path) = section.path else {
            problems.push("`path` is missing".into());
            return None;
        };
        if !path.is_absolute() {
            problems.push(format!("path {} must be absolute", path.display()));
        } else if path.is_dir() {
            problems.push(format!(
                "path {} is a directory; name the file records go to",
                path.display()
            ));
        } else if let Some(problem) = path
            .parent()
            .and_then(crate::config::spool::not_a_directory_path)
        {
            problems.push(format!("path {}: {problem}", path.display()));
        }
        let max_bytes = section.max_bytes.unwrap_or(DEFAULT_FILE_MAX_BYTES);
        if max_bytes < 4096 {
            problems.push(format!(
                "max_bytes is {max_bytes}; it must be at least 4096"
            ));
        }
        let keep = section.keep.unwrap_or(DEFAULT_FILE_KEEP as u64);
        if !(1..=1000).contains(&keep) {
            problems.push(format!("keep is {keep}; it must be between 1 and 1000"));
        }
        Some(FileSettings {
            path,
            max_bytes,
            keep: keep as usize,
        })
    }

    fn describe(_: &str, settings: &FileSettings, _: &SpoolConfig) -> String {
        format!(
            "file {} (JSON lines, rotated at {} bytes, {} kept)",
            settings.path.display(),
            settings.max_bytes,
            settings.keep
        )
    }

    fn open(
        name: &str,
        settings: &FileSettings,
        _: &mut OpenContext<'_>,
    ) -> Result<Box<dyn Output>, SinkError> {
        let file = RotatingFile::open(&settings.path, settings.max_bytes, settings.keep).map_err(
            |source| SinkError::File {
                name: name.to_owned(),
                source,
            },
        )?;
        Ok(Box::new(FileOutput {
            name: name.to_owned(),
            file,
        }))
    }
}

struct FileOutput {
    name: String,
    file: RotatingFile,
}

impl Output for FileOutput {
    fn name(&self) -> &str {
        &self.name
    }

    /// The lines are written from the outputs' own (`flush`'s `lines`).
    fn queue(&mut self, _: &Record, _: &[u8]) -> Result<(), OutputError> {
        Ok(())
    }

    fn flush(&mut self, lines: &[u8]) -> Result<(), OutputError> {
        self.file.write(lines).map_err(|e| {
            OutputError::Lost(Lost {
                records: lines.iter().filter(|b| **b == b'\n').count() as u64,
                what: "file_write",
                error: e.to_string(),
            })
        })
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
pub struct FileOutputError {
    action: &'static str,
    path: PathBuf,
    source: std::io::Error,
}

/// A file of lines, rotated by size.
pub struct RotatingFile {
    path: PathBuf,
    max_bytes: u64,
    keep: usize,
    file: fs::File,
    written: u64,
}

fn open_append(path: &Path) -> Result<(fs::File, u64), FileOutputError> {
    let error = |action| {
        move |source| FileOutputError {
            action,
            path: path.to_path_buf(),
            source,
        }
    };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(error("create the directory of"))?;
    }
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(error("open"))?;
    let written = file.metadata().map_err(error("stat"))?.len();
    Ok((file, written))
}

impl RotatingFile {
    pub fn open(path: &Path, max_bytes: u64, keep: usize) -> Result<Self, FileOutputError> {
        let (file, written) = open_append(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            max_bytes,
            keep,
            file,
            written,
        })
    }

    /// Appends whole lines (one `write`); rotates first when they would take the
    /// file past `max_bytes`.
    pub fn write(&mut self, lines: &[u8]) -> Result<(), FileOutputError> {
        if lines.is_empty() {
            return Ok(());
        }
        if self.written > 0 && self.written + lines.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        self.file
            .write_all(lines)
            .map_err(|source| FileOutputError {
                action: "write",
                path: self.path.clone(),
                source,
            })?;
        self.written += lines.len() as u64;
        Ok(())
    }

    fn numbered(&self, n: usize) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> Result<(), FileOutputError> {
        let _ = fs::remove_file(self.numbered(self.keep));
        for n in (1..self.keep).rev() {
            let from = self.numbered(n);
            if from.exists() {
                let to = self.numbered(n + 1);
                fs::rename(&from, &to).map_err(|source| FileOutputError {
                    action: "rotate",
                    path: from,
                    source,
                })?;
            }
        }
        fs::rename(&self.path, self.numbered(1)).map_err(|source| FileOutputError {
            action: "rotate",
            path: self.path.clone(),
            source,
        })?;
        let (file, written) = open_append(&self.path)?;
        self.file = file;
        self.written = written;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn rotates_by_size_and_keeps_the_newest_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out/records.jsonl");
        let mut file = RotatingFile::open(&path, 10, 2).unwrap();
        for line in [
            "aaaa\n", "bbbb\n", "cccc\n", "dddd\n", "eeee\n", "ffff\n", "gg\n",
        ] {
            file.write(line.as_bytes()).unwrap();
        }
        let read = |p: PathBuf| fs::read_to_string(p).unwrap();
        assert_eq!(read(path.clone()), "gg\n");
        assert_eq!(read(file.numbered(1)), "eeee\nffff\n");
        assert_eq!(read(file.numbered(2)), "cccc\ndddd\n");
        assert!(!file.numbered(3).exists(), "only `keep` old files stay");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Reopened, it appends and counts what is there.
        drop(file);
        let mut again = RotatingFile::open(&path, 10, 2).unwrap();
        again.write(b"hh\n").unwrap();
        assert_eq!(read(path), "gg\nhh\n");
    }
}
