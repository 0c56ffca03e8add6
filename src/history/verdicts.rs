//! A job's verdicts on its minions as the history keeps them: compact, a
//! chunk per job and batch rather than a row per return. A return is the
//! facts the answers read (minion, when, succeeded, late, test, a state run,
//! states changed, duration), 21 bytes at a fixed width so a minion's story
//! is a scan of 4-byte ids; a missing minion keeps its reason and presence's
//! evidence (msgpack, few per job); a failed state run's root causes keep
//! what the answers read of each `state_failure` (which state, its category,
//! fingerprint, comment and incident), each distinct cause once per chunk
//! with the minions that had it, since a broken change fails the same way on
//! hundreds of minions. Minions are numbered once (`minions`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::record::{
    Category, MinionMissing, MinionReturn, MissingEvidence, MissingReason, Record, RecordBody,
    StateFailure,
};
use crate::time::Stamp;

/// A minion's answer to a job.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// A return's is its record's (shared).
    pub minion: Arc<str>,
    pub at: Stamp,
    pub answer: Answer,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Returned(Returned),
    Missing(MissingFacts),
}

/// What the answers need of a return.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Returned {
    pub succeeded: bool,
    /// After the job closed (`late_return`).
    pub late: bool,
    pub test: bool,
    /// It carried state results.
    pub state_run: bool,
    /// States changed or (test=True) that would change.
    pub changed: u32,
    pub duration_ms: Option<u64>,
}

/// What the answers need of a `minion_missing` verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MissingFacts {
    pub reason: MissingReason,
    pub evidence: MissingEvidence,
    pub disconnected_at: Option<Stamp>,
    pub address: Option<String>,
    pub streak: u32,
    pub missing_since: Option<Stamp>,
}

/// What the answers need of a `state_failure` (a root cause on one minion).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FailedState {
    pub fingerprint: String,
    pub sls: String,
    pub state_id: String,
    pub category: Category,
    /// As the record gave it (capped, redacted).
    pub comment: String,
    pub incident: Option<String>,
}

impl FailedState {
    /// What the answers keep of failure `f`.
    pub fn of(f: &StateFailure) -> FailedState {
        FailedState {
            fingerprint: f.fingerprint.to_string(),
            sls: f.state.sls.clone(),
            state_id: f.state.state_id.clone(),
            category: f.cause.category,
            comment: f.state.comment.clone(),
            incident: f.incident.clone(),
        }
    }

    /// Whether this is what the answers keep of failure `f` (the same as
    /// [`FailedState::of`] would make, without making it).
    pub fn is_of(&self, f: &StateFailure) -> bool {
        *self.fingerprint == *f.fingerprint
            && self.category == f.cause.category
            && self.sls == f.state.sls
            && self.state_id == f.state.state_id
            && self.comment == f.state.comment
            && self.incident == f.incident
    }

    /// `sls:state_id`, as the answers name a state.
    pub fn state(&self) -> String {
        format!("{}:{}", self.sls, self.state_id)
    }
}

impl Returned {
    /// What the answers keep of return `r` (`late`: a `late_return`).
    pub fn of(r: &MinionReturn, late: bool) -> Returned {
        let states = r.states.as_ref();
        Returned {
            succeeded: r.succeeded,
            late,
            test: r.context.test,
            state_run: states.is_some(),
            changed: states.map_or(0, |s| s.changed.saturating_add(s.would_change)),
            duration_ms: r.duration_ms,
        }
    }
}

impl MissingFacts {
    /// What the answers keep of verdict `m`.
    pub fn of(m: &MinionMissing) -> MissingFacts {
        MissingFacts {
            reason: m.reason,
            evidence: m.evidence,
            disconnected_at: m.disconnected_at,
            address: m.address.clone(),
            streak: m.streak,
            missing_since: m.missing_since,
        }
    }
}

impl Verdict {
    /// Return `r` at `at` (`late`: a `late_return`).
    pub fn returned(r: &MinionReturn, at: Stamp, late: bool) -> Verdict {
        Verdict {
            minion: r.minion.clone(),
            at,
            answer: Answer::Returned(Returned::of(r, late)),
        }
    }

