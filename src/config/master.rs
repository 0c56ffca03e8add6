//! Reads the Salt master's own config (YAML) for its `id`, for what locates its
//! event bus: `root_dir`, `sock_dir`, `ipc_mode`, `tcp_master_pub_port` (and
//! `tcp_master_pull_port`, where `[reactor]` fires), and for where its
//! state tree and pillar live (`file_roots`, `pillar_roots`, `cachedir` for
//! gitfs), following
//! `default_include` (`master.d/*.conf`) as Salt does, later files winning.
//!
//! One quirk of Salt's `apply_master_config` is reproduced: when `sock_dir` is more
//! than 10 characters longer than `cachedir` (both as written, before `root_dir` is
//! prepended), Salt puts its sockets in `<cachedir>/.salt-unix` instead.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

use crate::bus::Endpoint;

pub const DEFAULT_MASTER_CONFIG: &str = "/etc/salt/master";
const DEFAULT_SOCK_DIR: &str = "/var/run/salt/master";
const DEFAULT_CACHEDIR: &str = "/var/cache/salt/master";
const DEFAULT_TCP_PUB_PORT: u16 = 4512;
const DEFAULT_TCP_PULL_PORT: u16 = 4513;
const DEFAULT_PUBLISH_PORT: u16 = 4505;
const DEFAULT_PIDFILE: &str = "/var/run/salt-master.pid";
const DEFAULT_PKI_DIR: &str = "/etc/salt/pki/master";
const DEFAULT_FILE_ROOTS: &[&str] = &["/srv/salt", "/srv/spm/salt"];
const DEFAULT_PILLAR_ROOTS: &[&str] = &["/srv/pillar", "/srv/spm/pillar"];
const PUB_SOCKET: &str = "master_event_pub.ipc";
/// Where `fire_event` writes on the master (read only by `[reactor]`).
pub const PULL_SOCKET: &str = "master_event_pull.ipc";

/// The bus-relevant settings, with where each came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterBusSettings {
    /// `id`, when the config sets it (Salt's own default, `<fqdn>_master`,
    /// names nothing an operator uses: saltsight then takes the host name).
    pub id: Option<String>,
    pub root_dir: PathBuf,
    pub sock_dir: PathBuf,
    pub ipc_mode_tcp: bool,
    pub tcp_master_pub_port: u16,
    /// `tcp_master_pull_port` (`ipc_mode: tcp`): where `fire_event` writes.
    pub tcp_master_pull_port: u16,
    /// `ipv6: True` moves the TCP publisher to `::1` (Salt's `_ipc_loopback`).
    pub ipv6: bool,
    /// `cachedir`, under `root_dir` (gitfs keeps its checkouts in `<cachedir>/gitfs`).
    pub cachedir: PathBuf,
    /// `file_roots` of every saltenv, in order (Salt does not prepend `root_dir`).
    pub file_roots: Vec<PathBuf>,
    pub pillar_roots: Vec<PathBuf>,
    /// The branch gitfs serves as `base` (`gitfs_base`, default `master`).
    pub gitfs_base: String,
    /// The master's pidfile (`pidfile`, under `root_dir`).
    pub pidfile: PathBuf,
    /// Where the master keeps minion keys (`pki_dir`, under `root_dir`):
    /// `minions/` holds one file per accepted minion, named by its id.
    pub pki_dir: PathBuf,
    /// `publish_port`: where minions hold their connection to the master
    /// (ZeroMQ's publisher; Salt's `connected_ids` reads connections to it).
    pub publish_port: u16,
    /// `minion_data_cache` (default on): the master keeps each minion's
    /// grains in its data cache (`<cachedir>/grains` on Salt 3007+,
    /// `<cachedir>/minions` on 3006), which maps a connection to a minion.
    pub minion_data_cache: bool,
    /// `transport` (`zeromq`, `tcp`, `ws`), as written; `zeromq` when unset.
    pub transport: String,
    /// The files read, in order.
    pub files: Vec<PathBuf>,
    /// What the master accepts but an operator should hear about (a skipped
    /// include, an unknown `ipc_mode`).
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum MasterConfigError {
    #[error("cannot read Salt master config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("Salt master config {path} is not valid YAML: {detail}")]
    Yaml { path: PathBuf, detail: String },
    #[error("Salt master config {path}: `{key}` {problem}")]
    Value {
        path: PathBuf,
        key: &'static str,
        problem: String,
    },
}

