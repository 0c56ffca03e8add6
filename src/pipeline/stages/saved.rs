//! The stages' memory for a checkpoint: copied between events
//! ([`StagesSnapshot`]), written from borrows of the copy ([`SavingStages`])
//! on the checkpoint's thread, read back owned ([`SavedStages`]).

use serde::{Deserialize, Serialize};

use super::Stages;
use crate::correlate::saved::{CorrelatorSnapshot, SavedCorrelator, SavingCorrelator};
use crate::drift::saved::{DriftSnapshot, SavedDrift, SavingDrift};
use crate::incident::saved::SavedIncidents;
use crate::jobs::tracker::saved::{SavedTracker, SavingTracker, TrackerSnapshot};
use crate::pressure::saved::SavedPressure;
use crate::record::Record;
use crate::time::Stamp;
use crate::triage::saved::SavedTriage;

/// The stages' memory copied between two events, for a checkpoint written
/// from a thread of its own: each stage's per-minion memory copy on write.
pub struct StagesSnapshot {
    tracker: TrackerSnapshot,
    triage: SavedTriage,
    correlator: CorrelatorSnapshot,
    incidents: SavedIncidents,
    pressure: SavedPressure,
    drift: DriftSnapshot,
}

impl StagesSnapshot {
    /// The copy as a checkpoint writes it (borrowed from the copy).
    pub fn saving(&self) -> SavingStages<'_> {
        SavingStages {
            tracker: self.tracker.saving(),
            triage: &self.triage,
            correlator: self.correlator.saving(),
            incidents: &self.incidents,
            pressure: &self.pressure,
            drift: self.drift.saving(),
        }
    }
}

/// The stages' memory as a checkpoint writes it (borrowed).
#[derive(Serialize)]
pub struct SavingStages<'a> {
    tracker: SavingTracker<'a>,
    triage: &'a SavedTriage,
    correlator: SavingCorrelator<'a>,
    incidents: &'a SavedIncidents,
    pressure: &'a SavedPressure,
    drift: SavingDrift<'a>,
}

/// The stages' memory as a checkpoint reads it back.
#[derive(Deserialize)]
pub struct SavedStages {
    tracker: SavedTracker,
    triage: SavedTriage,
    correlator: SavedCorrelator,
    #[serde(default)]
    incidents: Option<SavedIncidents>,
    #[serde(default)]
    pressure: Option<SavedPressure>,
    #[serde(default)]
    drift: Option<SavedDrift>,
}

impl SavedStages {
    /// Jobs open when it was written.
    pub fn open_jobs(&self) -> usize {
        self.tracker.open_jobs()
    }
}

impl Stages {
    /// Their memory copied, for a checkpoint. Call between events, with no
    /// job part way through its verdicts (the agent hands every batch on
    /// first).
    pub fn snapshot(&self) -> StagesSnapshot {
        StagesSnapshot {
            tracker: self.tracker.snapshot(),
            triage: self.triage.snapshot(),
            correlator: self.correlator.snapshot(),
            incidents: self.incidents.snapshot(),
            pressure: self.pressure.snapshot(),
            drift: self.drift.snapshot(),
        }
    }

    /// Takes back a checkpoint's memory (stages just made from the config: its
    /// bounds apply to what comes back). Its records: what was open, said
    /// again (`at` is now).
    pub fn restore(&mut self, saved: SavedStages, at: Stamp) -> Vec<Record> {
        self.tracker.restore(saved.tracker);
        self.triage.restore(saved.triage, at);
        self.correlator.restore(saved.correlator);
        let mut out = Vec::new();
        if let Some(incidents) = saved.incidents {
            self.incidents.restore(incidents);
            self.incidents.reannounce(at, &mut out);
        }
        if let Some(drift) = saved.drift {
            self.drift.restore(drift);
        }
        if let Some(pressure) = saved.pressure {
            self.pressure.restore(pressure);
            self.pressure.reannounce(at, &mut out);
        }
        out
    }
}
