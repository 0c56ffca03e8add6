//! Git, read-only. A checkout's HEAD is read from its files (`HEAD`, loose refs,
//! `packed-refs`), re-read only when their modification times change: a few
//! `stat`s per job, no process. History (`log`) comes from the git CLI, run with
//! a timeout, no pager, no prompts, no optional locks, and `safe.directory` for
//! that one checkout (the state tree usually belongs to root, saltsight to salt).

use std::cell::Cell;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::record::Commit;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{dir}: not a git checkout (no .git here or above)")]
    NotARepo { dir: PathBuf },
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("git {args} in {dir}: {detail}")]
    Command {
        dir: PathBuf,
        args: String,
        detail: String,
    },
}

/// Where a checkout keeps its git data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDir {
    /// The directory git is run in (the watched root).
    pub work_dir: PathBuf,
    /// Holds `HEAD` (for a linked worktree, its own).
    git_dir: PathBuf,
    /// Holds `refs/` and `packed-refs` (the main repository's for a worktree).
    common_dir: PathBuf,
}

impl GitDir {
    /// Finds the git data of the checkout `dir` lies in: `.git` in `dir` or
    /// above (a directory, or a file `gitdir: <path>`), or `dir` itself when it
    /// is a bare repository.
    pub fn discover(dir: &Path) -> Result<GitDir, GitError> {
        if dir.join("HEAD").is_file() && dir.join("refs").is_dir() {
            return Ok(Self::at(dir, dir.to_path_buf()));
        }
        for candidate in dir.ancestors() {
            let dot_git = candidate.join(".git");
            if dot_git.is_dir() {
                return Ok(Self::at(dir, dot_git));
            }
            if dot_git.is_file() {
                let text = read(&dot_git)?;
                if let Some(target) = text.trim().strip_prefix("gitdir:") {
                    return Ok(Self::at(dir, candidate.join(target.trim())));
                }
            }
        }
        Err(GitError::NotARepo { dir: dir.into() })
    }

    fn at(work_dir: &Path, git_dir: PathBuf) -> GitDir {
        let common_dir = std::fs::read_to_string(git_dir.join("commondir"))
            .map(|c| git_dir.join(c.trim()))
            .unwrap_or_else(|_| git_dir.clone());
        GitDir {
            work_dir: work_dir.to_path_buf(),
            git_dir,
            common_dir,
        }
    }

    /// The files whose modification times say whether `reference` may have moved.
    fn watched_files(&self, reference: &str) -> Vec<PathBuf> {
        let mut files = vec![
            self.git_dir.join("HEAD"),
            self.common_dir.join("packed-refs"),
        ];
        if reference != "HEAD" {
            files.push(self.common_dir.join(reference));
        } else if let Ok(text) = std::fs::read_to_string(self.git_dir.join("HEAD")) {
            if let Some(target) = text.trim().strip_prefix("ref:") {
                files.push(self.common_dir.join(target.trim()));
            }
        }
        files
    }

    /// The commit `reference` (`HEAD` or `refs/...`) points at; `None` for an
    /// unborn branch or a missing ref.
    pub fn resolve(&self, reference: &str) -> Result<Option<String>, GitError> {
        let mut name = reference.to_owned();
        for _ in 0..8 {
            let text = if name == "HEAD" {
                read(&self.git_dir.join("HEAD"))?
            } else {
                match std::fs::read_to_string(self.common_dir.join(&name)) {
                    Ok(text) => text,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return self.packed(&name);
                    }
                    Err(source) => {
                        return Err(GitError::Read {
                            path: self.common_dir.join(&name),
                            source,
                        });
                    }
                }
            };
            match text.trim().strip_prefix("ref:") {
                Some(target) => name = target.trim().to_owned(),
                None => return Ok(is_object_id(text.trim()).then(|| text.trim().to_owned())),
            }
        }
        Ok(None) // a loop of symbolic refs
    }

    fn packed(&self, name: &str) -> Result<Option<String>, GitError> {
        let path = self.common_dir.join("packed-refs");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(GitError::Read { path, source }),
        };
        Ok(text.lines().find_map(|line| {
            let (id, refname) = line.split_once(' ')?;
            (refname == name && is_object_id(id)).then(|| id.to_owned())
        }))
    }
}

fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn read(path: &Path) -> Result<String, GitError> {
    std::fs::read_to_string(path).map_err(|source| GitError::Read {
        path: path.into(),
        source,
    })
}

/// A reference's move: (old commit, new commit).
pub type Move = (Option<String>, Option<String>);

/// A reference watched for moves, re-read only when its files change.
#[derive(Debug)]
pub struct HeadWatch {
    pub git: GitDir,
    pub reference: String,
    /// The files the last read depended on, and their modification times then.
    files: Vec<PathBuf>,
    stamps: Vec<Option<SystemTime>>,
    pub head: Option<String>,
}

fn modified(files: &[PathBuf]) -> Vec<Option<SystemTime>> {
    files
        .iter()
        .map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
        .collect()
}

