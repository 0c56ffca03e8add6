//! What the kernel says a process spent: CPU time from `/proc/<pid>/stat`
//! (utime + stime of the whole thread group, exited threads included),
//! context switches summed over `/proc/<pid>/task/*/status` (threads alive at
//! the reading; a thread that exits takes its count with it), and its memory
//! from `/proc/<pid>/status`.

use std::fs;

/// Clock ticks per second of `/proc/<pid>/stat` (Linux's USER_HZ).
const TICKS: f64 = 100.0;

#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// CPU seconds, user + system.
    pub cpu: f64,
    pub voluntary: u64,
    pub involuntary: u64,
}

impl Usage {
    pub fn of(pid: u32) -> Option<Usage> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command may hold spaces and parentheses: fields start after the last ')'.
        let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
        // Fields 14 and 15 (utime, stime), counted from 1 with pid and comm first.
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        let mut usage = Usage {
            cpu: (utime + stime) / TICKS,
            ..Usage::default()
        };
        for task in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
            let Ok(status) = fs::read_to_string(task.path().join("status")) else {
                continue; // exited since the listing
            };
            usage.voluntary += field(&status, "voluntary_ctxt_switches:").unwrap_or(0);
            usage.involuntary += field(&status, "nonvoluntary_ctxt_switches:").unwrap_or(0);
        }
        Some(usage)
    }

    /// Every process of a process group (the master and all it forked).
    pub fn of_group(pgid: u32) -> Usage {
        let mut total = Usage::default();
        for pid in group_members(pgid) {
            if let Some(u) = Usage::of(pid) {
                total.cpu += u.cpu;
                total.voluntary += u.voluntary;
                total.involuntary += u.involuntary;
            }
        }
        total
    }

    pub fn since(self, earlier: Usage) -> Usage {
        Usage {
            cpu: self.cpu - earlier.cpu,
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }

    pub fn switches(self) -> u64 {
        self.voluntary + self.involuntary
    }
}

/// Peak and current resident memory, in bytes.
pub fn rss(pid: u32) -> Option<(u64, u64)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some((
        field(&status, "VmHWM:")? * 1024,
        field(&status, "VmRSS:")? * 1024,
    ))
}

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rfind(')')
                    .and_then(|i| stat[i + 2..].split(' ').nth(2)?.parse::<u32>().ok())
                    == Some(pgid)
            })
        })
        .collect()
}

fn field(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
