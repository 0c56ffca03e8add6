//! Why an expected minion did not return: what the tracker knows about each
//! pending minion, and the one rule that turns it into a reason, and the fact
//! behind it, at the deadline.

use std::time::Duration;

pub use super::presence::{Absence, Connection};
use crate::record::{MissingEvidence, MissingReason};
use crate::time::Stamp;

/// How long a find_job may go unanswered before silence outweighs an earlier
/// "still running" answer.
const UNANSWERED_AFTER: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Evidence {
    Nothing,
    StillRunning,
    NotRunning,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Not connected when the job was published: judged `not_connected` at
    /// once (a publish reaches only connected minions), not waited for.
    NotConnected,
    /// Targeted by a `salt -b` batch whose sub-batch for it has not been
    /// sent yet: not waited for until it is.
    Queued,
    /// Never sent by its batch: it did not answer the batch's `test.ping`
    /// (judged `not_sent` when the batch is known), or the batch ended first.
    NotSent,
}

impl MinionState {
    /// Sent the job, nothing known yet.
    pub const fn pending() -> Self {
        MinionState::Pending {
            restarted: false,
            evidence: Evidence::Nothing,
            asked_at: None,
        }
    }
}

/// A reason, the fact that decided it, when presence saw the minion go, and
/// the address its connection came from while presence saw it connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub reason: MissingReason,
    pub evidence: MissingEvidence,
    pub disconnected_at: Option<Stamp>,
    pub address: Option<std::net::IpAddr>,
}

impl Verdict {
    pub const fn new(reason: MissingReason, evidence: MissingEvidence) -> Self {
        Self {
            reason,
            evidence,
            disconnected_at: None,
            address: None,
        }
    }
}

/// The reason for a minion still pending at the deadline, in the order the
/// reasons are decided (docs/records.md).
pub fn verdict(
    state: MinionState,
    overlaps_gap: bool,
    deadline: Stamp,
    connection: Connection,
) -> Verdict {
    use MissingEvidence as E;
    use MissingReason as R;
    let MinionState::Pending {
        restarted,
        evidence,
        asked_at,
    } = state
    else {
        match state {
            MinionState::NotConnected => return Verdict::new(R::NotConnected, E::PresenceAbsent),
            MinionState::Queued | MinionState::NotSent => {
                return Verdict::new(R::NotSent, E::BatchEnded);
            }
            _ => {}
        }
        return if overlaps_gap {
            Verdict::new(R::UnknownGap, E::BusGap)
        } else {
            Verdict::new(R::UnknownGap, E::UnreadableReturn)
        };
    };
    // A "still running" answer is stale when a later find_job, asked well
    // before the deadline, got no answer: the minion stopped answering.
    let stale = asked_at.is_some_and(|t| t.plus(UNANSWERED_AFTER) <= deadline);
    match (evidence, connection) {
        _ if overlaps_gap => Verdict::new(R::UnknownGap, E::BusGap),
        _ if restarted => Verdict::new(R::MinionRestarted, E::StartEvent),
        (Evidence::StillRunning, _) if !stale => {
            Verdict::new(R::RunningPastDeadline, E::StillRunning)
        }
        (Evidence::NotRunning, _) => Verdict::new(R::Lost, E::FindJobNotRunning),
        (_, Connection::Absent(absence)) => {
            let (evidence, at) = match absence {
                Absence::BeforePublish { since } => (E::PresenceAbsent, since),
                Absence::During { at } => (E::PresenceLost, Some(at)),
            };
            Verdict {
                disconnected_at: at,
                ..Verdict::new(R::NotConnected, evidence)
            }
        }
        (Evidence::StillRunning, _) => Verdict::new(R::NoResponse, E::StoppedAnswering),
        (_, Connection::Connected) => Verdict::new(R::NoResponse, E::ConnectedSilent),
        _ => Verdict::new(R::NoResponse, E::Nothing),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000;

    fn pending(restarted: bool, evidence: Evidence, asked_at: Option<i64>) -> MinionState {
        MinionState::Pending {
            restarted,
            evidence,
            asked_at: asked_at.map(|t| Stamp(t * S)),
        }
    }

    /// Each rule in its place: the order of docs/records.md.
    #[test]
    fn reasons_are_decided_in_order_with_their_evidence() {
        use MissingEvidence as E;
        use MissingReason as R;
        let gone = Connection::Absent(Absence::During { at: Stamp(3 * S) });
        let deadline = Stamp(10 * S);
        let cases = [
            (
                pending(true, Evidence::StillRunning, None),
                true,
                gone,
                R::UnknownGap,
                E::BusGap,
            ),
            (
                MinionState::Unreadable,
                false,
                gone,
                R::UnknownGap,
                E::UnreadableReturn,
            ),
            (
                pending(true, Evidence::StillRunning, None),
                false,
                gone,
                R::MinionRestarted,
                E::StartEvent,
            ),
            (
                pending(false, Evidence::StillRunning, Some(9)),
                false,
                gone,
                R::RunningPastDeadline,
                E::StillRunning,
            ),
            (
                pending(false, Evidence::NotRunning, None),
                false,
                gone,
                R::Lost,
                E::FindJobNotRunning,
            ),
            (
                pending(false, Evidence::Nothing, None),
                false,
                gone,
                R::NotConnected,
                E::PresenceLost,
            ),
            (
                pending(false, Evidence::StillRunning, Some(5)),
                false,
                Connection::Connected,
                R::NoResponse,
                E::StoppedAnswering,
            ),
            (
                pending(false, Evidence::Nothing, Some(5)),
                false,
                Connection::Connected,
                R::NoResponse,
                E::ConnectedSilent,
            ),
            (
                pending(false, Evidence::Nothing, None),
                false,
                Connection::Unknown,
                R::NoResponse,
                E::Nothing,
            ),
        ];
        for (state, gap, connection, reason, evidence) in cases {
            let v = verdict(state, gap, deadline, connection);
            assert_eq!(
                (v.reason, v.evidence),
                (reason, evidence),
                "{state:?} {connection:?}"
            );
        }
        let v = verdict(
            pending(false, Evidence::Nothing, None),
            false,
            deadline,
            gone,
        );
        assert_eq!(v.disconnected_at, Some(Stamp(3 * S)));
    }
}
