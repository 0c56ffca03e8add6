//! The pressure stage's memory as a checkpoint keeps it: the open episode and
//! the recent closed ones (the signals' windows are not kept: they refill).

use serde::{Deserialize, Serialize};

use super::{Episode, Pressure};
use crate::time::Stamp;

/// Copied between events (an episode and a few recent ones), written and
/// read back in one shape.
#[derive(Serialize, Deserialize)]
pub struct SavedPressure {
    open: Option<Episode>,
    recent: Vec<(String, Stamp, Stamp)>,
}

impl Pressure {
    pub fn snapshot(&self) -> SavedPressure {
        SavedPressure {
            open: self.open.clone(),
            recent: self.recent.iter().cloned().collect(),
        }
    }

    pub fn restore(&mut self, saved: SavedPressure) {
        self.open = saved.open;
        self.recent = saved.recent.into_iter().collect();
        self.changes += 1;
    }
}