impl MasterBusSettings {
    /// The publisher endpoint these settings describe.
    pub fn endpoint(&self) -> Endpoint {
        self.socket(PUB_SOCKET, self.tcp_master_pub_port)
    }

    /// The endpoint Salt's `fire_event` writes to (the master republishes what
    /// it reads there): only `[reactor]` opens it.
    pub fn pull_endpoint(&self) -> Endpoint {
        self.socket(PULL_SOCKET, self.tcp_master_pull_port)
    }

    fn socket(&self, ipc_name: &str, tcp_port: u16) -> Endpoint {
        if self.ipc_mode_tcp {
            let host = if self.ipv6 {
                IpAddr::V6(Ipv6Addr::LOCALHOST)
            } else {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            };
            Endpoint::Tcp(SocketAddr::from((host, tcp_port)))
        } else {
            Endpoint::Unix(self.sock_dir.join(ipc_name))
        }
    }

    /// Reads `path` and its includes. A missing main file is not an error when
    /// `missing_ok` (the default path on a machine without a master): Salt's
    /// defaults apply.
    pub fn load(path: &Path, missing_ok: bool) -> Result<Self, MasterConfigError> {
        let mut raw = RawSettings::default();
        let mut files = Vec::new();
        match std::fs::read_to_string(path) {
            Ok(text) => {
                raw.apply(path, &text)?;
                files.push(path.to_path_buf());
            }
            Err(e) if missing_ok && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(MasterConfigError::Read {
                    path: path.into(),
                    source,
                });
            }
        }
        let dir = path.parent().unwrap_or(Path::new("/"));
        let mut warnings = Vec::new();
        // Salt reads `default_include`, then the main file's `include:` entries;
        // an include that cannot be read or parsed is logged and skipped, as the
        // master does (exit_on_config_errors is off by default).
        let mut patterns = vec![
            raw.default_include
                .clone()
                .unwrap_or_else(|| "master.d/*.conf".into()),
        ];
        patterns.extend(raw.include.clone());
        for pattern in patterns {
            for include in expand_include(dir, &pattern) {
                let applied = std::fs::read_to_string(&include)
                    .map_err(|source| MasterConfigError::Read {
                        path: include.clone(),
                        source,
                    })
                    .and_then(|text| raw.apply(&include, &text));
                match applied {
                    Ok(()) => files.push(include),
                    Err(e) => warnings.push(format!("skipped as salt-master does: {e}")),
                }
            }
        }
        let ipc_mode_tcp = match raw.ipc_mode.as_deref() {
            Some("tcp") => true,
            None | Some("ipc") => false,
            Some(other) => {
                warnings.push(format!(
                    "ipc_mode {other:?} is neither `ipc` nor `tcp`; Salt treats it as `ipc`"
                ));
                false
            }
        };
        let root_dir = PathBuf::from(raw.root_dir.unwrap_or_else(|| "/".into()));
        let cachedir = raw.cachedir.unwrap_or_else(|| DEFAULT_CACHEDIR.into());
        let mut sock_dir = raw.sock_dir.unwrap_or_else(|| DEFAULT_SOCK_DIR.into());
        if sock_dir.chars().count() > cachedir.chars().count() + 10 {
            sock_dir = format!("{}/.salt-unix", cachedir.trim_end_matches('/'));
        }
        let sock_dir = prepend_root_dir(&root_dir, Path::new(&sock_dir));
        let roots = |given: Option<Vec<PathBuf>>, default: &[&str]| {
            given.unwrap_or_else(|| default.iter().map(PathBuf::from).collect())
        };
        Ok(Self {
            id: raw.id.filter(|id| !id.trim().is_empty()),
            cachedir: prepend_root_dir(&root_dir, Path::new(&cachedir)),
            file_roots: roots(raw.file_roots, DEFAULT_FILE_ROOTS),
            pillar_roots: roots(raw.pillar_roots, DEFAULT_PILLAR_ROOTS),
            gitfs_base: raw.gitfs_base.unwrap_or_else(|| "master".into()),
            pki_dir: prepend_root_dir(
                &root_dir,
                Path::new(raw.pki_dir.as_deref().unwrap_or(DEFAULT_PKI_DIR)),
            ),
            pidfile: prepend_root_dir(
                &root_dir,
                Path::new(raw.pidfile.as_deref().unwrap_or(DEFAULT_PIDFILE)),
            ),
            root_dir,
            sock_dir,
            ipc_mode_tcp,
            tcp_master_pub_port: raw.tcp_master_pub_port.unwrap_or(DEFAULT_TCP_PUB_PORT),
            tcp_master_pull_port: raw.tcp_master_pull_port.unwrap_or(DEFAULT_TCP_PULL_PORT),
            ipv6: raw.ipv6.unwrap_or(false),
            publish_port: raw.publish_port.unwrap_or(DEFAULT_PUBLISH_PORT),
            minion_data_cache: raw.minion_data_cache.unwrap_or(true),
            transport: raw.transport.unwrap_or_else(|| "zeromq".into()),
            files,
            warnings,
        })
    }
}

