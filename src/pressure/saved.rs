//! The pressure stage's memory as a checkpoint keeps it: the open episode and
//! the recent closed ones (the signals' windows are not kept: they refill).

use serde::{Deserialize, Serialize};

use super::{Episode, Pressure};
use crate::time::Stamp;

#[derive(Serialize)]
pub struct SavingPressure<'a> {
    open: Option<&'a Episode>,
    recent: Vec<(&'a str, Stamp, Stamp)>,
}

#[derive(Deserialize)]
pub struct SavedPressure {
    open: Option<Episode>,
    recent: Vec<(String, Stamp, Stamp)>,
}

impl Pressure {
    pub fn saving(&self) -> SavingPressure<'_> {
        SavingPressure {
            open: self.open.as_ref(),
            recent: self
                .recent
                .iter()
                .map(|(id, opened, closed)| (id.as_str(), *opened, *closed))
                .collect(),
        }
    }

    pub fn restore(&mut self, saved: SavedPressure) {
        self.open = saved.open;
        self.recent = saved.recent.into_iter().collect();
        self.changes += 1;
    }
}
