//! Job lifecycles and missing-return verdicts: [`tracker`] is the state machine
//! (events and time in, records out, no IO), [`deadlines`] orders the verdicts due,
//! [`verdict`] names a missing minion's reason, [`context`] how a job came to run.
//! The driver that feeds it with the right clock is `pipeline`.

pub mod context;
pub mod deadlines;
pub mod presence;
pub mod settings;
pub mod streaks;
pub mod tracker;
pub mod verdict;

pub use tracker::{JobTracker, TrackerConfig, TrackerStats};
