//! The records saltsight emits: data only, serialisable, versioned. docs/records.md
//! is the schema; a record's `id` is stable for the same facts, so duplicates from
//! at-least-once delivery collapse upstream. [`redact`] is the gate every record
//! passes before any output.

pub mod batch;
pub mod drift;
pub mod episodes;
mod ids;
pub mod json;
pub mod keys;
mod missing;
pub mod pull_request;
pub mod redact;
pub mod shared;
pub mod text;
pub mod trace;
pub use batch::{BatchEnd, BatchInfo};
pub use drift::{ChangeKind, Drift, DriftedState, NonIdempotent, SettleStatus};
pub use ids::{RecordFactory, RecordId, stable_hash};
pub use missing::{MissingEvidence, MissingReason};
pub use pull_request::PullRequest;
pub use shared::Shared;
pub use trace::TraceContext;

pub use episodes::{
    Delays, EpisodeStatus, ExternalIncident, IncidentEnd, MasterPressure, PressureSignal, Rollout,
    RolloutFailure, RolloutStatus, SignalFigure,
};

use std::sync::Arc;

use compact_str::CompactString;
use serde::Serialize;

use crate::time::Stamp;

/// Minions a `job_published` lists at most (a job may target hundreds of
/// thousands: its returns and verdicts name each one).
pub const MAX_LISTED_MINIONS: usize = 10_000;

/// Bumped when a field changes meaning or disappears (adding one does not).
pub const SCHEMA_VERSION: u32 = 2;

/// One record, with what every kind carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    pub kind: RecordKind,
    pub schema_version: u32,
    pub id: RecordId,
    pub master: Arc<str>,
    /// The time the facts are about (event time; replay reproduces it).
    pub at: Stamp,
    #[serde(flatten)]
    pub body: RecordBody,
    /// The redaction rules that masked or cut something in this record (names
    /// only; docs/security.md).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
}

/// A record's facts. The kinds made rarely, or holding much, are boxed, so a
/// record is the size of the common ones (a `minion_return`'s): records are
/// moved through the stages, redaction and the outputs by value, and a
/// `state_failure` inline made every record of every kind 1 KiB.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RecordBody {
    JobPublished(Box<JobPublished>),
    MinionReturn(MinionReturn),
    MinionMissing(MinionMissing),
    JobCompleted(JobCompleted),
    LateReturn(MinionReturn),
    BusGap(BusGapRecord),
    StateFailure(Box<StateFailure>),
    RenderFailure(Box<RenderFailure>),
    FailureGroup(Box<FailureGroup>),
    ConfigChange(ConfigChange),
    ExternalIncident(ExternalIncident),
    MasterPressure(MasterPressure),
    Rollout(Box<Rollout>),
    Drift(Drift),
    NonIdempotent(Box<NonIdempotent>),
}

crate::label_set! {
    /// Every record kind (a record's `kind`; also a bounded metrics label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum RecordKind {
        JobPublished = "job_published",
        MinionReturn = "minion_return",
        MinionMissing = "minion_missing",
        JobCompleted = "job_completed",
        LateReturn = "late_return",
        BusGap = "bus_gap",
        StateFailure = "state_failure",
        RenderFailure = "render_failure",
        FailureGroup = "failure_group",
        ConfigChange = "config_change",
        ExternalIncident = "external_incident",
        MasterPressure = "master_pressure",
        Rollout = "rollout",
        Drift = "drift",
        NonIdempotent = "non_idempotent",
    }
}

impl RecordBody {
    pub fn kind(&self) -> RecordKind {
        match self {
            RecordBody::JobPublished(_) => RecordKind::JobPublished,
            RecordBody::MinionReturn(_) => RecordKind::MinionReturn,
            RecordBody::MinionMissing(_) => RecordKind::MinionMissing,
            RecordBody::JobCompleted(_) => RecordKind::JobCompleted,
            RecordBody::LateReturn(_) => RecordKind::LateReturn,
            RecordBody::BusGap(_) => RecordKind::BusGap,
            RecordBody::StateFailure(_) => RecordKind::StateFailure,
            RecordBody::RenderFailure(_) => RecordKind::RenderFailure,
            RecordBody::FailureGroup(_) => RecordKind::FailureGroup,
            RecordBody::ConfigChange(_) => RecordKind::ConfigChange,
            RecordBody::ExternalIncident(_) => RecordKind::ExternalIncident,
            RecordBody::MasterPressure(_) => RecordKind::MasterPressure,
            RecordBody::Rollout(_) => RecordKind::Rollout,
            RecordBody::Drift(_) => RecordKind::Drift,
            RecordBody::NonIdempotent(_) => RecordKind::NonIdempotent,
        }
    }
}

