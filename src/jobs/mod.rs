//! Job lifecycles and missing-return verdicts: [`tracker`] is the state machine
//! (events and time in, records out, no IO), [`deadlines`] orders the verdicts due,
//! and [`states`] counts a state run's results from the raw return. The driver that
//! feeds it with the right clock is `cli::run::RecordHandler`.

pub mod args;
pub mod context;
pub mod deadlines;
pub mod settings;
pub mod states;
pub mod tracker;
pub mod verdict;

pub use tracker::{JobTracker, TrackerConfig, TrackerStats};