#[derive(Default)]
struct RawSettings {
    id: Option<String>,
    root_dir: Option<String>,
    sock_dir: Option<String>,
    cachedir: Option<String>,
    ipc_mode: Option<String>,
    tcp_master_pub_port: Option<u16>,
    tcp_master_pull_port: Option<u16>,
    publish_port: Option<u16>,
    ipv6: Option<bool>,
    minion_data_cache: Option<bool>,
    transport: Option<String>,
    include: Vec<String>,
    default_include: Option<String>,
    file_roots: Option<Vec<PathBuf>>,
    pillar_roots: Option<Vec<PathBuf>>,
    gitfs_base: Option<String>,
    pidfile: Option<String>,
    pki_dir: Option<String>,
}

/// `{saltenv: [dir, ...]}` → the dirs, saltenvs in file order. A saltenv given as
/// one string is a list of one.
fn roots_of(value: &Yaml) -> Option<Vec<PathBuf>> {
    let envs = value.as_hash()?;
    let mut dirs = Vec::new();
    for dirs_of_env in envs.values() {
        match dirs_of_env {
            Yaml::String(s) => dirs.push(PathBuf::from(s)),
            Yaml::Array(items) => {
                dirs.extend(items.iter().filter_map(Yaml::as_str).map(PathBuf::from))
            }
            _ => {}
        }
    }
    Some(dirs)
}