crate::label_set! {
    /// How a job came to run.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub enum RunKind {
        /// Published by someone at the salt CLI (`new` seen, no other mark).
        Adhoc = "adhoc",
        /// Started by a minion's scheduler (no `new`; a `schedule` name on the return).
        Scheduled = "scheduled",
        /// Published by an orchestration run (`salt/run/<jid>/args` just before it).
        Orchestrated = "orchestrated",
        /// Published through salt-api (its user is one of `jobs.api_users`).
        Api = "api",
        /// Published by the reactor: user `Reactor` (its runner and wheel
        /// jobs), or metadata naming the job it answers ([`RETRY_OF`]).
        Reactor = "reactor",
        /// A runner (`salt/run/...`), e.g. an orchestration itself.
        Runner = "runner",
        /// Run by the minion itself with a master (`salt-call`): its return comes
        /// with a jid the master gave it on receipt, and no `new`.
        Call = "salt_call",
        /// Its publication was not seen (before saltsight started, or in a gap).
        #[default]
        Unknown = "unknown",
    }
}

/// The metadata key a job started by a Reactor in answer to a saltsight
/// event carries (the shipped SLS in `packaging/reactor/` set it): the jid of
/// the original job that event was about. Such a job's run kind is `reactor`.
pub const RETRY_OF: &str = "saltsight_retry_of";

/// What every job-related record says of its job: how it came to run and what it
/// was told.
#[derive(Debug, Clone, PartialEq, Default, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct JobContext {
    pub run_kind: RunKind,
    /// The orchestration run that published the job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub orchestration_jid: Option<String>,
    /// The job's `--metadata` (e.g. a release id), when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// Run with `test=True`: states report what would change, nothing changed.
    pub test: bool,
    /// The job's trace, when Salt's tracing put a `traceparent` on its
    /// publication: `trace_id` and `span_id` on every record of the job.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceContext>,
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct JobPublished {
    pub jid: String,
    pub fun: String,
    /// The job's arguments as published (kwargs as Salt's `{"__kwarg__": true}`
    /// map), after redaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arg: Option<serde_json::Value>,
    pub tgt: Vec<String>,
    pub tgt_type: Option<String>,
    pub user: Option<String>,
    /// The minions targeted, the first [`MAX_LISTED_MINIONS`] of them: a
    /// name up to 24 bytes held inline, so a job's list is one allocation.
    pub expected: Vec<CompactString>,
    /// How many were targeted (`expected` may list fewer).
    #[serde(default)]
    pub expected_count: u32,
    #[serde(default)]
    pub not_connected: Vec<CompactString>,
    pub deadline: Stamp,
    #[serde(flatten)]
    pub context: Shared<JobContext>,
    /// HEAD of each watched git checkout when the job was published.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub commits: std::collections::BTreeMap<String, String>,
    /// A `salt -b` run: what was known of the batch when it began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct StateCounts {
    pub ok: u32,
    pub changed: u32,
    pub failed: u32,
    /// `result: null` in `test=True` runs: would change.
    pub would_change: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct MinionReturn {
    /// Its job's, shared by the job's returns when the job is open.
    pub jid: Arc<str>,
    /// Shared with the return's other records and the history's verdict.
    pub minion: Arc<str>,
    pub fun: Option<Arc<str>>,
    pub retcode: Option<i64>,
    /// Salt's own `success` (true for a scheduled run whose states failed).
    pub salt_success: Option<bool>,
    /// saltsight's verdict: retcode 0, `success` not false, and no state failed.
    pub succeeded: bool,
    #[serde(flatten)]
    pub context: Shared<JobContext>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Milliseconds from publication to this return, when the publication was seen.
    pub duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub states: Option<StateCounts>,
    /// Salt trimmed the return on the bus: a state run trimmed whole or by
    /// state is never judged a success (its failed states cannot be seen).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trimmed: Option<Trimmed>,
    /// The trace the minion's `ret` event carried (its own, not the job's):
    /// what a job's span links to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_trace: Option<TraceContext>,
}

crate::label_set! {
    /// What of a return Salt replaced with `"VALUE_TRIMMED"` (its
    /// `max_event_size`): the event carries less than the minion sent.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Trimmed {
        /// The whole return value.
        Return = "return",
        /// Whole state entries of a state run: their results are not visible.
        States = "states",
        /// Values inside entries (a `changes.diff`): every result is visible.
        Values = "values",
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct MinionMissing {
    pub jid: String,
    pub minion: String,
    pub fun: String,
    pub reason: MissingReason,
    /// What decided the reason.
    pub evidence: MissingEvidence,
    /// When presence saw it disconnect (`presence_absent`, `presence_lost`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disconnected_at: Option<Stamp>,
    /// The address its connection to the master came from, while the
    /// connections presence saw it connected (`connected_silent`...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Jobs in a row (this one included) this minion was expected in and did
    /// not answer; `unknown_gap` verdicts neither count nor break it.
    #[serde(default)]
    pub streak: u32,
    /// When the first job of the streak was published (a streak of 2 or more).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_since: Option<Stamp>,
    pub published_at: Stamp,
    pub deadline: Stamp,
    /// Given while the master was saturated: that `master_pressure` episode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub during_master_pressure: Option<String>,
    #[serde(flatten)]
    pub context: Shared<JobContext>,
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct JobCompleted {
    pub jid: String,
    pub fun: String,
    pub tgt: Vec<String>,
    pub expected: u32,
    pub returned: u32,
    pub succeeded: u32,
    pub failed: u32,
    /// Missing minions by reason (only reasons that occurred).
    pub missing: std::collections::BTreeMap<MissingReason, u32>,
    pub published_at: Stamp,
    /// Milliseconds from publication to the last return (or to the deadline).
    pub duration_ms: u64,
    pub first_return_ms: Option<u64>,
    /// 0 at the deadline or the last return; +1 for each late return amending it.
    pub revision: u32,
    /// Evicted to respect `jobs.max_jobs` before its deadline.
    pub evicted: bool,
    /// Ran (in part) while the master was saturated: that `master_pressure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during_master_pressure: Option<String>,
    /// A `salt -b` run: its sub-batches and how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Box<BatchInfo>>,
    #[serde(flatten)]
    pub context: Shared<JobContext>,
}

crate::label_set! {
    /// The closed set of categories; also a bounded metrics label.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Category {
        Render = "render",
        DependencyPackage = "dependency.package",
        NetworkDns = "network.dns",
        NetworkConnect = "network.connect",
        SourceMissing = "source_missing",
        Command = "command",
        Permission = "permission",
        Timeout = "timeout",
        /// The state's module is not loaded on the minion (`State 'x.y' was not
        /// found in SLS`): not synced, an extension not installed, its
        /// `__virtual__` refused, or a typo.
        StateUnavailable = "state_unavailable",
        /// The run was refused: the minion was already running a state run.
        AlreadyRunning = "already_running",
        /// A service that failed to start, stop, reload or enable (Salt's
        /// `service.*` comments, systemd's own words through any state).
        Service = "service",
        Other = "other",
    }
}

impl Category {
    /// Whether the cause lies outside the state tree (a mirror, DNS, the network):
    /// fixed by operations, not by a commit.
    pub fn is_external(self) -> bool {
        matches!(
            self,
            Category::DependencyPackage | Category::NetworkDns | Category::NetworkConnect
        )
    }
}

/// A category with the evidence that chose it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Classification {
    pub category: Category,
    /// The rule that matched (`"none"` for `other`, `"render"` for render errors).
    pub rule: std::borrow::Cow<'static, str>,
    /// The text the rule matched, capped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
}

impl Classification {
    /// A render error (an SLS that did not render).
    pub fn render() -> Self {
        Self {
            category: Category::Render,
            rule: "render".into(),
            evidence: None,
            host: None,
            url: None,
            package: None,
        }
    }
}

/// A git commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Commit {
    pub id: String,
    pub author: String,
    /// Author time, RFC 3339 as git prints it.
    pub time: String,
    pub subject: String,
    /// The pull or merge request its message names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequest>,
}