impl HeadWatch {
    pub fn new(git: GitDir, reference: String) -> Self {
        Self {
            git,
            reference,
            files: Vec::new(),
            stamps: Vec::new(),
            head: None,
        }
    }

    /// Re-reads the reference if its files changed. `Some((old, new))` when it
    /// moved (the first read counts as a move from `None` only if it finds a
    /// commit). Unchanged, it costs one `stat` per file of the last read.
    pub fn refresh(&mut self) -> Result<Option<Move>, GitError> {
        if !self.files.is_empty() && modified(&self.files) == self.stamps {
            return Ok(None);
        }
        // Something changed, or this is the first read: HEAD may name another
        // branch now, so the files are found again.
        self.files = self.git.watched_files(&self.reference);
        self.stamps = modified(&self.files);
        let head = self.git.resolve(&self.reference)?;
        if head == self.head {
            return Ok(None);
        }
        let old = std::mem::replace(&mut self.head, head.clone());
        Ok(Some((old, head)))
    }
}

/// After a timeout, git is not run again for this long. git runs on the
/// consumer task: a hung git (a state tree on a stalled NFS mount) then costs
/// one timeout per pause, not one per call, so events keep flowing and
/// systemd's watchdog (fed between events) is not starved.
pub const PAUSE_AFTER_TIMEOUT: Duration = Duration::from_secs(300);

/// Runs the git CLI, read-only, with a timeout.
#[derive(Debug, Clone)]
pub struct GitCli {
    pub program: PathBuf,
    pub timeout: Duration,
    /// Set by a timeout: no git until then.
    paused_until: Cell<Option<Instant>>,
}

/// Field and record separators in `git log --format`.
/// Id, author, author time, subject and body (read for the pull request a
/// merge names, not kept).
const LOG_FORMAT: &str = "--format=%H%x1f%an%x1f%aI%x1f%s%x1f%b%x1e";

impl GitCli {
    pub fn new(program: PathBuf, timeout: Duration) -> Self {
        GitCli {
            program,
            timeout,
            paused_until: Cell::new(None),
        }
    }

    /// `git log` in `dir`: the commits of `range` (newest first) that touch
    /// `paths` (all when empty), at most `limit`.
    pub fn log(
        &self,
        dir: &Path,
        range: &str,
        paths: &[&str],
        limit: usize,
    ) -> Result<Vec<Commit>, GitError> {
        let max = format!("--max-count={limit}");
        let mut args = vec!["log", LOG_FORMAT, &max, range, "--"];
        args.extend(paths);
        let out = self.run(dir, &args)?;
        Ok(out
            .split('\x1e')
            .filter_map(|entry| {
                let mut fields = entry.trim_start_matches('\n').split('\x1f');
                let id = fields.next().filter(|id| is_object_id(id))?.to_owned();
                let author = fields.next()?.to_owned();
                let time = fields.next()?.to_owned();
                let subject = fields.next()?.trim_end().to_owned();
                let body = fields.next().unwrap_or_default();
                Some(Commit {
                    pull_request: crate::record::pull_request::named_in(&subject, body),
                    id,
                    author,
                    time,
                    subject,
                })
            })
            .collect())
    }

    /// The files `commit` changed (against its first parent; all of them for
    /// a root commit).
    pub fn changed_files(&self, dir: &Path, commit: &str) -> Result<Vec<String>, GitError> {
        let out = self.run(
            dir,
            &[
                "diff-tree",
                "--root",
                "-r",
                "--no-commit-id",
                "--name-only",
                "-m",
                "--first-parent",
                commit,
            ],
        )?;
        Ok(out.lines().map(str::to_owned).collect())
    }

    /// Whether `ancestor` is `descendant` or one of its ancestors.
    pub fn is_ancestor(
        &self,
        dir: &Path,
        ancestor: &str,
        descendant: &str,
    ) -> Result<bool, GitError> {
        if ancestor == descendant {
            return Ok(true);
        }
        let base = self.run(dir, &["merge-base", ancestor, descendant])?;
        Ok(base.trim() == ancestor)
    }

