//! The salt-master's own processes, read from `/proc`, read-only: the pid from
//! the master's pidfile, then its descendants, each named by the title Salt
//! gives it (`MWorker-default-0`, `EventPublisher`, `Maintenance`...), with its
//! CPU time and resident memory. saltsight runs beside the master, as its user
//! (systemd's `ProtectProc=invisible` hides other users' processes), so it can
//! see whether the master itself is drowning.
//!
//! One sample reads a few small files per master process (tens of processes):
//! well under a millisecond, taken every `pressure.sample_interval`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use foldhash::HashSet;

/// Linux reports CPU times in clock ticks of `USER_HZ`, which the kernel ABI
/// fixes at 100 on every architecture it supports.
const USER_HZ: f64 = 100.0;

/// Processes followed at most in one sample (a master has tens).
const MAX_PROCESSES: usize = 4096;

/// What Salt names its processes (`setproctitle`), in the order they are tried.
const ROLES: &[(&str, &str)] = &[
    // The queue in front of the workers (zeromq; PoolRouter on tcp) is not one.
    ("MWorkerQueue", "WorkerQueue"),
    ("PoolRouter", "WorkerQueue"),
    ("MWorker-", "MWorker"),
    ("ReqServer", "ReqServer"),
    ("RequestServer", "ReqServer"),
    ("EventPublisher", "EventPublisher"),
    ("EventMonitor", "EventMonitor"),
    ("Maintenance", "Maintenance"),
    ("FileserverUpdate", "FileserverUpdate"),
    ("FileServerUpdate", "FileserverUpdate"),
    ("PubServerChannel", "Publisher"),
    ("Publisher", "Publisher"),
    ("EventReturn", "EventReturn"),
    ("Reactor", "Reactor"),
    ("Engine", "Engine"),
];

/// One role's processes at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleFigures {
    pub processes: u32,
    /// User and system CPU time of them all, since each started.
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
}

/// The master's processes by role (`main` for the master itself, `other` for
/// titles not known).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MasterSample {
    pub pid: u32,
    pub roles: BTreeMap<&'static str, RoleFigures>,
}

impl MasterSample {
    pub fn role(&self, role: &str) -> Option<&RoleFigures> {
        self.roles.get(role)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error("cannot read the master's pidfile {path}: {source}")]
    Pidfile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the master's pidfile {path} holds no pid ({text:?})")]
    NoPid { path: PathBuf, text: String },
    #[error("the master (pid {pid} from {path}) is not running, or not visible to this user")]
    NotRunning { pid: u32, path: PathBuf },
}

/// Reads the master's process tree.
#[derive(Debug, Clone)]
pub struct MasterProcesses {
    pidfile: PathBuf,
    proc: PathBuf,
}

impl MasterProcesses {
    pub fn new(pidfile: &Path) -> Self {
        Self::with_proc(pidfile, Path::new("/proc"))
    }

    /// Over another `/proc` (tests).
    pub fn with_proc(pidfile: &Path, proc: &Path) -> Self {
        Self {
            pidfile: pidfile.to_path_buf(),
            proc: proc.to_path_buf(),
        }
    }

    pub fn pidfile(&self) -> &Path {
        &self.pidfile
    }

    /// The master's processes now.
    pub fn sample(&self) -> Result<MasterSample, SampleError> {
        let text =
            std::fs::read_to_string(&self.pidfile).map_err(|source| SampleError::Pidfile {
                path: self.pidfile.clone(),
                source,
            })?;
        let pid: u32 = text.trim().parse().map_err(|_| SampleError::NoPid {
            path: self.pidfile.clone(),
            text: text.chars().take(40).collect(),
        })?;
        let Some(main) = self.stat(pid) else {
            return Err(SampleError::NotRunning {
                pid,
                path: self.pidfile.clone(),
            });
        };
        let mut sample = MasterSample {
            pid,
            roles: BTreeMap::new(),
        };
        add(&mut sample, "main", &main);
        for child in self.descendants(pid) {
            if let Some(stat) = self.stat(child) {
                let role = self.role(child);
                add(&mut sample, role, &stat);
            }
        }
        Ok(sample)
    }

    /// Every descendant of `pid`: from each task's `children` list where the
    /// kernel has it, else by each process's parent.
    fn descendants(&self, pid: u32) -> Vec<u32> {
        let mut found = Vec::new();
        let mut seen = HashSet::from_iter([pid]);
        let mut queue = vec![pid];
        let by_parent = (!self.has_children_lists(pid)).then(|| self.parents());
        while let Some(parent) = queue.pop() {
            let children = match &by_parent {
                Some(parents) => parents
                    .iter()
                    .filter(|(_, p)| *p == parent)
                    .map(|(c, _)| *c)
                    .collect(),
                None => self.children(parent),
            };
            for child in children {
                if found.len() < MAX_PROCESSES && seen.insert(child) {
                    found.push(child);
                    queue.push(child);
                }
            }
        }
        found
    }

    fn has_children_lists(&self, pid: u32) -> bool {
        self.proc
            .join(format!("{pid}/task/{pid}/children"))
            .exists()
    }

    /// Children of every thread of `pid`.
    fn children(&self, pid: u32) -> Vec<u32> {
        let Ok(tasks) = std::fs::read_dir(self.proc.join(format!("{pid}/task"))) else {
            return Vec::new();
        };
        tasks
            .filter_map(Result::ok)
            .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
            .flat_map(|text| {
                text.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect::<Vec<u32>>()
            })
            .collect()
    }

