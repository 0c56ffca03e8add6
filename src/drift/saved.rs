//! The drift stage's memory as a checkpoint keeps it: each (minion, state)'s
//! last run, the minions and commits it names, the states judged to never
//! settle, the minions drifted in the last day, and the jobs whose drift waits
//! for their close. Copied between events, written from borrows of the copy,
//! read back owned, within today's bounds.

use serde::{Deserialize, Serialize};

use super::classify::Prior;
use super::{DriftStage, Judged, OpenJob};
use crate::minion_states::{Held as MemoryHeld, Sorted};
use crate::record::NonIdempotent;
use crate::time::Stamp;

/// (minion, state, commit, changed, changed under an applied commit, streak).
type Entry = (u32, u64, u64, bool, bool, u32);

#[derive(Serialize)]
pub struct SavingDrift<'a> {
    minions: Vec<(&'a str, u32)>,
    memory: Sorted<'a, Prior, Entry>,
    commits: Vec<(u64, &'a str)>,
    judged: Vec<(u64, &'a NonIdempotent, u32)>,
    drifted: Vec<(&'a str, Stamp)>,
    open: Vec<(&'a str, &'a OpenJob)>,
}

#[derive(Deserialize)]
pub struct SavedDrift {
    minions: Vec<(String, u32)>,
    memory: Vec<Entry>,
    commits: Vec<(u64, String)>,
    judged: Vec<(u64, NonIdempotent, u32)>,
    drifted: Vec<(String, Stamp)>,
    open: Vec<(String, OpenJob)>,
}

/// Drift's memory copied between two events: its (minion, state) memory and
/// the runs held for open jobs copy on write ([`MemoryHeld`], `CowVec`); the
/// minions drifted in the last day copied.
pub struct DriftSnapshot {
    memory: MemoryHeld<Prior>,
    commits: Vec<(u64, Box<str>)>,
    judged: Vec<(u64, NonIdempotent, u32)>,
    drifted: Vec<(Box<str>, Stamp)>,
    open: Vec<(Box<str>, OpenJob)>,
}

impl DriftSnapshot {
    /// In a stable order (the maps' own is not): the same memory writes the
    /// same checkpoint.
    pub fn saving(&self) -> SavingDrift<'_> {
        let mut minions: Vec<(&str, u32)> = self.memory.names().collect();
        minions.sort_unstable();
        let memory = self.memory.sorted(|minion, state, p| {
            (
                minion,
                state,
                p.commit,
                p.changed,
                p.changed_applied,
                p.streak,
            )
        });
        let mut commits: Vec<(u64, &str)> = self.commits.iter().map(|(h, c)| (*h, &**c)).collect();
        commits.sort_unstable();
        let mut judged: Vec<(u64, &NonIdempotent, u32)> = self
            .judged
            .iter()
            .map(|(state, record, calm)| (*state, record, *calm))
            .collect();
        judged.sort_unstable_by_key(|(state, _, _)| *state);
        let mut drifted: Vec<(&str, Stamp)> =
            self.drifted.iter().map(|(m, at)| (&**m, *at)).collect();
        drifted.sort_unstable();
        SavingDrift {
            minions,
            memory,
            commits,
            judged,
            drifted,
            open: self.open.iter().map(|(jid, job)| (&**jid, job)).collect(),
        }
    }
}

impl DriftStage {
    pub fn snapshot(&self) -> DriftSnapshot {
        DriftSnapshot {
            memory: self.memory.held().clone(),
            commits: self.commits.iter().map(|(h, c)| (*h, c.clone())).collect(),
            judged: self
                .judged
                .iter()
                .map(|(state, j)| (*state, j.record.clone(), j.calm))
                .collect(),
            drifted: self
                .drifted
                .iter()
                .map(|(m, at)| (m.clone(), *at))
                .collect(),
            open: self
                .open_order
                .iter()
                .filter_map(|jid| Some((jid.clone(), self.open.get(jid)?.clone())))
                .collect(),
        }
    }

    /// Takes back saved memory in place of its own; past today's bounds the
    /// rest is left (counted as refused).
    pub fn restore(&mut self, saved: SavedDrift) {
        let names = saved
            .minions
            .into_iter()
            .map(|(m, i)| (m.into_boxed_str(), i));
        let memory = saved.memory.into_iter().map(
            |(minion, state, commit, changed, changed_applied, streak)| {
                let prior = Prior {
                    commit,
                    changed,
                    changed_applied,
                    streak,
                };
                (minion, state, prior)
            },
        );
        let left = self.memory.restore(names, memory);
        self.stats.remembered_refused.add(left);
        self.stats.remembered.set(self.memory.len() as u64);
        self.commits = saved
            .commits
            .into_iter()
            .take(super::MAX_COMMITS)
            .map(|(h, c)| (h, c.into_boxed_str()))
            .collect();
        self.judged = saved
            .judged
            .into_iter()
            .map(|(state, record, calm)| (state, Judged { record, calm }))
            .collect();
        self.drifted = saved
            .drifted
            .into_iter()
            .map(|(m, at)| (m.into_boxed_str(), at))
            .collect();
        self.stats.minions_last_day.set(self.drifted.len() as u64);
        self.open.clear();
        self.open_order.clear();
        let skip = saved.open.len().saturating_sub(self.config.max_open_jobs);
        for (jid, mut job) in saved.open.into_iter().skip(skip) {
            self.shapes.adopt(&mut job);
            self.open_order.push_back(jid.clone().into_boxed_str());
            self.open.insert(jid.into_boxed_str(), job);
        }
    }
}
