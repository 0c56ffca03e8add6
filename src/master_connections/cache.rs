//! The master's minion data cache, read-only, for each minion's addresses:
//! the `ipv4` and `ipv6` grains, as Salt's `CkMinions.connected_ids` reads
//! them. Two layouts of Salt's default `localfs` cache are known:
//!
//! - Salt 3007 and later: `<cachedir>/grains/<id>.p`, the grains alone;
//! - Salt 3006: `<cachedir>/minions/<id>/data.p`, `{grains, pillar}` (the
//!   pillar is skipped unread: it is never kept, and the hardened unit hides
//!   this directory, since it holds secrets).
//!
//! Each file is MessagePack (`salt.payload.dump`). Salt writes a file whole
//! and renames it into place, which changes the directory's mtime: a refresh
//! lists the directory only when its mtime moved, and reads again only the
//! files whose own mtime moved. Bounded: at most `max_minions` minions, each
//! file at most [`MAX_FILE_BYTES`], at most [`MAX_ADDRESSES`] addresses a
//! minion; what does not fit is counted.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use foldhash::{HashMap, HashMapExt};
use serde::Deserialize;

/// A grains file larger than this is not read (a minion's grains are a few
/// kilobytes; 3006's `data.p` holds its pillar too).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Addresses kept per minion (a host with hundreds of interfaces keeps the first).
pub const MAX_ADDRESSES: usize = 64;

/// Which layout a cache directory has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `grains/<id>.p` (Salt 3007+).
    GrainsBank,
    /// `minions/<id>/data.p` (Salt 3006).
    MinionsData,
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(
        "the master's minion data cache is not at {cachedir} (neither grains/ nor minions/): is `minion_data_cache` off, or has no minion connected yet?"
    )]
    Absent { cachedir: PathBuf },
    #[error("cannot read the master's minion data cache {dir}: {source}")]
    Read {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// What the last refresh saw, for check-config and the metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheCounts {
    pub minions: usize,
    /// Files that could not be read or decoded (skipped; the minion is then
    /// not judged).
    pub unreadable: u64,
    /// Minions past `max_minions`, or files over [`MAX_FILE_BYTES`].
    pub refused: u64,
}

#[derive(Debug)]
struct Entry {
    mtime: Option<SystemTime>,
    addresses: Vec<IpAddr>,
}

/// The cache as last read.
#[derive(Debug)]
pub struct MinionCache {
    cachedir: PathBuf,
    max_minions: usize,
    layout: Option<Layout>,
    dir_mtime: Option<SystemTime>,
    minions: HashMap<Box<str>, Entry>,
    pub counts: CacheCounts,
}

/// The grains this reads; every other key is skipped unread.
#[derive(Debug, Default, Deserialize)]
struct Grains {
    #[serde(default)]
    ipv4: Vec<Lenient>,
    #[serde(default)]
    ipv6: Vec<Lenient>,
}

/// 3006's `data.p`.
#[derive(Debug, Default, Deserialize)]
struct MinionData {
    #[serde(default)]
    grains: Grains,
}

/// A list element that is an address's text, or anything else (skipped).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Lenient {
    Text(String),
    Other(serde::de::IgnoredAny),
}

fn addresses(grains: Grains) -> Vec<IpAddr> {
    grains
        .ipv4
        .into_iter()
        .chain(grains.ipv6)
        .filter_map(|v| match v {
            Lenient::Text(t) => t.parse().ok(),
            Lenient::Other(_) => None,
        })
        .take(MAX_ADDRESSES)
        .collect()
}

/// One file's addresses, by layout.
pub fn decode(layout: Layout, bytes: &[u8]) -> Result<Vec<IpAddr>, rmp_serde::decode::Error> {
    let grains = match layout {
        Layout::GrainsBank => rmp_serde::from_slice::<Grains>(bytes)?,
        Layout::MinionsData => rmp_serde::from_slice::<MinionData>(bytes)?.grains,
    };
    Ok(addresses(grains))
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl MinionCache {
    pub fn new(cachedir: PathBuf, max_minions: usize) -> Self {
        Self {
            cachedir,
            max_minions,
            layout: None,
            dir_mtime: None,
            minions: HashMap::new(),
            counts: CacheCounts::default(),
        }
    }

    pub fn layout(&self) -> Option<Layout> {
        self.layout
    }

    /// The directory the minions are listed in, by layout.
    fn dir(&self, layout: Layout) -> PathBuf {
        match layout {
            Layout::GrainsBank => self.cachedir.join("grains"),
            Layout::MinionsData => self.cachedir.join("minions"),
        }
    }

    fn file(&self, layout: Layout, id: &str) -> PathBuf {
        match layout {
            Layout::GrainsBank => self.dir(layout).join(format!("{id}.p")),
            Layout::MinionsData => self.dir(layout).join(id).join("data.p"),
        }
    }

    /// Reads what changed since the last call. Returns whether anything did.
    pub fn refresh(&mut self) -> Result<bool, CacheError> {
        let layout = match self.layout {
            Some(layout) => layout,
            None => {
                let found = [Layout::GrainsBank, Layout::MinionsData]
                    .into_iter()
                    .find(|l| self.dir(*l).is_dir());
                match found {
                    Some(layout) => {
                        self.layout = Some(layout);
                        layout
                    }
                    None => {
                        return Err(CacheError::Absent {
                            cachedir: self.cachedir.clone(),
                        });
                    }
                }
            }
        };
        let dir = self.dir(layout);
        let dir_mtime = std::fs::metadata(&dir)
            .and_then(|m| m.modified())
            .map_err(|source| CacheError::Read {
                dir: dir.clone(),
                source,
            })?;
        // 3006 rewrites data.p inside a minion's own directory: the top
        // directory's mtime does not move, so every file is looked at.
        if layout == Layout::GrainsBank && self.dir_mtime == Some(dir_mtime) {
            return Ok(false);
        }
        self.dir_mtime = Some(dir_mtime);
        let entries = std::fs::read_dir(&dir).map_err(|source| CacheError::Read {
            dir: dir.clone(),
            source,
        })?;
        let mut ids: Vec<Box<str>> = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let id = match layout {
                Layout::GrainsBank => match name.strip_suffix(".p") {
                    Some(id) if !id.is_empty() => id,
                    _ => continue, // Salt's temp files while it writes
                },
                Layout::MinionsData => name,
            };
            ids.push(id.into());
        }
        ids.sort_unstable();
        let mut refused = 0;
        if ids.len() > self.max_minions {
            refused += (ids.len() - self.max_minions) as u64;
            ids.truncate(self.max_minions);
        }
        let mut changed = false;
        let before = self.minions.len();
        let keep: std::collections::HashSet<&str> = ids.iter().map(|i| &**i).collect();
        self.minions.retain(|id, _| keep.contains(&**id));
        changed |= self.minions.len() != before;
        let mut unreadable = 0;
        for id in &ids {
            let path = self.file(layout, id);
            let now = mtime(&path);
            if self.minions.get(id).is_some_and(|e| e.mtime == now) {
                continue;
            }
            changed = true;
            match read(&path, layout) {
                Ok(Some(addresses)) => {
                    self.minions.insert(
                        id.clone(),
                        Entry {
                            mtime: now,
                            addresses,
                        },
                    );
                }
                Ok(None) => {
                    refused += 1;
                    self.minions.remove(id);
                }
                Err(()) => {
                    unreadable += 1;
                    self.minions.remove(id);
                }
            }
        }
        self.counts = CacheCounts {
            minions: self.minions.len(),
            unreadable,
            refused,
        };
        Ok(changed)
    }

    /// Every minion with its addresses.
    pub fn minions(&self) -> impl Iterator<Item = (&str, &[IpAddr])> {
        self.minions
            .iter()
            .map(|(id, e)| (&**id, e.addresses.as_slice()))
    }
}