    /// (pid, parent pid) of every process.
    fn parents(&self) -> Vec<(u32, u32)> {
        let Ok(entries) = std::fs::read_dir(&self.proc) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| Some((pid, self.stat(pid)?.parent)))
            .collect()
    }

    fn stat(&self, pid: u32) -> Option<Stat> {
        let text = std::fs::read_to_string(self.proc.join(format!("{pid}/stat"))).ok()?;
        let mut stat = parse_stat(&text)?;
        stat.rss_bytes = std::fs::read_to_string(self.proc.join(format!("{pid}/status")))
            .ok()
            .and_then(|s| vm_rss(&s))
            .unwrap_or(0);
        Some(stat)
    }

    /// The role Salt's title gives `pid`.
    fn role(&self, pid: u32) -> &'static str {
        let Ok(cmdline) = std::fs::read(self.proc.join(format!("{pid}/cmdline"))) else {
            return "other";
        };
        let title = String::from_utf8_lossy(&cmdline);
        ROLES
            .iter()
            .find(|(word, _)| title.contains(word))
            .map_or("other", |(_, role)| role)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat {
    parent: u32,
    cpu_seconds: f64,
    rss_bytes: u64,
}

fn add(sample: &mut MasterSample, role: &'static str, stat: &Stat) {
    let figures = sample.roles.entry(role).or_default();
    figures.processes += 1;
    figures.cpu_seconds += stat.cpu_seconds;
    figures.rss_bytes += stat.rss_bytes;
}

/// `/proc/<pid>/stat`: the fields after the command (in parentheses, which may
/// hold spaces and parentheses of its own): state, ppid, ... utime (14),
/// stime (15), counted from 1 as proc(5) does.
fn parse_stat(text: &str) -> Option<Stat> {
    let after = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (state).
    let field = |n: usize| fields.get(n - 3).copied();
    let parent = field(4)?.parse().ok()?;
    let utime: f64 = field(14)?.parse().ok()?;
    let stime: f64 = field(15)?.parse().ok()?;
    Some(Stat {
        parent,
        cpu_seconds: (utime + stime) / USER_HZ,
        rss_bytes: 0,
    })
}

/// `VmRSS:   1234 kB` in `/proc/<pid>/status`.
fn vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake /proc: the master (10) with a ReqServer (11) and two workers
    /// under it (12, 13), an unrelated process (20); no `children` lists, so
    /// parents are scanned.
    fn fake_proc(dir: &Path) {
        let procs = [
            (10, 1, "/usr/bin/salt-master", 150, 50),
            (
                11,
                10,
                "/usr/bin/salt-master RequestServer ReqServer_ProcessManager",
                10,
                0,
            ),
            (
                14,
                11,
                "/usr/bin/salt-master RequestServer MWorkerQueue",
                70,
                0,
            ),
            (
                12,
                11,
                "/usr/bin/salt-master ReqServer MWorker-default-0",
                900,
                100,
            ),
            (
                13,
                11,
                "/usr/bin/salt-master ReqServer MWorker-default-1",
                300,
                0,
            ),
            (20, 1, "/usr/sbin/sshd", 5, 5),
        ];
        for (pid, ppid, title, utime, stime) in procs {
            let d = dir.join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("stat"),
                format!("{pid} (salt-master (x)) S {ppid} 1 1 0 -1 4194560 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 100 1000 200"),
            )
            .unwrap();
            std::fs::write(
                d.join("status"),
                format!("Name:\tx\nVmRSS:\t  {} kB\n", pid * 100),
            )
            .unwrap();
            std::fs::write(d.join("cmdline"), title.replace(' ', "\0")).unwrap();
        }
    }

    #[test]
    fn the_tree_under_the_pidfile_is_read_by_role() {
        let dir = tempfile::tempdir().unwrap();
        fake_proc(dir.path());
        let pidfile = dir.path().join("salt-master.pid");
        std::fs::write(&pidfile, "10\n").unwrap();
        let sample = MasterProcesses::with_proc(&pidfile, dir.path())
            .sample()
            .expect("sample");
        let workers = sample.role("MWorker").expect("workers");
        assert_eq!(workers.processes, 2);
        assert!((workers.cpu_seconds - 13.0).abs() < 1e-9, "{workers:?}");
        assert_eq!(workers.rss_bytes, (12 + 13) * 100 * 1024);
        assert_eq!(sample.role("ReqServer").map(|r| r.processes), Some(1));
        assert_eq!(
            sample.role("WorkerQueue").map(|r| r.processes),
            Some(1),
            "the queue in front of the workers is not one"
        );
        assert_eq!(sample.role("main").map(|r| r.cpu_seconds), Some(2.0));
        assert!(sample.role("other").is_none(), "sshd is not the master's");
    }

    #[test]
    fn a_missing_master_is_an_error_that_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("salt-master.pid");
        let m = MasterProcesses::with_proc(&pidfile, dir.path());
        assert!(matches!(m.sample(), Err(SampleError::Pidfile { .. })));
        std::fs::write(&pidfile, "junk").unwrap();
        assert!(matches!(m.sample(), Err(SampleError::NoPid { .. })));
        std::fs::write(&pidfile, "4242").unwrap();
        assert!(matches!(
            m.sample(),
            Err(SampleError::NotRunning { pid: 4242, .. })
        ));
    }

    #[test]
    fn this_process_reads_from_the_real_proc() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        std::fs::write(&pidfile, std::process::id().to_string()).unwrap();
        let sample = MasterProcesses::new(&pidfile).sample().expect("sample");
        let main = sample.role("main").expect("main");
        assert!(main.rss_bytes > 0 && main.cpu_seconds >= 0.0, "{main:?}");
    }
}