impl RawSettings {
    fn apply(&mut self, path: &Path, text: &str) -> Result<(), MasterConfigError> {
        super::yaml_bounds::check(text).map_err(|refused| MasterConfigError::Yaml {
            path: path.into(),
            detail: format!("refused: {refused}"),
        })?;
        let docs = YamlLoader::load_from_str(text).map_err(|e| MasterConfigError::Yaml {
            path: path.into(),
            detail: e.to_string(),
        })?;
        let Some(doc) = docs.into_iter().next() else {
            return Ok(()); // an empty file, as Salt allows
        };
        if doc.is_null() {
            return Ok(());
        }
        if doc.as_hash().is_none() {
            return Err(MasterConfigError::Yaml {
                path: path.into(),
                detail: "the top level is not a mapping".into(),
            });
        }
        let text_key = |key: &'static str| -> Result<Option<String>, MasterConfigError> {
            match &doc[key] {
                Yaml::BadValue | Yaml::Null => Ok(None),
                Yaml::String(s) => Ok(Some(s.clone())),
                other => Err(MasterConfigError::Value {
                    path: path.into(),
                    key,
                    problem: format!("must be a string, not {other:?}"),
                }),
            }
        };
        // Salt takes any scalar as the id and makes it a string.
        match &doc["id"] {
            Yaml::String(s) => self.id = Some(s.clone()),
            Yaml::Integer(n) => self.id = Some(n.to_string()),
            Yaml::Real(r) => self.id = Some(r.clone()),
            _ => {}
        }
        if let Some(v) = text_key("root_dir")? {
            self.root_dir = Some(v);
        }
        if let Some(v) = text_key("sock_dir")? {
            self.sock_dir = Some(v);
        }
        if let Some(v) = text_key("cachedir")? {
            self.cachedir = Some(v);
        }
        if let Some(v) = text_key("ipc_mode")? {
            self.ipc_mode = Some(v);
        }
        match &doc["include"] {
            Yaml::String(s) => self.include.push(s.clone()),
            Yaml::Array(items) => self
                .include
                .extend(items.iter().filter_map(|i| i.as_str().map(str::to_owned))),
            _ => {}
        }
        if let Some(roots) = roots_of(&doc["file_roots"]) {
            self.file_roots = Some(roots);
        }
        if let Some(roots) = roots_of(&doc["pillar_roots"]) {
            self.pillar_roots = Some(roots);
        }
        if let Some(v) = text_key("gitfs_base")? {
            self.gitfs_base = Some(v);
        }
        if let Some(v) = text_key("pidfile")? {
            self.pidfile = Some(v);
        }
        if let Some(v) = text_key("pki_dir")? {
            self.pki_dir = Some(v);
        }
        if let Some(v) = text_key("default_include")? {
            self.default_include = Some(v);
        }
        if let Some(v) = text_key("transport")? {
            self.transport = Some(v);
        }
        if let Some(v) = bool_key(path, &doc, "ipv6")? {
            self.ipv6 = Some(v);
        }
        if let Some(v) = bool_key(path, &doc, "minion_data_cache")? {
            self.minion_data_cache = Some(v);
        }
        if let Some(v) = port_key(path, &doc, "tcp_master_pub_port")? {
            self.tcp_master_pub_port = Some(v);
        }
        if let Some(v) = port_key(path, &doc, "tcp_master_pull_port")? {
            self.tcp_master_pull_port = Some(v);
        }
        if let Some(v) = port_key(path, &doc, "publish_port")? {
            self.publish_port = Some(v);
        }
        Ok(())
    }
}

/// A boolean setting, YAML 1.1 words included (Salt's PyYAML reads `yes`,
/// `on` and the like as booleans).
fn bool_key(path: &Path, doc: &Yaml, key: &'static str) -> Result<Option<bool>, MasterConfigError> {
    match &doc[key] {
        Yaml::BadValue | Yaml::Null => Ok(None),
        Yaml::Boolean(b) => Ok(Some(*b)),
        Yaml::String(s)
            if matches!(s.to_ascii_lowercase().as_str(), "yes" | "on" | "true" | "y") =>
        {
            Ok(Some(true))
        }
        Yaml::String(s)
            if matches!(
                s.to_ascii_lowercase().as_str(),
                "no" | "off" | "false" | "n"
            ) =>
        {
            Ok(Some(false))
        }
        other => Err(MasterConfigError::Value {
            path: path.into(),
            key,
            problem: format!("must be True or False, not {other:?}"),
        }),
    }
}

/// A port setting: an integer from 1 to 65535, quoted or not.
fn port_key(path: &Path, doc: &Yaml, key: &'static str) -> Result<Option<u16>, MasterConfigError> {
    let quoted = doc[key].as_str().and_then(|s| s.trim().parse::<i64>().ok());
    match quoted.map(Yaml::Integer).as_ref().unwrap_or(&doc[key]) {
        Yaml::BadValue | Yaml::Null => Ok(None),
        Yaml::Integer(n) => u16::try_from(*n)
            .ok()
            .filter(|p| *p != 0)
            .map(Some)
            .ok_or_else(|| MasterConfigError::Value {
                path: path.into(),
                key,
                problem: format!("{n} is not a port"),
            }),
        other => Err(MasterConfigError::Value {
            path: path.into(),
            key,
            problem: format!("must be an integer, not {other:?}"),
        }),
    }
}

/// Salt's `prepend_root_dir` for an absolute path: joined under `root_dir` unless it
/// already lies there.
fn prepend_root_dir(root_dir: &Path, path: &Path) -> PathBuf {
    if root_dir == Path::new("/") || path.starts_with(root_dir) || !path.is_absolute() {
        return if path.is_absolute() {
            path.to_path_buf()
        } else {
            root_dir.join(path)
        };
    }
    root_dir.join(path.strip_prefix("/").unwrap_or(path))
}

