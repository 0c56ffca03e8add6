//! `[correlate]`: the git checkouts watched (given, and discovered among the
//! master's file_roots, pillar_roots and gitfs cache), git's program and
//! timeout, and the bounds of what is remembered. As written, then resolved.

use std::path::{Path, PathBuf};

use super::duration::parse_duration;
use super::file::FileConfig;
use super::master::{MasterBusSettings, MasterConfigError};
use super::model::{CorrelateConfig, JobsConfig, RepoSpec};

pub fn resolve(
    file: &FileConfig,
    master: &Result<MasterBusSettings, MasterConfigError>,
    jobs: &JobsConfig,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> CorrelateConfig {
    let c = &file.correlate;
    let defaults = CorrelateConfig::default();
    let mut repos = Vec::new();
    for (states, given) in [(true, &c.state_repos), (false, &c.pillar_repos)] {
        for (name, dir) in given.iter().flatten() {
            if !dir.is_dir() {
                errors.push(format!(
                    "correlate: {name} = {} is not a directory",
                    dir.display()
                ));
            }
            repos.push(RepoSpec {
                name: name.clone(),
                dir: dir.clone(),
                reference: "HEAD".into(),
                states,
            });
        }
    }
    if c.discover.unwrap_or(true) {
        match master {
            Ok(master) => discover_repos(master, &mut repos),
            Err(e) => warnings.push(format!("correlate: not discovering git checkouts: {e}")),
        }
    }
    let git_timeout = match c.git_timeout.as_deref().map(parse_duration) {
        None => defaults.git_timeout,
        Some(Ok(d)) if !d.is_zero() => d,
        Some(Ok(_)) => {
            errors.push("correlate.git_timeout must be above zero".into());
            defaults.git_timeout
        }
        Some(Err(e)) => {
            errors.push(format!("correlate.git_timeout: {e}"));
            defaults.git_timeout
        }
    };
    let count = |value: Option<u64>, default: usize| {
        value.map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
    };
    CorrelateConfig {
        repos,
        git: c.git.clone().unwrap_or(defaults.git),
        git_timeout,
        max_history: count(c.max_history, defaults.max_history),
        max_commits: count(c.max_commits, defaults.max_commits).max(1),
        max_jobs: jobs.max_jobs,
        pull_request_url: c.pull_request_url.clone().inspect(|url| {
            if !url.contains("{number}") {
                errors.push(format!(
                    "correlate.pull_request_url {url:?} has no {{number}} to put the request's number in"
                ));
            }
        }),
    }
}

/// The master's state and pillar roots that lie in git checkouts, and gitfs's
/// cached remotes (at the `gitfs_base` branch), each once.
fn discover_repos(master: &MasterBusSettings, repos: &mut Vec<RepoSpec>) {
    let in_checkout = |dir: &Path| dir.is_dir() && dir.ancestors().any(|a| a.join(".git").exists());
    let mut add = |prefix: &str, dir: PathBuf, reference: String, states: bool| {
        if repos.iter().any(|r| r.dir == dir) {
            return;
        }
        let same_kind = repos.iter().filter(|r| r.name.starts_with(prefix)).count();
        let name = if same_kind == 0 {
            prefix.to_owned()
        } else {
            format!("{prefix}{}", same_kind + 1)
        };
        repos.push(RepoSpec {
            name,
            dir,
            reference,
            states,
        });
    };
    for dir in master.file_roots.iter().filter(|d| in_checkout(d)) {
        add("states", dir.clone(), "HEAD".into(), true);
    }
    for dir in master.pillar_roots.iter().filter(|d| in_checkout(d)) {
        add("pillar", dir.clone(), "HEAD".into(), false);
    }
    let gitfs = master.cachedir.join("gitfs");
    let mut cached: Vec<PathBuf> = std::fs::read_dir(&gitfs)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(".git").is_dir())
        .collect();
    cached.sort();
    for dir in cached {
        let reference = format!("refs/remotes/origin/{}", master.gitfs_base);
        add("gitfs", dir, reference, true);
    }
}