/// The commit that introduced a failure: the oldest change to the failing SLS
/// since the state last passed, or (never seen passing) the last change to it at
/// or before the HEAD the failure was first seen under. Kept for the failure's
/// fingerprint once found, so a later unrelated commit to the file does not
/// take its place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct IntroducedBy {
    pub repo: String,
    /// The SLS file, relative to its root (`web/nginx.sls`, `web/nginx/init.sls`).
    pub path: String,
    #[serde(flatten)]
    pub commit: Commit,
    /// How it was found.
    pub basis: IntroducedBasis,
}

/// How `introduced_by` was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntroducedBasis {
    /// The oldest commit touching the SLS between the last HEAD the state passed
    /// under and the first it failed under (the suspects).
    SinceLastPass,
    /// The state was never seen passing: the last commit touching the SLS at or
    /// before the HEAD the failure was first seen under.
    FirstSeenHead,
}

/// The commits between the last HEAD a state passed under on a minion and the
/// first HEAD it failed under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SuspectCommits {
    pub repo: String,
    pub last_ok: String,
    pub first_failed: String,
    /// Newest first, at most `correlate.max_commits`.
    pub commits: Vec<Commit>,
    /// More commits lie in the range than are listed.
    pub truncated: bool,
}

/// What the correlator attaches to a failure.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
pub struct Correlation {
    /// HEAD of each watched checkout when the job was published.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub commits: std::collections::BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub introduced_by: Option<IntroducedBy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspect_commits: Option<SuspectCommits>,
}

