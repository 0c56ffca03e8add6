//! A spool read from outside, read-only (`saltsight status`): what waits to
//! be sent, since when, and what upstream refused. Nothing is locked or
//! moved, so it is safe while the agent runs.

use std::path::Path;

use serde::Serialize;

use super::seq_of;
use crate::time::Stamp;

/// One output's spool, as its directory shows it now.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Backlog {
    /// Batches not yet sent (sealed, and the one being filled).
    pub batches: u64,
    pub bytes: u64,
    /// When the oldest of them was opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest: Option<Stamp>,
    /// Batches upstream refused for good.
    pub dead_letters: u64,
    /// When the newest of them was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newest_dead_letter: Option<Stamp>,
}

/// The backlog of the spool in `dir` (`<spool.dir>/<output>/`).
pub fn backlog(dir: &Path) -> std::io::Result<Backlog> {
    let mut found = Backlog::default();
    for entry in std::fs::read_dir(dir)?.filter_map(Result::ok) {
        let path = entry.path();
        let Some(seq) = seq_of(&path, "seg").or_else(|| seq_of(&path, "open")) else {
            continue;
        };
        found.batches += 1;
        found.bytes += entry.metadata().map_or(0, |m| m.len());
        let opened = Stamp(i64::try_from(seq).unwrap_or(i64::MAX));
        found.oldest = Some(found.oldest.map_or(opened, |o| o.min(opened)));
    }
    let dead = dir.join("dead-letter");
    if let Ok(entries) = std::fs::read_dir(&dead) {
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if seq_of(&path, "seg").is_none() {
                continue;
            }
            found.dead_letters += 1;
            let refused = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .map(Stamp::from_system_time);
            found.newest_dead_letter = found.newest_dead_letter.max(refused);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_waiting_and_refused_are_counted_from_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        assert_eq!(backlog(dir).unwrap(), Backlog::default());
        std::fs::write(dir.join("00000001700000000000.seg"), b"12345").unwrap();
        std::fs::write(dir.join("00000001700000500000.open"), b"123").unwrap();
        std::fs::write(dir.join(".lock"), b"").unwrap();
        std::fs::create_dir(dir.join("dead-letter")).unwrap();
        std::fs::write(dir.join("dead-letter/00000001600000000000.seg"), b"x").unwrap();
        std::fs::write(dir.join("dead-letter/00000001600000000000.json"), b"{}").unwrap();
        let found = backlog(dir).unwrap();
        assert_eq!(
            (found.batches, found.bytes, found.oldest, found.dead_letters),
            (2, 8, Some(Stamp(1_700_000_000_000)), 1)
        );
        assert!(found.newest_dead_letter.is_some());
        assert!(backlog(&dir.join("nowhere")).is_err());
    }
}
