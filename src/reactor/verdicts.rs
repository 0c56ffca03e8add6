//! saltsight's verdicts as events for the Reactor: an output beside the
//! configured ones that takes the redacted records and fires, at the end of
//! each handled event (`flush`):
//!
//! - `saltsight/job/<jid>/missing`: the job's `minion_missing` records, with the
//!   minions and their reasons, and the job's function and arguments so a
//!   Reactor SLS can run it again on them;
//! - `saltsight/job/<jid>/failed`: the job's `failure_group` records (root
//!   causes), with every minion whose return failed;
//! - `saltsight/incident/<id>/{open,closed}`, `saltsight/pressure/<id>/{open,closed}`:
//!   an episode's first and last record;
//! - `saltsight/rollout/<repo>/<commit>/<status>`: a rollout whose status changed.
//!
//! No feedback loops: a job a Reactor started in answer to one of these names
//! the job it answers in its metadata ([`super::RETRY_OF`], set by the shipped
//! SLS; its run kind is `reactor`), and each kind fires at most once per
//! original job, so a retry that fails again fires nothing. A job the Reactor
//! started that names no original fires nothing either: its cause is unknown,
//! and firing could start a loop. Every memory here is bounded (oldest first).

use std::collections::BTreeMap;
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};
use serde::Serialize;
use serde_json::Value;

use super::{Firer, RETRY_OF};
use crate::config::reactor::{FireKind, ReactorConfig};
use crate::fifo::FifoMap;
use crate::record::episodes::{EpisodeStatus, RolloutStatus};
use crate::record::{JobContext, Record, RecordBody, RunKind};
use crate::sink::output::{Output, OutputError};

/// Jobs remembered between their publication and their close.
const MAX_JOBS: usize = 10_000;
/// (original job, kind) pairs remembered as fired.
const MAX_FIRED: usize = 50_000;
/// Rollouts whose last status is remembered.
const MAX_ROLLOUTS: usize = 1_000;

/// What is known of an open job: how to run it again, and who failed.
#[derive(Debug, Default)]
struct JobNote {
    fun: String,
    arg: Vec<Value>,
    kwarg: serde_json::Map<String, Value>,
    failed: Vec<String>,
    failed_more: u32,
}

/// One job's verdicts of one kind, gathered during a handled event.
#[derive(Debug)]
struct Gathered {
    context: JobContext,
    minions: Vec<String>,
    reasons: BTreeMap<String, Value>,
    records: Vec<Value>,
    more: u32,
}

/// The output that fires verdicts.
pub struct VerdictOutput {
    firer: Arc<Firer>,
    kinds: Vec<FireKind>,
    max_minions: usize,
    /// Open jobs' notes (at most `MAX_JOBS`, the oldest forgotten first).
    jobs: FifoMap<JobNote>,
    /// Jobs closed in this handled event, forgotten after `flush`.
    closed: Vec<String>,
    gathered: BTreeMap<(String, FireKind), Gathered>,
    episodes: Vec<(String, Value)>,
    fired: FifoMap<(), (String, FireKind)>,
    rollouts: HashMap<(String, String), RolloutStatus>,
}

impl VerdictOutput {
    pub fn new(config: &ReactorConfig, firer: Arc<Firer>) -> Self {
        Self {
            firer,
            kinds: config.fire.clone(),
            max_minions: config.max_minions,
            jobs: FifoMap::new(MAX_JOBS),
            closed: Vec::new(),
            gathered: BTreeMap::new(),
            episodes: Vec::new(),
            fired: FifoMap::new(MAX_FIRED),
            rollouts: HashMap::new(),
        }
    }

    fn fires(&self, kind: FireKind) -> bool {
        self.kinds.contains(&kind)
    }

    fn note_published(&mut self, jid: &str, fun: &str, arg: Option<&Value>) {
        let (arg, kwarg) = split_args(arg);
        let note = JobNote {
            fun: fun.to_owned(),
            arg,
            kwarg,
            ..JobNote::default()
        };
        let forgotten = self.jobs.insert(jid, note);
        self.firer.counts().jobs_forgotten.add(forgotten);
    }