    fn run(&self, dir: &Path, args: &[&str]) -> Result<String, GitError> {
        let failed = |detail: String| GitError::Command {
            dir: dir.into(),
            args: args.join(" "),
            detail,
        };
        if let Some(until) = self.paused_until.get() {
            if Instant::now() < until {
                return Err(failed(format!(
                    "not run: git timed out less than {PAUSE_AFTER_TIMEOUT:?} ago"
                )));
            }
        }
        let safe = format!("safe.directory={}", dir.display());
        let mut child = Command::new(&self.program)
            .args(["--no-pager", "-c", &safe, "-c", "core.fsmonitor=false"])
            .args(args)
            .current_dir(dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("cannot start {}: {e}", self.program.display())))?;
        // Read both pipes on threads so a chatty git cannot fill one and stall.
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let out_reader = std::thread::spawn(move || {
            let mut buf = String::new();
            if let Some(s) = stdout.as_mut() {
                let _ = s.read_to_string(&mut buf);
            }
            buf
        });
        let err_reader = std::thread::spawn(move || {
            let mut buf = String::new();
            if let Some(s) = stderr.as_mut() {
                let _ = s.take(4096).read_to_string(&mut buf);
            }
            buf
        });
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() > self.timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    self.paused_until
                        .set(Some(Instant::now() + PAUSE_AFTER_TIMEOUT));
                    return Err(failed(format!(
                        "timed out after {:?}; git is not run for the next {PAUSE_AFTER_TIMEOUT:?}",
                        self.timeout
                    )));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(e) => return Err(failed(e.to_string())),
            }
        };
        let out = out_reader.join().unwrap_or_default();
        let err = err_reader.join().unwrap_or_default();
        if !status.success() {
            return Err(failed(format!("{status}: {}", err.trim())));
        }
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `git args` in `dir`, as a fixed author.
    pub(crate) fn git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "alice")
            .env("GIT_AUTHOR_EMAIL", "a@example.com")
            .env("GIT_COMMITTER_NAME", "alice")
            .env("GIT_COMMITTER_EMAIL", "a@example.com")
            .stdout(Stdio::null())
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    }

    /// `file` written with `text` and committed as `subject`.
    pub(crate) fn commit(dir: &Path, file: &str, text: &str, subject: &str) {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", subject]);
    }

    #[test]
    fn head_is_read_from_files_and_moves_are_seen() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        let git_dir = GitDir::discover(&dir.join("sub")).unwrap();
        let mut watch = HeadWatch::new(git_dir, "HEAD".into());
        assert_eq!(watch.refresh().unwrap(), None, "unborn branch: no commit");
        commit(dir, "web/init.sls", "a: b\n", "first");
        let (old, first) = watch.refresh().unwrap().expect("moved");
        assert_eq!(old, None);
        assert_eq!(watch.refresh().unwrap(), None, "unchanged");
        commit(dir, "web/init.sls", "a: c\n", "second");
        let (old, second) = watch.refresh().unwrap().expect("moved");
        assert_eq!(old, first);
        // Packed refs resolve the same.
        git(dir, &["pack-refs", "--all"]);
        let packed = GitDir::discover(dir).unwrap().resolve("HEAD").unwrap();
        assert_eq!(packed, second);
        let cli = GitCli::new("git".into(), Duration::from_secs(10));
        let range = format!("{}..{}", first.unwrap(), second.clone().unwrap());
        let commits = cli.log(dir, &range, &["web/init.sls"], 10).unwrap();
        assert_eq!(commits.len(), 1);
        assert_eq!(
            (commits[0].author.as_str(), commits[0].subject.as_str()),
            ("alice", "second")
        );
        assert_eq!(Some(commits[0].id.clone()), second);
        assert_eq!(commits[0].pull_request, None);
        let err = cli.log(dir, "no-such-ref", &[], 1).unwrap_err();
        assert!(err.to_string().contains("no-such-ref"), "{err}");
        // A merge request named in the body, read through git's own log.
        std::fs::write(dir.join("web/init.sls"), "a: d\n").unwrap();
        git(dir, &["add", "-A"]);
        git(
            dir,
            &[
                "commit",
                "-q",
                "-m",
                "Merge branch 'x'",
                "-m",
                "See merge request infra/states!8",
            ],
        );
        let merged = cli.log(dir, "HEAD", &[], 1).unwrap();
        assert_eq!(
            merged[0].pull_request.as_ref().map(|p| p.label()),
            Some("infra/states!8".into()),
            "{merged:?}"
        );
    }

    #[test]
    fn a_plain_directory_is_not_a_repo() {
        let tmp = tempfile::tempdir().unwrap();
        // tempdirs live under /tmp, which is not inside a checkout.
        assert!(matches!(
            GitDir::discover(tmp.path()),
            Err(GitError::NotARepo { .. })
        ));
    }

    #[test]
    fn after_a_timeout_git_is_paused_instead_of_timing_out_again() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let hung = dir.path().join("hung-git");
        std::fs::write(&hung, "#!/bin/sh\nexec sleep 30\n").unwrap();
        std::fs::set_permissions(&hung, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Another test thread forking while this file was open for writing keeps
        // it busy (ETXTBSY) until that child execs: try again, as a shell would.
        let first = (0..50)
            .map(|_| {
                let cli = GitCli::new(hung.clone(), Duration::from_millis(200));
                (
                    cli.log(dir.path(), "HEAD", &[], 1).unwrap_err().to_string(),
                    cli,
                )
            })
            .find(|(error, _)| !error.contains("Text file busy"));
        let (first, cli) = first.expect("the script stays busy");
        assert!(first.contains("timed out"), "{first}");
        let second = cli.log(dir.path(), "HEAD", &[], 1).unwrap_err().to_string();
        assert!(second.contains("not run"), "{second}");
    }
}
