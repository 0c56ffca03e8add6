//! The tracker's memory as a checkpoint keeps it (see `pipeline::checkpoint`):
//! open jobs with each minion's state, closed jobs waiting for late returns,
//! find_job and runner jobs in flight, missing streaks and presence. What is
//! derived (the deadline queue, the totals) is rebuilt on restore; what is
//! short-lived (orchestration steps, jobs part way through their verdicts) is
//! not kept. Copied between events ([`TrackerSnapshot`]), written from
//! borrows of the copy ([`SavingTracker`]) on the checkpoint's thread, read
//! back owned ([`SavedTracker`]) in the same shape.

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{ClosedJob, Job, JobTracker};
use crate::jobs::presence::{Presence, SavedPresence, SavingPresence};
use crate::jobs::streaks::Streaks;
use crate::time::Stamp;

#[derive(Debug, Serialize)]
pub struct SavingTracker<'a> {
    open: Vec<(&'a str, &'a Job)>,
    /// In the order they closed, with when.
    closed: Vec<(Stamp, &'a str, &'a ClosedJob)>,
    /// When, the find_job jid, the jid it asks about; oldest first.
    find_jobs: Vec<(Stamp, &'a str, &'a str)>,
    /// Runner jid, function, published at.
    runners: Vec<(&'a str, &'a str, Stamp)>,
    last_gap_end: Option<Stamp>,
    streaks: Vec<(&'a str, u32)>,
    /// When each streak began (added after the first checkpoints: read as
    /// none when absent).
    streak_since: Vec<(&'a str, Stamp)>,
    presence: SavingPresence<'a>,
}

#[derive(Debug, Deserialize)]
pub struct SavedTracker {
    open: Vec<(Box<str>, Job)>,
    closed: Vec<(Stamp, Box<str>, ClosedJob)>,
    find_jobs: Vec<(Stamp, Box<str>, Box<str>)>,
    runners: Vec<(Box<str>, Box<str>, Stamp)>,
    last_gap_end: Option<Stamp>,
    streaks: Vec<(Box<str>, u32)>,
    #[serde(default)]
    streak_since: Vec<(Box<str>, Stamp)>,
    presence: SavedPresence,
}

impl SavedTracker {
    /// Jobs open when it was written.
    pub fn open_jobs(&self) -> usize {
        self.open.len()
    }
}

/// The tracker's memory copied between two events, to be written from a
/// thread of its own: each open job's minions are its shared list of names
/// and a byte each, copied whole; the rest is the jobs and minions the tracker
/// follows past a job (closed jobs' missing minions, streaks, presence).
#[derive(Debug)]
pub struct TrackerSnapshot {
    open: Vec<(Arc<str>, Job)>,
    closed: Vec<(Stamp, Box<str>, ClosedJob)>,
    find_jobs: Vec<(Stamp, Box<str>, Box<str>)>,
    runners: Vec<(Box<str>, Box<str>, Stamp)>,
    last_gap_end: Option<Stamp>,
    streaks: Streaks,
    presence: Presence,
}

impl TrackerSnapshot {
    pub fn saving(&self) -> SavingTracker<'_> {
        SavingTracker {
            open: self.open.iter().map(|(jid, job)| (&**jid, job)).collect(),
            closed: self
                .closed
                .iter()
                .map(|(at, jid, job)| (*at, &**jid, job))
                .collect(),
            find_jobs: self
                .find_jobs
                .iter()
                .map(|(at, jid, watched)| (*at, &**jid, &**watched))
                .collect(),
            runners: self
                .runners
                .iter()
                .map(|(jid, fun, at)| (&**jid, &**fun, *at))
                .collect(),
            last_gap_end: self.last_gap_end,
            streaks: self.streaks.saving(),
            streak_since: self.streaks.saving_since(),
            presence: self.presence.saving(),
        }
    }
}

impl JobTracker {
    /// The tracker's memory, copied. Jobs part way through their verdicts are
    /// not in it, and none is part way through its names (the agent hands
    /// every batch on before it saves).
    pub fn snapshot(&self) -> TrackerSnapshot {
        debug_assert!(!self.taking(), "a snapshot of a job part way taken");
        TrackerSnapshot {
            open: self
                .open
                .iter()
                .map(|(jid, job)| (jid.clone(), job.clone()))
                .collect(),
            closed: self
                .closed_order
                .iter()
                .filter_map(|(at, jid)| Some((*at, jid.clone(), self.closed.get(jid)?.clone())))
                .collect(),
            find_jobs: self
                .find_jobs_order
                .iter()
                .filter_map(|(at, jid)| {
                    let (_, watched) = self.find_jobs.get(jid)?;
                    Some((*at, jid.clone(), watched.clone()))
                })
                .collect(),
            runners: self
                .runners
                .iter()
                .map(|(jid, (fun, at))| (jid.clone(), fun.clone(), *at))
                .collect(),
            last_gap_end: self.last_gap_end,
            streaks: self.streaks.clone(),
            presence: self.presence.clone(),
        }
    }

    /// Takes back a saved memory in place of its own (a tracker just made).
    pub fn restore(&mut self, saved: SavedTracker) {
        self.open.clear();
        self.deadlines = Default::default();
        self.expected_total = 0;
        for (jid, job) in saved.open {
            self.deadlines.insert(job.deadline, &jid);
            self.expected_total += job.pending;
            let jid: std::sync::Arc<str> = jid.into();
            // A batch's sub-batches with jids of their own name it again.
            for sub in job.batch.iter().flat_map(|b| &b.info.sub_jids) {
                self.sub_jids
                    .insert(sub.as_str(), std::sync::Arc::clone(&jid));
            }
            self.open.insert(jid, job);
        }
        self.closed.clear();
        self.closed_order = VecDeque::new();
        self.closed_missing = 0;
        for (at, jid, job) in saved.closed {
            self.closed_missing += job.missing.len();
            self.closed_order.push_back((at, jid.clone()));
            self.closed.insert(jid, job);
        }
        self.find_jobs.clear();
        self.find_jobs_order.clear();
        for (at, jid, watched) in saved.find_jobs {
            self.find_jobs_order.push_back((at, jid.clone()));
            self.find_jobs.insert(jid, (at, watched));
        }
        self.runners = saved
            .runners
            .into_iter()
            .map(|(jid, fun, at)| (jid, (fun, at)))
            .collect();
        self.last_gap_end = saved.last_gap_end;
        self.streaks.restore(saved.streaks, saved.streak_since);
        self.presence.restore(saved.presence);
        self.stats.open_jobs.set(self.open.len() as u64);
        self.stats
            .minions_missing_repeatedly
            .set(self.streaks.repeatedly());
        self.stats
            .minions_connected
            .set(self.presence.connected() as u64);
    }
}