    fn gather(
        &mut self,
        jid: &str,
        kind: FireKind,
        context: &JobContext,
        minions: &[&str],
        reason: Option<Value>,
        json: &[u8],
    ) {
        let max = self.max_minions;
        let entry = self
            .gathered
            .entry((jid.to_owned(), kind))
            .or_insert_with(|| Gathered {
                context: context.clone(),
                minions: Vec::new(),
                reasons: BTreeMap::new(),
                records: Vec::new(),
                more: 0,
            });
        for minion in minions {
            if entry.minions.len() >= max {
                entry.more += 1;
            } else if !entry.minions.iter().any(|m| m == minion) {
                entry.minions.push((*minion).to_owned());
                if let Some(reason) = &reason {
                    entry.reasons.insert((*minion).to_owned(), reason.clone());
                }
            }
        }
        if entry.records.len() < max {
            if let Ok(record) = serde_json::from_slice(json) {
                entry.records.push(record);
            }
        }
    }

    /// Whether a job's verdict of `kind` may fire, remembering that it did.
    fn admit(&mut self, jid: &str, kind: FireKind, context: &JobContext) -> Option<String> {
        let named = context
            .metadata
            .as_ref()
            .and_then(|m| m.get(RETRY_OF))
            .and_then(Value::as_str);
        let original = match (named, context.run_kind) {
            (Some(original), _) => original.to_owned(),
            (None, RunKind::Reactor) => {
                self.firer.counts.unnamed_reactor_jobs.inc();
                return None;
            }
            (None, _) => jid.to_owned(),
        };
        let key = (original.clone(), kind);
        if self.fired.contains_key(&key) {
            self.firer.counts.loop_suppressed.inc();
            tracing::info!(
                jid,
                original,
                kind = kind.as_str(),
                "Not firing: this kind was already fired for the original job."
            );
            return None;
        }
        let forgotten = self.fired.insert(&key, ());
        self.firer.counts.fired_forgotten.add(forgotten);
        Some(original)
    }

    fn episode(&mut self, tag: String, json: &[u8]) {
        if let Ok(record) = serde_json::from_slice(json) {
            self.episodes.push((tag, record));
        }
    }

    /// A rollout's record fires when its status is not the one last fired.
    fn rollout(&mut self, repo: &str, commit: &str, status: RolloutStatus, json: &[u8]) {
        let key = (repo.to_owned(), commit.to_owned());
        if self.rollouts.get(&key) == Some(&status) {
            return;
        }
        if self.rollouts.len() >= MAX_ROLLOUTS && !self.rollouts.contains_key(&key) {
            self.rollouts.clear();
        }
        self.rollouts.insert(key, status);
        let tag = format!("saltsight/rollout/{repo}/{commit}/{}", status.as_str());
        self.episode(tag, json);
    }
}

/// What a `saltsight/job/<jid>/...` event carries.
#[derive(Serialize)]
struct JobEvent<'a> {
    jid: &'a str,
    /// The job the Reactor should name as the one it answers.
    retry_of: &'a str,
    fun: &'a str,
    arg: &'a [Value],
    kwarg: &'a serde_json::Map<String, Value>,
    run_kind: RunKind,
    test: bool,
    /// The minions concerned (for `failed`, every minion whose return failed).
    minions: &'a [String],
    /// Minions past `reactor.max_minions`, not listed.
    more: u32,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    reasons: &'a BTreeMap<String, Value>,
    /// The records behind it, as every output has them (redacted).
    records: &'a [Value],
    _stamp: String,
}

impl Output for VerdictOutput {
    fn name(&self) -> &str {
        "reactor"
    }

