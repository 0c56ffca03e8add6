//! The incident stage's memory as a checkpoint keeps it: every followed
//! target with its recent failures and its open incident. Copied between
//! events (a few hundred targets at most), written and read back in one
//! shape.

use serde::{Deserialize, Serialize};

use super::{Incidents, Target};

#[derive(Serialize, Deserialize)]
pub struct SavedIncidents {
    targets: Vec<(Box<str>, Target)>,
}

impl Incidents {
    pub fn snapshot(&self) -> SavedIncidents {
        SavedIncidents {
            targets: self
                .targets
                .iter()
                .map(|(k, t)| (k.clone(), t.clone()))
                .collect(),
        }
    }

    /// Takes back saved memory (at most `max_targets` targets, the most
    /// recently seen kept).
    pub fn restore(&mut self, saved: SavedIncidents) {
        let mut targets = saved.targets;
        targets.sort_by_key(|(_, t)| std::cmp::Reverse(t.last_seen));
        targets.truncate(self.config.max_targets);
        self.targets = targets.into_iter().collect();
        self.count_open();
    }
}