/// A file's addresses; `None` when it is over the size cap; `Err` when it
/// cannot be read or decoded.
fn read(path: &Path, layout: Layout) -> Result<Option<Vec<IpAddr>>, ()> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|_| ())?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| ())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Ok(None);
    }
    decode(layout, &bytes).map(Some).map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grains(ipv4: &[&str], ipv6: &[&str]) -> Vec<u8> {
        #[derive(serde::Serialize)]
        struct G<'a> {
            os: &'a str,
            ipv4: &'a [&'a str],
            ipv6: &'a [&'a str],
            nested: std::collections::BTreeMap<&'a str, Vec<u32>>,
        }
        rmp_serde::to_vec_named(&G {
            os: "Debian",
            ipv4,
            ipv6,
            nested: [("x", vec![1, 2])].into_iter().collect(),
        })
        .unwrap()
    }

    #[test]
    fn both_layouts_are_read_and_other_grains_skipped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("grains")).unwrap();
        std::fs::write(
            dir.path().join("grains/web1.p"),
            grains(&["127.0.0.1", "10.0.0.1"], &["::1", "fd00::1"]),
        )
        .unwrap();
        std::fs::write(dir.path().join("grains/tmpab12"), b"partial").unwrap();
        std::fs::write(dir.path().join("grains/bad.p"), b"\xc1").unwrap();
        let mut cache = MinionCache::new(dir.path().into(), 10);
        assert!(cache.refresh().unwrap());
        assert_eq!(cache.layout(), Some(Layout::GrainsBank));
        let minions: Vec<_> = cache.minions().collect();
        assert_eq!(minions.len(), 1);
        assert_eq!(minions[0].0, "web1");
        assert_eq!(minions[0].1.len(), 4);
        assert_eq!(cache.counts.unreadable, 1, "bad.p");
        // Nothing moved: nothing read again.
        assert!(!cache.refresh().unwrap());

        // 3006: the grains inside {grains, pillar}.
        let old = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(old.path().join("minions/db1")).unwrap();
        #[derive(serde::Serialize)]
        struct Data {
            pillar: std::collections::BTreeMap<&'static str, &'static str>,
            grains: serde_json::Value,
        }
        let data = rmp_serde::to_vec_named(&Data {
            pillar: [("secret", "hunter2")].into_iter().collect(),
            grains: serde_json::json!({"ipv4": ["10.0.0.2", 7], "ipv6": []}),
        })
        .unwrap();
        std::fs::write(old.path().join("minions/db1/data.p"), data).unwrap();
        let mut cache = MinionCache::new(old.path().into(), 10);
        cache.refresh().unwrap();
        assert_eq!(cache.layout(), Some(Layout::MinionsData));
        let minions: Vec<_> = cache.minions().collect();
        assert_eq!(minions, vec![("db1", &["10.0.0.2".parse().unwrap()][..])]);
    }

    #[test]
    fn a_cache_that_is_not_there_says_so_and_minions_past_the_cap_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = MinionCache::new(dir.path().into(), 1);
        let error = cache.refresh().unwrap_err().to_string();
        assert!(error.contains("minion_data_cache"), "{error}");
        std::fs::create_dir_all(dir.path().join("grains")).unwrap();
        for id in ["a", "b", "c"] {
            std::fs::write(
                dir.path().join(format!("grains/{id}.p")),
                grains(&["10.0.0.1"], &[]),
            )
            .unwrap();
        }
        cache.refresh().unwrap();
        assert_eq!(cache.counts.minions, 1);
        assert_eq!(cache.counts.refused, 2);
    }
}
