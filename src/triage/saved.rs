//! Triage's memory as a checkpoint keeps it: the failure groups of jobs not
//! yet completed (oldest job first) and when each fingerprint was first seen.

use serde::{Deserialize, Serialize};

use super::{JobGroups, Triage};
use crate::time::Stamp;

/// Copied between events (a job's groups list a few example minions each,
/// not all), written and read back in one shape.
#[derive(Debug, Serialize, Deserialize)]
pub struct SavedTriage {
    jobs: Vec<(Box<str>, JobGroups)>,
    first_seen: Vec<(String, String, Stamp)>,
}

impl Triage {
    pub fn snapshot(&self) -> SavedTriage {
        SavedTriage {
            jobs: self
                .jobs_order
                .iter()
                .filter_map(|jid| Some((jid.clone(), self.jobs.get(jid)?.clone())))
                .collect(),
            first_seen: self
                .first_seen_order
                .iter()
                .filter_map(|fp| {
                    let (jid, at) = self.first_seen.get(fp)?;
                    Some((fp.clone(), jid.clone(), *at))
                })
                .collect(),
        }
    }

    /// Takes back saved memory in place of its own, within today's bounds; a
    /// job saved without the time of its last failure is taken as seen `at`.
    pub fn restore(&mut self, saved: SavedTriage, at: Stamp) {
        self.jobs.clear();
        self.jobs_order.clear();
        let skip = saved.jobs.len().saturating_sub(self.config.max_jobs);
        for (jid, mut groups) in saved.jobs.into_iter().skip(skip) {
            groups.last_at.get_or_insert(at);
            // Each group's examples are searched by halves: kept sorted.
            for group in groups.groups.values_mut() {
                group.minions.sort_unstable();
            }
            self.jobs_order.push_back(jid.clone());
            self.jobs.insert(jid, groups);
        }
        self.first_seen.clear();
        self.first_seen_order.clear();
        let skip = saved
            .first_seen
            .len()
            .saturating_sub(self.config.max_fingerprints);
        for (fp, jid, at) in saved.first_seen.into_iter().skip(skip) {
            self.first_seen_order.push_back(fp.clone());
            self.first_seen.insert(fp, (jid, at));
        }
    }
}