/// Expands an include pattern whose last component may hold `*` (`master.d/*.conf`),
/// relative to the config's directory, sorted as Salt sorts them.
fn expand_include(dir: &Path, pattern: &str) -> Vec<PathBuf> {
    let full = dir.join(pattern);
    let (Some(parent), Some(name)) = (full.parent(), full.file_name().and_then(|n| n.to_str()))
    else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        // Like Python's glob: symlinks followed, dotfiles not matched by `*`.
        .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()))
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| !n.starts_with('.') && crate::config::glob::matches(name, n))
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_when_the_master_config_is_absent() {
        let dir = tempfile::tempdir().unwrap();
        let settings = MasterBusSettings::load(&dir.path().join("master"), true).unwrap();
        assert_eq!(
            settings.endpoint(),
            Endpoint::Unix("/var/run/salt/master/master_event_pub.ipc".into())
        );
        assert!(MasterBusSettings::load(&dir.path().join("master"), false).is_err());
    }

    /// What the connections presence reads: the publish port (quoted or
    /// not), minion_data_cache (YAML 1.1 words too), the transport; Salt's
    /// defaults when unset, and a clear error for a value that is not one.
    #[test]
    fn publish_port_minion_data_cache_and_transport() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("master");
        let settings = MasterBusSettings::load(&path, true).unwrap();
        assert_eq!(
            (
                settings.publish_port,
                settings.minion_data_cache,
                settings.transport.as_str()
            ),
            (4505, true, "zeromq")
        );
        std::fs::write(
            &path,
            "publish_port: \"14505\"\nminion_data_cache: no\ntransport: tcp\n",
        )
        .unwrap();
        let settings = MasterBusSettings::load(&path, false).unwrap();
        assert_eq!(
            (
                settings.publish_port,
                settings.minion_data_cache,
                settings.transport.as_str()
            ),
            (14505, false, "tcp")
        );
        std::fs::write(&path, "publish_port: 0\n").unwrap();
        let error = MasterBusSettings::load(&path, false)
            .unwrap_err()
            .to_string();
        assert!(error.contains("`publish_port` 0 is not a port"), "{error}");
        std::fs::write(&path, "minion_data_cache: sometimes\n").unwrap();
        let error = MasterBusSettings::load(&path, false)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("`minion_data_cache` must be True or False"),
            "{error}"
        );
    }

    #[test]
    fn root_dir_sock_dir_and_includes_in_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("master"),
            "root_dir: /srv/lab\nipc_mode: tcp\n",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("master.d")).unwrap();
        std::fs::write(
            dir.path().join("master.d/10-a.conf"),
            "tcp_master_pub_port: 47000\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("master.d/20-b.conf"),
            "tcp_master_pub_port: 47120\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("master.d/ignored.txt"),
            "tcp_master_pub_port: 1\n",
        )
        .unwrap();
        let settings = MasterBusSettings::load(&dir.path().join("master"), false).unwrap();
        assert_eq!(
            settings.endpoint(),
            Endpoint::Tcp("127.0.0.1:47120".parse().unwrap())
        );
        assert_eq!(
            settings.sock_dir,
            PathBuf::from("/srv/lab/var/run/salt/master")
        );
        assert_eq!(settings.files.len(), 3);
        assert_eq!(
            settings.pull_endpoint(),
            Endpoint::Tcp("127.0.0.1:4513".parse().unwrap()),
            "Salt's default pull port"
        );
        std::fs::write(
            dir.path().join("master.d/25-pull.conf"),
            "tcp_master_pull_port: 47121\n",
        )
        .unwrap();
        let settings = MasterBusSettings::load(&dir.path().join("master"), false).unwrap();
        assert_eq!(
            settings.pull_endpoint(),
            Endpoint::Tcp("127.0.0.1:47121".parse().unwrap())
        );
        std::fs::write(dir.path().join("master.d/30-v6.conf"), "ipv6: True\n").unwrap();
        let settings = MasterBusSettings::load(&dir.path().join("master"), false).unwrap();
        assert_eq!(
            settings.endpoint(),
            Endpoint::Tcp("[::1]:47120".parse().unwrap())
        );
    }

    #[test]
    fn a_long_sock_dir_moves_to_cachedir_salt_unix_as_salt_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("master");
        // 37 characters against the default cachedir's 22 (+10): Salt moves it.
        std::fs::write(&path, "root_dir: /tmp/saltsight-lab-9z24AG\nsock_dir: /tmp/saltsight-lab-9z24AG/master/sock\n").unwrap();
        let settings = MasterBusSettings::load(&path, false).unwrap();
        assert_eq!(
            settings.sock_dir,
            PathBuf::from("/tmp/saltsight-lab-9z24AG/var/cache/salt/master/.salt-unix")
        );
        // 23 characters: kept.
        std::fs::write(
            &path,
            "root_dir: /tmp/labtry\nsock_dir: /tmp/labtry/master/sock\n",
        )
        .unwrap();
        assert_eq!(
            MasterBusSettings::load(&path, false).unwrap().sock_dir,
            PathBuf::from("/tmp/labtry/master/sock")
        );
        // A configured cachedir counts too.
        std::fs::write(&path, "cachedir: /c\nsock_dir: /var/run/salt/master\n").unwrap();
        assert_eq!(
            MasterBusSettings::load(&path, false).unwrap().sock_dir,
            PathBuf::from("/c/.salt-unix")
        );
    }

    #[test]
    fn sock_dir_already_under_root_dir_is_kept() {
        assert_eq!(
            prepend_root_dir(Path::new("/tmp/slA"), Path::new("/tmp/slA/master/sock")),
            PathBuf::from("/tmp/slA/master/sock")
        );
        assert_eq!(
            prepend_root_dir(Path::new("/"), Path::new("/var/run/salt/master")),
            PathBuf::from("/var/run/salt/master")
        );
    }

    #[test]
    fn reads_what_salt_accepts_as_salt_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("master");
        std::fs::write(
            &path,
            "ipc_mode: zmq\nipv6: yes\ntcp_master_pub_port: '4600'\ninclude: extra/*.conf\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("master.d")).unwrap();
        std::fs::create_dir_all(dir.path().join("extra")).unwrap();
        std::fs::write(
            dir.path().join("master.d/bad.conf"),
            "sock_dir: [unclosed\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("master.d/.hidden.conf"),
            "sock_dir: /hidden\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("real.conf"), "sock_dir: /linked\n").unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("real.conf"),
            dir.path().join("master.d/link.conf"),
        )
        .unwrap();
        std::fs::write(dir.path().join("extra/x.conf"), "root_dir: /r\nid: 1234\n").unwrap();
        let settings = MasterBusSettings::load(&path, false).unwrap();
        assert!(
            !settings.ipc_mode_tcp,
            "Salt treats an unknown ipc_mode as ipc"
        );
        assert!(settings.ipv6);
        assert_eq!(settings.tcp_master_pub_port, 4600);
        assert_eq!(settings.sock_dir, PathBuf::from("/r/linked"));
        assert_eq!(
            settings.id.as_deref(),
            Some("1234"),
            "an integer id as Salt reads it"
        );
        assert_eq!(settings.files.len(), 3, "{:?}", settings.files);
        assert_eq!(settings.warnings.len(), 2, "{:?}", settings.warnings);
    }

    #[test]
    fn bad_values_name_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("master");
        std::fs::write(&path, "tcp_master_pub_port: [1]\n").unwrap();
        let err = MasterBusSettings::load(&path, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tcp_master_pub_port") && err.contains(&path.display().to_string()),
            "{err}"
        );
        std::fs::write(&path, "sock_dir: [unclosed\n").unwrap();
        assert!(matches!(
            MasterBusSettings::load(&path, false),
            Err(MasterConfigError::Yaml { .. })
        ));
    }

    #[test]
    fn an_alias_bomb_is_refused_with_its_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("master");
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let list = vec![format!("*a{}", i - 1); 10].join(", ");
            text.push_str(&format!("a{i}: &a{i} [{list}]\n"));
        }
        std::fs::write(&path, text).unwrap();
        let err = MasterBusSettings::load(&path, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("refused") && err.contains(&path.display().to_string()),
            "{err}"
        );
    }
}
