//! What `saltsight top` shows, fed by the (redacted) records as they come: jobs
//! in flight with their returns against expected, closed jobs, verdicts as
//! they fall, failure groups by fingerprint, bus gaps. Pure: records and times
//! in, no IO, no clock; every list bounded (oldest dropped, counted).

use std::collections::{BTreeMap, VecDeque};

use crate::record::{MissingReason, Record, RecordBody};
use crate::time::Stamp;

/// How much the view keeps at most.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Jobs in flight.
    pub in_flight: usize,
    /// Closed jobs, newest first.
    pub closed: usize,
    /// Verdicts, newest first.
    pub verdicts: usize,
    /// Failure groups, by fingerprint.
    pub groups: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            in_flight: 500,
            closed: 200,
            verdicts: 200,
            groups: 100,
        }
    }
}

/// One job as the view knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    pub jid: String,
    pub fun: String,
    pub target: String,
    /// Minions targeted (0 when the publication was not seen).
    pub expected: u32,
    pub returned: u32,
    pub failed: u32,
    /// Verdicts given so far (minions that did not return by the deadline).
    pub missing: u32,
    pub missing_by_reason: BTreeMap<MissingReason, u32>,
    /// Publication time (or the first record's, when it was not seen).
    pub published_at: Stamp,
    /// When `job_completed` closed it.
    pub closed_at: Option<Stamp>,
    /// Milliseconds from publication to the last return (closed jobs).
    pub duration_ms: Option<u64>,
}

impl JobView {
    fn new(jid: &str, fun: &str, at: Stamp) -> Self {
        Self {
            jid: jid.to_owned(),
            fun: fun.to_owned(),
            target: String::new(),
            expected: 0,
            returned: 0,
            failed: 0,
            missing: 0,
            missing_by_reason: BTreeMap::new(),
            published_at: at,
            closed_at: None,
            duration_ms: None,
        }
    }

    /// Microseconds since publication at `now`, or its duration once closed.
    pub fn age_micros(&self, now: Stamp) -> i64 {
        match (self.closed_at, self.duration_ms) {
            (Some(_), Some(ms)) => i64::try_from(ms).unwrap_or(i64::MAX).saturating_mul(1000),
            (Some(closed), None) => closed.micros_since(self.published_at),
            _ => now.micros_since(self.published_at).max(0),
        }
    }

    pub fn is_open(&self) -> bool {
        self.closed_at.is_none()
    }
}

/// What was decided about one minion in one job.
#[derive(Debug, Clone, PartialEq)]
pub enum VerdictKind {
    /// Did not return by the deadline: why, and what decided it.
    Missing { reason: String, evidence: String },
    /// Returned, and failed (retcode, failed states).
    Failed { retcode: Option<i64> },
    /// Returned after its job was closed.
    Late { succeeded: bool },
    /// An SLS did not render.
    Render { sls: String, message: String },
    /// Drift put back (or, `test=True`, seen): its first state, and how many.
    Drift {
        change: String,
        state: String,
        states: u32,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub at: Stamp,
    pub jid: String,
    pub minion: String,
    pub fun: String,
    pub kind: VerdictKind,
}

/// One failure (a fingerprint) across jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupView {
    pub fingerprint: String,
    pub category: String,
    /// `sls:state_id` (or the SLS alone, for a render failure).
    pub place: String,
    pub comment: String,
    /// Minions with it in each job (a later revision of a job replaces its count).
    pub per_job: Vec<(String, u32)>,
    pub minions: Vec<String>,
    pub last_at: Stamp,
}

impl GroupView {
    /// Minions with it, summed over the jobs kept.
    pub fn count(&self) -> u32 {
        self.per_job.iter().map(|(_, n)| n).sum()
    }
}

/// Jobs a group remembers at most.
const GROUP_JOBS: usize = 32;

/// The last bus gap.
#[derive(Debug, Clone, PartialEq)]
pub struct GapView {
    pub reason: String,
    pub started_at: Stamp,
    pub duration_ms: u64,
    pub dropped_frames: u64,
}

