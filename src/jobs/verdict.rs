//! Why an expected minion did not return: what the tracker knows about each
//! pending minion, and the one rule that turns it into a reason at the deadline.

use std::time::Duration;

use crate::record::MissingReason;
use crate::time::Stamp;

/// How long a find_job may go unanswered before silence outweighs an earlier
/// "still running" answer.
const UNANSWERED_AFTER: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    Nothing,
    StillRunning,
    NotRunning,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinionState {
    Pending {
        restarted: bool,
        evidence: Evidence,
        /// When a find_job last asked it about this job without an answer yet.
        asked_at: Option<Stamp>,
    },
    Returned,
    /// Its return came but could not be read (undecodable, or over the frame
    /// cap): whether it succeeded is not known.
    Unreadable,
}

/// The reason for a minion still pending at the deadline, in the order the reasons
/// are decided (docs/records.md).
pub fn verdict(state: MinionState, overlaps_gap: bool, deadline: Stamp) -> MissingReason {
    // A "still running" answer is stale when a later find_job, asked well
    // before the deadline, got no answer: the minion stopped answering.
    let unanswered_since =
        |asked: Option<Stamp>| asked.is_some_and(|t| t.plus(UNANSWERED_AFTER) <= deadline);
    match state {
        _ if overlaps_gap => MissingReason::UnknownGap,
        MinionState::Unreadable => MissingReason::UnknownGap,
        MinionState::Pending {
            restarted: false,
            evidence: Evidence::StillRunning,
            asked_at,
        } if unanswered_since(asked_at) => MissingReason::NoResponse,
        MinionState::Pending {
            restarted: true, ..
        } => MissingReason::MinionRestarted,
        MinionState::Pending {
            evidence: Evidence::StillRunning,
            ..
        } => MissingReason::RunningPastDeadline,
        MinionState::Pending {
            evidence: Evidence::NotRunning,
            ..
        } => MissingReason::Lost,
        _ => MissingReason::NoResponse,
    }
}