    fn queue(&mut self, record: &Record, json: &[u8]) -> Result<(), OutputError> {
        match &record.body {
            RecordBody::JobPublished(p)
                if self.fires(FireKind::Missing) || self.fires(FireKind::Failed) =>
            {
                self.note_published(&p.jid, &p.fun, p.arg.as_ref());
            }
            RecordBody::MinionReturn(r) | RecordBody::LateReturn(r)
                if !r.succeeded && self.fires(FireKind::Failed) =>
            {
                let max = self.max_minions;
                if let Some(note) = self.jobs.get_mut(&*r.jid) {
                    if note.failed.len() < max {
                        note.failed.push(r.minion.to_string());
                    } else {
                        note.failed_more += 1;
                    }
                }
            }
            RecordBody::MinionMissing(m) if self.fires(FireKind::Missing) => {
                let reason = serde_json::json!({
                    "reason": m.reason,
                    "evidence": m.evidence,
                    "streak": m.streak,
                });
                self.gather(
                    &m.jid,
                    FireKind::Missing,
                    &m.context,
                    &[&m.minion],
                    Some(reason),
                    json,
                );
            }
            // A late return's amended groups (revision > 0) are the same
            // verdict again: the first is what fires.
            RecordBody::FailureGroup(g) if self.fires(FireKind::Failed) && g.revision == 0 => {
                let minions: Vec<&str> = g.minions.iter().map(String::as_str).collect();
                self.gather(&g.jid, FireKind::Failed, &g.context, &minions, None, json);
            }
            RecordBody::ExternalIncident(i)
                if self.fires(FireKind::Incident)
                    && (i.revision == 0 || i.status == EpisodeStatus::Closed) =>
            {
                let tag = format!("saltsight/incident/{}/{}", i.incident, i.status.as_str());
                self.episode(tag, json);
            }
            RecordBody::MasterPressure(p)
                if self.fires(FireKind::Pressure)
                    && (p.revision == 0 || p.status == EpisodeStatus::Closed) =>
            {
                let tag = format!("saltsight/pressure/{}/{}", p.pressure, p.status.as_str());
                self.episode(tag, json);
            }
            RecordBody::Rollout(r) if self.fires(FireKind::Rollout) => {
                self.rollout(&r.repo, &r.commit, r.status, json);
            }
            // Its verdicts come with it, in this handled event: forgotten
            // once they are fired.
            RecordBody::JobCompleted(c) if self.jobs.contains_key(&c.jid) => {
                self.closed.push(c.jid.clone());
            }
            _ => {}
        }
        Ok(())
    }

    /// A job's verdicts of a kind fire once, whole: they are gathered until
    /// the read's end.
    fn flush_part(&mut self, _: &[u8]) -> Result<(), OutputError> {
        Ok(())
    }

    fn flush(&mut self, _: &[u8]) -> Result<(), OutputError> {
        let stamp = super::pull::salt_stamp(std::time::SystemTime::now());
        for ((jid, kind), gathered) in std::mem::take(&mut self.gathered) {
            let Some(original) = self.admit(&jid, kind, &gathered.context) else {
                continue;
            };
            let empty = JobNote::default();
            let note = self.jobs.get(&jid).unwrap_or(&empty);
            let (minions, more) = match kind {
                FireKind::Failed if !note.failed.is_empty() => (&note.failed, note.failed_more),
                _ => (&gathered.minions, gathered.more),
            };
            let event = JobEvent {
                jid: &jid,
                retry_of: &original,
                fun: &note.fun,
                arg: &note.arg,
                kwarg: &note.kwarg,
                run_kind: gathered.context.run_kind,
                test: gathered.context.test,
                minions,
                more,
                reasons: &gathered.reasons,
                records: &gathered.records,
                _stamp: stamp.clone(),
            };
            let tag = format!("saltsight/job/{jid}/{}", kind.as_str());
            if self.firer.fire(&tag, &event).is_ok() {
                tracing::info!(
                    jid,
                    tag,
                    minions = minions.len(),
                    "Fired a verdict for the Reactor."
                );
            }
        }
        for jid in std::mem::take(&mut self.closed) {
            self.jobs.remove(&jid);
        }
        for (tag, mut record) in std::mem::take(&mut self.episodes) {
            if let Value::Object(map) = &mut record {
                map.insert("_stamp".into(), Value::String(stamp.clone()));
            }
            if self.firer.fire(&tag, &record).is_ok() {
                tracing::info!(tag, "Fired a verdict for the Reactor.");
            }
        }
        Ok(())
    }

    /// The end of the run: what was fired is written before saltsight exits.
    fn seal(&mut self, _now: tokio::time::Instant, all: bool) -> Result<(), OutputError> {
        if all {
            self.firer.drain(super::DRAIN);
        }
        Ok(())
    }
}

