//! The salt-master's accepted minion keys, read-only: one file per accepted
//! minion in `<pki_dir>/minions`, named by its id (Salt's own dot files, such as
//! `.key_cache`, left out). Rollouts measure the fleet against them;
//! salt-exporter's health series count them.

use std::path::Path;

use foldhash::HashSet;

/// The ids of the accepted keys in `dir`, at most `max` of them.
pub fn accepted(dir: &Path, max: usize) -> std::io::Result<HashSet<Box<str>>> {
    Ok(std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().to_str().map(Box::<str>::from))
        .filter(|name| !name.starts_with('.'))
        .take(max)
        .collect())
}