    /// Missing verdict `m` at `at`.
    pub fn missing(m: &MinionMissing, at: Stamp) -> Verdict {
        Verdict {
            minion: m.minion.as_str().into(),
            at,
            answer: Answer::Missing(MissingFacts::of(m)),
        }
    }
}

/// The verdict a record states, with its jid and the job's function (a
/// return, a late return, a missing minion); `None` for every other kind.
pub fn of_record(record: &Record) -> Option<(&str, Option<&str>, Verdict)> {
    match &record.body {
        RecordBody::MinionReturn(r) | RecordBody::LateReturn(r) => {
            let late = matches!(record.body, RecordBody::LateReturn(_));
            Some((
                &r.jid,
                r.fun.as_deref(),
                Verdict::returned(r, record.at, late),
            ))
        }
        RecordBody::MinionMissing(m) => {
            Some((&m.jid, Some(m.fun.as_str()), Verdict::missing(m, record.at)))
        }
        _ => None,
    }
}

/// A failure a record states, with its jid, minion and function; `None`
/// for every other kind.
pub fn failure_of_record(record: &Record) -> Option<&StateFailure> {
    match &record.body {
        RecordBody::StateFailure(f) => Some(f),
        _ => None,
    }
}

/// Bytes of one return in a chunk.
pub const RETURN_WIDTH: usize = 21;
/// The `duration_ms` of a return that had none.
const NO_DURATION: u32 = u32::MAX;

const SUCCEEDED: u8 = 1;
const LATE: u8 = 2;
const TEST: u8 = 4;
const STATE_RUN: u8 = 8;

/// Appends a return of minion number `minion` to a chunk's returns.
pub fn put_return(out: &mut Vec<u8>, minion: u32, at: Stamp, r: &Returned) {
    let flag = |on: bool, bit: u8| if on { bit } else { 0 };
    let flags = flag(r.succeeded, SUCCEEDED)
        | flag(r.late, LATE)
        | flag(r.test, TEST)
        | flag(r.state_run, STATE_RUN);
    let duration = r
        .duration_ms
        .map_or(NO_DURATION, |d| d.min(u64::from(NO_DURATION - 1)) as u32);
    out.extend_from_slice(&minion.to_le_bytes());
    out.extend_from_slice(&at.0.to_le_bytes());
    out.push(flags);
    out.extend_from_slice(&r.changed.to_le_bytes());
    out.extend_from_slice(&duration.to_le_bytes());
}

/// The returns of a chunk: (minion number, time, return). A blob whose
/// length is not a whole number of entries has its tail ignored.
pub fn returns(blob: &[u8]) -> impl Iterator<Item = (u32, Stamp, Returned)> + '_ {
    blob.chunks_exact(RETURN_WIDTH).map(|e| {
        let u32_at = |i: usize| u32::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
        let mut at = [0u8; 8];
        at.copy_from_slice(&e[4..12]);
        let flags = e[12];
        let duration = u32_at(17);
        let returned = Returned {
            succeeded: flags & SUCCEEDED != 0,
            late: flags & LATE != 0,
            test: flags & TEST != 0,
            state_run: flags & STATE_RUN != 0,
            changed: u32_at(13),
            duration_ms: (duration != NO_DURATION).then_some(u64::from(duration)),
        };
        (u32_at(0), Stamp(i64::from_le_bytes(at)), returned)
    })
}

/// Whether minion number `minion` has a return in the chunk (a scan of ids).
pub fn has_return_of(blob: &[u8], minion: u32) -> bool {
    let id = minion.to_le_bytes();
    blob.chunks_exact(RETURN_WIDTH).any(|e| e[..4] == id)
}

/// A chunk's missing minions, encoded.
pub fn put_missing(missing: &[(u32, i64, MissingFacts)]) -> Vec<u8> {
    // A Vec of plain structs always encodes; an empty blob reads as none.
    rmp_serde::to_vec(missing).unwrap_or_default()
}

/// A chunk's missing minions, decoded (a damaged blob: none, logged).
pub fn missing(blob: &[u8]) -> Vec<(u32, i64, MissingFacts)> {
    if blob.is_empty() {
        return Vec::new();
    }
    rmp_serde::from_slice(blob)
        .inspect_err(|error| tracing::warn!(%error, "history missing list not read"))
        .unwrap_or_default()
}