/// Salt's published arguments (`[positional..., {"__kwarg__": true, k: v}]`)
/// as a Reactor SLS passes them: `arg` and `kwarg`.
fn split_args(arg: Option<&Value>) -> (Vec<Value>, serde_json::Map<String, Value>) {
    let mut positional = Vec::new();
    let mut kwarg = serde_json::Map::new();
    for value in arg.and_then(Value::as_array).into_iter().flatten() {
        match value {
            Value::Object(map) if map.get("__kwarg__") == Some(&Value::Bool(true)) => {
                kwarg.extend(
                    map.iter()
                        .filter(|(k, _)| k.as_str() != "__kwarg__")
                        .map(|(k, v)| (k.clone(), v.clone())),
                );
            }
            other => positional.push(other.clone()),
        }
    }
    (positional, kwarg)
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::net::{UnixListener, UnixStream};

    use super::*;
    use crate::bus::Endpoint;
    use crate::record::{
        JobPublished, MinionMissing, MinionReturn, MissingEvidence, MissingReason, RecordFactory,
    };
    use crate::time::Stamp;

    const S: i64 = 1_000_000;

    fn context(run_kind: RunKind, retry_of: Option<&str>) -> JobContext {
        JobContext {
            run_kind,
            metadata: retry_of.map(|jid| serde_json::json!({ RETRY_OF: jid })),
            ..JobContext::default()
        }
    }

    /// A job of `minions` published, `failed` returning failed, `missing` never
    /// returning: its records in the order the stages make them.
    fn job(
        f: &RecordFactory,
        jid: &str,
        context: &JobContext,
        failed: &[&str],
        missing: &[&str],
    ) -> Vec<Record> {
        let mut records = vec![f.make(
            Stamp(S),
            &[jid],
            RecordBody::JobPublished(Box::new(JobPublished {
                jid: jid.into(),
                fun: "state.apply".into(),
                arg: Some(serde_json::json!(["web", {"__kwarg__": true, "pillar": {"v": 2}}])),
                tgt: vec!["*".into()],
                tgt_type: Some("glob".into()),
                user: Some("root".into()),
                expected: vec![],
                expected_count: 0,
                not_connected: vec![],
                deadline: Stamp(60 * S),
                context: context.clone().into(),
                commits: BTreeMap::new(),
                batch: None,
            })),
        )];
        for minion in failed {
            records.push(f.make(
                Stamp(2 * S),
                &[jid, minion],
                RecordBody::MinionReturn(MinionReturn {
                    jid: jid.into(),
                    minion: (*minion).into(),
                    fun: Some("state.apply".into()),
                    retcode: Some(2),
                    salt_success: Some(false),
                    succeeded: false,
                    context: context.clone().into(),
                    schedule: None,
                    duration_ms: Some(1000),
                    states: None,
                    trimmed: None,
                    return_trace: None,
                }),
            ));
        }
        for minion in missing {
            records.push(f.make(
                Stamp(60 * S),
                &[jid, minion],
                RecordBody::MinionMissing(MinionMissing {
                    jid: jid.into(),
                    minion: (*minion).into(),
                    fun: "state.apply".into(),
                    reason: MissingReason::NoResponse,
                    evidence: MissingEvidence::Nothing,
                    disconnected_at: None,
                    address: None,
                    missing_since: None,
                    streak: 1,
                    published_at: Stamp(S),
                    deadline: Stamp(60 * S),
                    during_master_pressure: None,
                    context: context.clone().into(),
                }),
            ));
        }
        records
    }

    /// Each record queued, then one flush: one handled event. The outputs
    /// may write in parts within it (a read of many records): here after
    /// every record, the most often they can.
    fn handle(output: &mut VerdictOutput, records: &[Record]) {
        for record in records {
            let json = serde_json::to_vec(record).expect("json");
            output.queue(record, &json).expect("queue");
            output.flush_part(&[]).expect("a part");
        }
        output.flush(&[]).expect("flush");
    }

    /// The tags written to the pull socket, up to and including `last`.
    fn tags_until(stream: &mut UnixStream, last: &str) -> Vec<(String, Value)> {
        let mut seen = Vec::new();
        loop {
            let mut len = [0u8; 4];
            stream.read_exact(&mut len).expect("a length");
            let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
            stream.read_exact(&mut frame).expect("a frame");
            let event = crate::event::decode(&frame).expect("an event");
            let data = crate::event::json::to_json(event.data).expect("data");
            let tag = event.tag.to_owned();
            seen.push((tag.clone(), data));
            if tag == last {
                return seen;
            }
        }
    }

    #[test]
    fn each_kind_fires_once_per_original_job_and_never_for_an_unnamed_reactor_job() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("master_event_pull.ipc");
        let listener = UnixListener::bind(&path).expect("bind");
        let config = ReactorConfig {
            enabled: true,
            endpoint: Endpoint::Unix(path),
            ..ReactorConfig::default()
        };
        let counts = Arc::new(crate::reactor::ReactorCounts::default());
        let firer = Firer::start(&config, counts.clone()).expect("firer");
        let mut output = VerdictOutput::new(&config, firer.clone());
        let f = RecordFactory::new("m");

        // The original: web2 missing. Then the Reactor's retry of it, missing
        // again and failing on web3; then a retry of the retry, failing again.
        let adhoc = context(RunKind::Adhoc, None);
        handle(&mut output, &job(&f, "1", &adhoc, &[], &["web2", "web4"]));
        let retry = context(RunKind::Reactor, Some("1"));
        handle(&mut output, &job(&f, "2", &retry, &["web3"], &["web2"]));
        let group = |jid: &str| {
            let mut g: crate::record::FailureGroup = serde_json::from_value(serde_json::json!({
                "jid": jid, "fingerprint": "f", "sls": "web", "state_id": "pkg",
                "function": "pkg.installed", "category": "dependency.package", "rule": "apt",
                "comment": "no", "comment_len": 2, "normalised": "no", "count": 1,
                "minions": ["web3"], "first_seen_jid": jid,
                "first_seen_at": "2026-11-26T00:00:01Z", "run_kind": "reactor",
            }))
            .expect("a failure group");
            g.context = retry.clone().into();
            f.make(
                Stamp(60 * S),
                &[jid, "f"],
                RecordBody::FailureGroup(Box::new(g)),
            )
        };
        handle(&mut output, &[group("2")]);
        handle(&mut output, &job(&f, "3", &retry, &["web3"], &[]));
        handle(&mut output, &[group("3")]);
        // A Reactor job that names no original: nothing.
        let unnamed = context(RunKind::Reactor, None);
        handle(&mut output, &job(&f, "4", &unnamed, &[], &["web2"]));
        firer
            .fire("saltsight/test/end", &serde_json::json!({}))
            .expect("fire");

        let (mut stream, _) = listener.accept().expect("the firer connected");
        let seen = tags_until(&mut stream, "saltsight/test/end");
        let tags: Vec<&str> = seen.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            tags,
            [
                "saltsight/job/1/missing",
                "saltsight/job/2/failed",
                "saltsight/test/end"
            ]
        );
        let missing = &seen[0].1;
        assert_eq!(
            missing["minions"],
            serde_json::json!(["web2", "web4"]),
            "once, whole, though written in parts"
        );
        assert_eq!(missing["reasons"]["web2"]["reason"], "no_response");
        assert_eq!(missing["arg"], serde_json::json!(["web"]));
        assert_eq!(missing["kwarg"], serde_json::json!({"pillar": {"v": 2}}));
        assert_eq!(missing["retry_of"], "1");
        assert_eq!(missing["records"][0]["kind"], "minion_missing");
        let failed = &seen[1].1;
        assert_eq!(failed["retry_of"], "1", "the original, not the retry");
        assert_eq!(failed["minions"], serde_json::json!(["web3"]));
        assert_eq!(failed["records"][0]["kind"], "failure_group");
        assert_eq!(counts.loop_suppressed.get(), 2, "2's missing, 3's failed");
        assert_eq!(counts.unnamed_reactor_jobs.get(), 1);
        assert_eq!(counts.fired.get(), 3);
    }
}
