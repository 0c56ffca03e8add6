//! The correlator's memory as a checkpoint keeps it: each job's HEADs at
//! publish (oldest first), the (minion, state) history, `introduced_by` settled
//! per fingerprint, and each checkout's last HEAD (so a move while saltsight
//! was down is a `config_change` on its next read). git's answers are a cache
//! and are not kept. Copied between events, written from borrows of the
//! copy, read back owned, in the same shape.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::history::{HistorySnapshot, SavedHistory, SavingHistory};
use super::rollout::Open;
use super::{Correlator, Heads};
use crate::record::IntroducedBy;

#[derive(Debug, Serialize)]
pub struct SavingCorrelator<'a> {
    job_heads: Vec<(&'a str, &'a Heads)>,
    history: SavingHistory<'a>,
    settled: Vec<(&'a str, &'a IntroducedBy)>,
    /// Checkout name → its HEAD when last read.
    heads: Vec<(&'a str, &'a str)>,
    rollouts: Vec<&'a Open>,
}

#[derive(Debug, Deserialize)]
pub struct SavedCorrelator {
    job_heads: Vec<(Box<str>, Heads)>,
    history: SavedHistory,
    settled: Vec<(Box<str>, IntroducedBy)>,
    heads: Vec<(String, String)>,
    #[serde(default)]
    rollouts: Vec<Open>,
}

/// The correlator's memory copied between two events: the per-(minion,
/// state) history and the rollouts' standings copy on write; the rest is
/// bounded by jobs and commits.
#[derive(Debug)]
pub struct CorrelatorSnapshot {
    job_heads: Vec<(Box<str>, Arc<Heads>)>,
    history: HistorySnapshot,
    settled: Vec<(Box<str>, IntroducedBy)>,
    heads: Vec<(String, String)>,
    rollouts: Vec<Open>,
}

impl CorrelatorSnapshot {
    pub fn saving(&self) -> SavingCorrelator<'_> {
        SavingCorrelator {
            job_heads: self
                .job_heads
                .iter()
                .map(|(jid, heads)| (&**jid, &**heads))
                .collect(),
            history: self.history.saving(),
            settled: self.settled.iter().map(|(fp, i)| (&**fp, i)).collect(),
            heads: self
                .heads
                .iter()
                .map(|(name, head)| (name.as_str(), head.as_str()))
                .collect(),
            rollouts: self.rollouts.iter().collect(),
        }
    }
}

impl Correlator {
    pub fn snapshot(&self) -> CorrelatorSnapshot {
        CorrelatorSnapshot {
            job_heads: self
                .job_order
                .iter()
                .filter_map(|jid| Some((jid.clone(), self.job_heads.get(jid)?.clone())))
                .collect(),
            history: self.history.snapshot(),
            settled: self
                .settled_order
                .iter()
                .filter_map(|fp| Some((fp.clone(), self.settled.get(fp)?.clone())))
                .collect(),
            heads: self
                .repos
                .iter()
                .filter_map(|r| {
                    let head = r.watch.as_ref()?.head.as_deref()?;
                    Some((r.spec.name.clone(), head.to_owned()))
                })
                .collect(),
            rollouts: self.snapshot_rollouts(),
        }
    }

    /// Takes back saved memory in place of its own, within today's bounds; a
    /// checkout no longer configured is ignored.
    pub fn restore(&mut self, saved: SavedCorrelator) {
        self.job_heads.clear();
        self.job_order.clear();
        let skip = saved.job_heads.len().saturating_sub(self.max_jobs);
        for (jid, heads) in saved.job_heads.into_iter().skip(skip) {
            self.job_order.push_back(jid.clone());
            self.job_heads.insert(jid, Arc::new(heads));
        }
        self.history.restore(saved.history);
        self.settled.clear();
        self.settled_order.clear();
        for (fp, introduced) in saved.settled {
            self.settle(&fp, introduced);
        }
        for (name, head) in saved.heads {
            let watch = self
                .repos
                .iter_mut()
                .find(|r| r.spec.name == name)
                .and_then(|r| r.watch.as_mut());
            if let Some(watch) = watch {
                watch.head = Some(head);
            }
        }
        self.restore_rollouts(saved.rollouts);
    }
}