/// A chunk's failures as stored: each distinct cause once, then (minion
/// number, time, the cause's index) per minion.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct FailureList {
    causes: Vec<FailedState>,
    minions: Vec<(u32, i64, u32)>,
}

impl FailureList {
    /// (minion number, time, cause) per minion, the cause borrowed (a
    /// reader keeps only the few it wants). An entry naming a cause the
    /// list lacks is left out.
    pub fn entries(&self) -> impl Iterator<Item = (u32, Stamp, &FailedState)> + '_ {
        self.minions.iter().filter_map(|&(minion, at, i)| {
            let cause = self.causes.get(i as usize)?;
            Some((minion, Stamp(at), cause))
        })
    }
}

/// A chunk's failures, encoded (none: an empty blob).
pub fn put_failures(failures: &[(u32, Stamp, &FailedState)]) -> Vec<u8> {
    if failures.is_empty() {
        return Vec::new();
    }
    let mut index: foldhash::HashMap<&FailedState, u32> = Default::default();
    let mut list = FailureList {
        causes: Vec::new(),
        minions: Vec::with_capacity(failures.len()),
    };
    for (minion, at, cause) in failures {
        let next = list.causes.len() as u32;
        let i = *index.entry(cause).or_insert_with(|| {
            list.causes.push((*cause).clone());
            next
        });
        list.minions.push((*minion, at.0, i));
    }
    // Plain structs always encode; an empty blob reads as none.
    rmp_serde::to_vec(&list).unwrap_or_default()
}

/// A chunk's failures, decoded (a damaged blob: none, logged).
pub fn failures(blob: &[u8]) -> FailureList {
    if blob.is_empty() {
        return FailureList::default();
    }
    rmp_serde::from_slice(blob)
        .inspect_err(|error| tracing::warn!(%error, "history failure list not read"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_return_reads_back_as_written() {
        let r = Returned {
            succeeded: true,
            late: false,
            test: true,
            state_run: true,
            changed: 7,
            duration_ms: Some(1234),
        };
        let none = Returned {
            duration_ms: None,
            late: true,
            ..Returned::default()
        };
        let mut blob = Vec::new();
        put_return(&mut blob, 3, Stamp(-5), &r);
        put_return(&mut blob, 70_000, Stamp(i64::MAX), &none);
        assert_eq!(blob.len(), 2 * RETURN_WIDTH);
        let read: Vec<_> = returns(&blob).collect();
        assert_eq!(
            read,
            vec![(3, Stamp(-5), r), (70_000, Stamp(i64::MAX), none)]
        );
        assert!(has_return_of(&blob, 70_000) && !has_return_of(&blob, 4));
    }

    #[test]
    fn a_missing_list_reads_back_and_damage_reads_as_none() {
        let facts = MissingFacts {
            reason: MissingReason::NotConnected,
            evidence: MissingEvidence::Nothing,
            disconnected_at: Some(Stamp(9)),
            address: Some("10.0.0.1".into()),
            streak: 3,
            missing_since: None,
        };
        let list = vec![(5, 1, facts)];
        assert_eq!(missing(&put_missing(&list)), list);
        assert!(missing(&[0xc1]).is_empty());
    }

    #[test]
    fn a_failure_list_keeps_each_cause_once_and_reads_back_per_minion() {
        let cause = |fingerprint: &str, comment: &str| FailedState {
            fingerprint: fingerprint.into(),
            sls: "web".into(),
            state_id: "nginx".into(),
            category: Category::Command,
            comment: comment.into(),
            incident: None,
        };
        let (a, b) = (cause("f1", "exit 1"), cause("f2", "exit 2"));
        let written = [(1, Stamp(10), &a), (2, Stamp(11), &b), (3, Stamp(12), &a)];
        let blob = put_failures(&written);
        let many: Vec<_> = (0..500).map(|m| (m, Stamp(1), &a)).collect();
        assert!(
            put_failures(&many).len() < 500 * 8,
            "a cause shared by 500 minions is stored once"
        );
        assert_eq!(
            failures(&blob).entries().collect::<Vec<_>>(),
            written.to_vec()
        );
        let none = |blob: &[u8]| failures(blob).entries().count() == 0;
        assert!(none(&[]) && none(&[0xc1]));
    }
}