/// The view's state.
#[derive(Debug, Default)]
pub struct Model {
    limits: Limits,
    /// Oldest first.
    in_flight: VecDeque<JobView>,
    /// Newest first.
    closed: VecDeque<JobView>,
    /// Newest first.
    verdicts: VecDeque<Verdict>,
    /// Most recently seen first.
    groups: VecDeque<GroupView>,
    pub records: u64,
    /// The newest record's time.
    pub newest_at: Option<Stamp>,
    pub gaps: u64,
    pub last_gap: Option<GapView>,
    /// Entries dropped to stay within the limits.
    pub dropped: u64,
}

impl Model {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// Takes one record.
    pub fn apply(&mut self, record: &Record) {
        self.records += 1;
        self.newest_at = Some(self.newest_at.map_or(record.at, |t| t.max(record.at)));
        let at = record.at;
        match &record.body {
            RecordBody::JobPublished(p) => {
                let job = self.open_job(&p.jid, &p.fun, at);
                job.fun.clone_from(&p.fun);
                job.expected = p.expected_count;
                job.target = p.tgt.join(",");
                job.published_at = at;
            }
            RecordBody::MinionReturn(r) => {
                let fun = r.fun.as_deref().unwrap_or_default();
                let job = self.open_job(&r.jid, fun, at);
                job.returned += 1;
                if !r.succeeded {
                    job.failed += 1;
                    self.verdict(Verdict {
                        at,
                        jid: r.jid.to_string(),
                        minion: r.minion.to_string(),
                        fun: fun.to_owned(),
                        kind: VerdictKind::Failed { retcode: r.retcode },
                    });
                }
            }
            RecordBody::LateReturn(r) => {
                if let Some(job) = self.closed.iter_mut().find(|j| *j.jid == *r.jid) {
                    job.returned += 1;
                    job.failed += u32::from(!r.succeeded);
                }
                self.verdict(Verdict {
                    at,
                    jid: r.jid.to_string(),
                    minion: r.minion.to_string(),
                    fun: r.fun.as_deref().unwrap_or_default().to_owned(),
                    kind: VerdictKind::Late {
                        succeeded: r.succeeded,
                    },
                });
            }
            RecordBody::MinionMissing(m) => {
                let job = self.open_job(&m.jid, &m.fun, m.published_at);
                job.missing += 1;
                *job.missing_by_reason.entry(m.reason).or_default() += 1;
                self.verdict(Verdict {
                    at,
                    jid: m.jid.clone(),
                    minion: m.minion.clone(),
                    fun: m.fun.clone(),
                    kind: VerdictKind::Missing {
                        reason: m.reason.as_str().to_owned(),
                        evidence: crate::cli::present::missing_evidence(
                            m.evidence.as_str(),
                            m.disconnected_at.map(|t| t.to_string()).as_deref(),
                            m.address.as_deref(),
                        ),
                    },
                });
            }
            RecordBody::JobCompleted(c) => {
                let mut job = match self.in_flight.iter().position(|j| j.jid == c.jid) {
                    Some(i) => self
                        .in_flight
                        .remove(i)
                        .unwrap_or_else(|| JobView::new(&c.jid, &c.fun, c.published_at)),
                    None => match self.closed.iter().position(|j| j.jid == c.jid) {
                        Some(i) => self
                            .closed
                            .remove(i)
                            .unwrap_or_else(|| JobView::new(&c.jid, &c.fun, c.published_at)),
                        None => JobView::new(&c.jid, &c.fun, c.published_at),
                    },
                };
                job.expected = c.expected;
                job.returned = c.returned;
                job.failed = c.failed;
                job.missing_by_reason.clone_from(&c.missing);
                job.missing = c.missing.values().sum();
                job.published_at = c.published_at;
                job.closed_at = Some(at);
                job.duration_ms = Some(c.duration_ms);
                if job.target.is_empty() {
                    job.target = c.tgt.join(",");
                }
                self.closed.push_front(job);
                if self.closed.len() > self.limits.closed {
                    self.closed.pop_back();
                    self.dropped += 1;
                }
            }
            RecordBody::FailureGroup(g) => {
                let i = match self
                    .groups
                    .iter()
                    .position(|v| v.fingerprint == g.fingerprint)
                {
                    Some(i) => i,
                    None => {
                        let place = match (&g.sls, &g.state_id) {
                            (Some(sls), Some(id)) => format!("{sls}:{id}"),
                            (Some(sls), None) => sls.clone(),
                            (None, Some(id)) => id.clone(),
                            (None, None) => String::new(),
                        };
                        self.groups.push_front(GroupView {
                            fingerprint: g.fingerprint.clone(),
                            category: g.cause.category.as_str().to_owned(),
                            place,
                            comment: g.comment.clone(),
                            per_job: Vec::new(),
                            minions: Vec::new(),
                            last_at: at,
                        });
                        if self.groups.len() > self.limits.groups {
                            self.groups.pop_back();
                            self.dropped += 1;
                        }
                        0
                    }
                };
                if let Some(mut group) = self.groups.remove(i) {
                    match group.per_job.iter_mut().find(|(jid, _)| *jid == g.jid) {
                        Some(entry) => entry.1 = g.count,
                        None => group.per_job.push((g.jid.clone(), g.count)),
                    }
                    if group.per_job.len() > GROUP_JOBS {
                        group.per_job.remove(0);
                    }
                    for minion in &g.minions {
                        if !group.minions.contains(minion) && group.minions.len() < GROUP_JOBS {
                            group.minions.push(minion.clone());
                        }
                    }
                    group.minions.sort();
                    group.last_at = at;
                    self.groups.push_front(group);
                }
            }
            RecordBody::RenderFailure(r) => self.verdict(Verdict {
                at,
                jid: r.jid.clone(),
                minion: r.minion.clone(),
                fun: r.fun.clone(),
                kind: VerdictKind::Render {
                    sls: r.sls.clone().unwrap_or_default(),
                    message: r.message.clone(),
                },
            }),
            RecordBody::Drift(d) => self.verdict(Verdict {
                at,
                jid: d.jid.clone(),
                minion: d.minion.clone(),
                fun: d.fun.clone(),
                kind: VerdictKind::Drift {
                    change: d.change.to_string(),
                    state: d
                        .states
                        .first()
                        .map(|s| format!("{}:{} {}", s.sls, s.state_id, s.function))
                        .unwrap_or_default(),
                    states: u32::try_from(d.states.len()).unwrap_or(u32::MAX) + d.states_not_listed,
                },
            }),
            RecordBody::BusGap(g) => {
                self.gaps += 1;
                self.last_gap = Some(GapView {
                    reason: g.reason.to_owned(),
                    started_at: g.started_at,
                    duration_ms: g.duration_ms,
                    dropped_frames: g.dropped_frames,
                });
            }
            RecordBody::StateFailure(_)
            | RecordBody::ConfigChange(_)
            | RecordBody::ExternalIncident(_)
            | RecordBody::MasterPressure(_)
            | RecordBody::Rollout(_)
            | RecordBody::NonIdempotent(_) => {}
        }
    }