/// What a state that ran a command said (`cmd.*`, or any state whose `changes`
/// carry `retcode`, `stderr`, `stdout`): the ends of its output, where the
/// error is, capped (and redacted, as every text).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
pub struct CommandOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retcode: Option<i64>,
    /// The last bytes of stderr.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// The last bytes of stdout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
}

impl CommandOutput {
    pub fn is_empty(&self) -> bool {
        self.retcode.is_none() && self.stderr.is_none() && self.stdout.is_none()
    }
}

/// A root-cause state of a failed state run on one minion. What the state is
/// and said, its cause and its output are the same on every minion that
/// failed it alike: made once and shared by their records ([`Shared`]).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct StateFailure {
    /// The return's, shared with its other records (allocated once a return).
    pub jid: Arc<str>,
    pub minion: Arc<str>,
    pub fun: Arc<str>,
    #[serde(flatten)]
    pub state: Shared<FailedStateFacts>,
    pub run_num: Option<u64>,
    pub duration_ms: Option<f64>,
    /// The time of day Salt gives (`03:12:51.506143`): held inline, not
    /// allocated, up to 24 bytes.
    pub start_time: Option<CompactString>,
    #[serde(flatten)]
    pub cause: Shared<Classification>,
    /// States that failed only because this one did.
    pub fallout: u32,
    /// The command's exit code and the ends of its stderr and stdout.
    #[serde(default, skip_serializing_if = "CommandOutput::is_empty")]
    pub output: Shared<CommandOutput>,
    /// Shared with the other minions' that failed the same way.
    pub fingerprint: Arc<str>,
    /// The open external incident this failure is part of (its target failing
    /// on several minions): `external_incident.incident`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incident: Option<String>,
    /// This run is the first, on this minion, in which the state failed after
    /// passing (known only with a watched state tree and an earlier run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_failing: Option<bool>,
    #[serde(flatten)]
    pub context: Shared<JobContext>,
    #[serde(flatten)]
    pub correlation: Shared<Correlation>,
}

/// A failed state as its return names it (a `state_failure`'s, in place).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct FailedStateFacts {
    pub sls: String,
    pub state_id: String,
    pub function: String,
    pub name: String,
    pub comment: String,
    /// The comment's length before it was capped.
    pub comment_len: usize,
}

/// An SLS that did not render on one minion.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RenderFailure {
    pub jid: String,
    pub minion: String,
    pub fun: String,
    pub saltenv: Option<String>,
    pub sls: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// The SLS is a pillar's (the return said the pillar failed to render).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pillar: bool,
    pub message: String,
    pub message_len: usize,
    #[serde(flatten)]
    pub cause: Classification,
    pub fingerprint: String,
    #[serde(flatten)]
    pub context: Shared<JobContext>,
    #[serde(flatten)]
    pub correlation: Shared<Correlation>,
}

/// One failure (a fingerprint) across the minions of one job.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct FailureGroup {
    pub jid: String,
    pub fingerprint: String,
    pub sls: Option<String>,
    /// The SLS is a pillar's (a render failure of the pillar).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pillar: bool,
    pub state_id: Option<String>,
    pub function: Option<String>,
    #[serde(flatten)]
    pub cause: Classification,
    /// The first minion's comment (or render message), capped.
    pub comment: String,
    pub comment_len: usize,
    /// The comment as fingerprinted.
    pub normalised: String,
    /// The first minion's command output, when the state ran one.
    #[serde(default, skip_serializing_if = "CommandOutput::is_empty")]
    pub output: CommandOutput,
    pub count: u32,
    /// The first minions with it, sorted, at most `triage.example_minions`.
    pub minions: Vec<String>,
    pub first_seen_jid: String,
    pub first_seen_at: Stamp,
    /// The job's `job_completed` revision this group belongs to.
    #[serde(default)]
    pub revision: u32,
    /// The external incident its target is part of, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incident: Option<String>,
    #[serde(flatten)]
    pub context: Shared<JobContext>,
    #[serde(flatten)]
    pub correlation: Shared<Correlation>,
}

/// A watched checkout's HEAD moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigChange {
    pub repo: String,
    pub path: String,
    pub old: Option<String>,
    pub new: Option<String>,
    /// `old..new`, newest first, at most `correlate.max_commits`.
    pub commits: Vec<Commit>,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BusGapRecord {
    pub reason: &'static str,
    pub started_at: Stamp,
    pub ended_at: Stamp,
    pub duration_ms: u64,
    pub dropped_frames: u64,
}

#[cfg(test)]
mod tests;