    /// The open job `jid`, made when its publication was not seen.
    fn open_job(&mut self, jid: &str, fun: &str, at: Stamp) -> &mut JobView {
        let i = match self.in_flight.iter().position(|j| j.jid == jid) {
            Some(i) => i,
            None => {
                if self.in_flight.len() >= self.limits.in_flight {
                    self.in_flight.pop_front();
                    self.dropped += 1;
                }
                self.in_flight.push_back(JobView::new(jid, fun, at));
                self.in_flight.len() - 1
            }
        };
        &mut self.in_flight[i]
    }

    fn verdict(&mut self, verdict: Verdict) {
        self.verdicts.push_front(verdict);
        if self.verdicts.len() > self.limits.verdicts {
            self.verdicts.pop_back();
            self.dropped += 1;
        }
    }

    /// The jobs as listed: in flight newest first, then closed newest first.
    pub fn jobs(&self) -> impl Iterator<Item = &JobView> {
        self.in_flight.iter().rev().chain(self.closed.iter())
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Newest first.
    pub fn verdicts(&self) -> impl Iterator<Item = &Verdict> {
        self.verdicts.iter()
    }

    /// Most recently seen first.
    pub fn groups(&self) -> impl Iterator<Item = &GroupView> {
        self.groups.iter()
    }

    /// How far the newest record's time is behind `now`, in microseconds.
    pub fn behind_micros(&self, now: Stamp) -> Option<i64> {
        self.newest_at.map(|t| now.micros_since(t))
    }
}

#[cfg(test)]
pub(super) mod tests;
