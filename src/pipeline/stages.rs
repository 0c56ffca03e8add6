//! The stages records come from, in data-flow order, and what they hand each
//! other. Per event:
//!
//! 1. verdicts due before the event are given first (the tracker, on event time);
//! 2. triage reads a return (its findings take the job's context as the tracker
//!    holds it *before* the return);
//! 3. the tracker takes the event → its records, and the jobs it closed;
//!    a return it counted (not a duplicate) has its findings counted in their
//!    failure groups → the correlator's `state_failure` and `render_failure`
//!    records, placed before the tracker's;
//! 4. the correlator stamps each `job_published` with the HEADs of the moment
//!    (a `config_change` first, when one moved), and turns each closed job's
//!    failure groups into `failure_group` records, after its `job_completed`.
//!
//! A job the tracker does not follow (scheduled, a runner, published unseen) has
//! one return: its groups are complete at once.

use std::sync::Arc;

use crate::config::Config;
use crate::correlate::Correlator;
use crate::counter::Counts;
use crate::drift::DriftStage;
use crate::event::{Body, Event};
use crate::incident::{Failure, Incidents};
use crate::jobs::tracker::JobClosed;
use crate::jobs::{JobTracker, TrackerConfig};
use crate::master_processes::MasterSample;
use crate::pressure::Pressure;
use crate::record::{JobContext, Record, RecordBody, RecordFactory, RunKind, Shared};
use crate::time::Stamp;
use crate::triage::{Findings, Triage};

#[cfg(test)]
mod correlation_tests;
#[cfg(test)]
mod incident_tests;
#[cfg(test)]
mod return_tests;
mod saved;
mod state_runs;

pub use saved::{SavedStages, SavingStages, StagesSnapshot};

/// What triage found in a return, for the stages after the tracker.
struct Triaged {
    jid: Arc<str>,
    /// Its job's context, as the tracker held it before the return.
    context: Shared<JobContext>,
    /// The fingerprint of its first root cause.
    root_cause: Option<Arc<str>>,
}

/// Triage, the job tracker, the correlator and external incidents, wired in
/// order.
pub struct Stages {
    tracker: JobTracker,
    triage: Triage,
    correlator: Correlator,
    incidents: Incidents,
    pressure: Pressure,
    drift: DriftStage,
    /// The correlator wants every state's outcome (it watches a state tree).
    correlator_wants_outcomes: bool,
    /// The pressure stage's change count the tracker's windows are of.
    pressure_seen: u64,
    /// The last state run's arguments, read (a job's minions return the same).
    run_args: Option<state_runs::RunArgs>,
    /// The incident of each root cause of the return being triaged, kept
    /// from return to return (emptied after each).
    incidents_found: Vec<Option<String>>,
    /// The tracker's records of the event being handled, put after what
    /// triage found in it (its room kept from event to event, up to
    /// [`KEPT_TRACKED`] records; empty between).
    tracked: Vec<Record>,
    /// A job closed since the rollouts last went out.
    closed_since_flush: bool,
}

/// The tracker's records of one event whose room [`Stages`] keeps for the
/// next, at most: a return's few. A job published with thousands of
/// minions not connected has its room freed after it.
const KEPT_TRACKED: usize = 16;

impl Stages {
    pub fn from_config(config: &Config) -> Self {
        let records = RecordFactory::new(config.master_id.clone());
        let correlator = Correlator::new(&config.correlate, records.clone())
            .with_rollouts(&config.rollouts, config.jobs.max_minions);
        let mut triage = config.triage.clone();
        let correlator_wants_outcomes = correlator.watches_states();
        triage.want_outcomes = correlator_wants_outcomes;
        Self {
            tracker: JobTracker::new(TrackerConfig::from(&config.jobs), records.clone()),
            triage: Triage::new(triage),
            correlator,
            incidents: Incidents::new(config.incidents.clone(), records.clone()),
            pressure: Pressure::new(config.pressure.clone(), records.clone()),
            drift: DriftStage::new(config.drift.clone(), records),
            correlator_wants_outcomes,
            pressure_seen: 0,
            run_args: None,
            incidents_found: Vec::new(),
            tracked: Vec::new(),
            closed_since_flush: false,
        }
    }

    /// Each stage's own counts, for the scrape.
    pub fn counts(&self) -> Vec<Arc<dyn Counts>> {
        vec![
            self.tracker.stats.clone(),
            self.triage.stats.clone(),
            self.correlator.stats.clone(),
            self.incidents.stats.clone(),
            self.pressure.stats.clone(),
            self.drift.stats.clone(),
        ]
    }

    pub fn tracker(&self) -> &JobTracker {
        &self.tracker
    }

    /// When the next verdict (or incident revision, or close) is due, on the
    /// master's clock.
    pub fn next_deadline(&self) -> Option<Stamp> {
        let incident = self.incidents.next_due();
        let rollout = self.correlator.next_rollout_due();
        self.tracker
            .next_deadline()
            .into_iter()
            .chain(incident)
            .chain(rollout)
            .min()
    }

    /// One event, at event time `now`: its records, in order, onto `out` (a
    /// caller's vector, kept from event to event).
    pub fn on_event(&mut self, event: &Event<'_>, now: Stamp, out: &mut Vec<Record>) {
        // A sub-batch Salt gave a jid of its own (before 3008.2) is its
        // batch's job: every stage takes its events as the batch's.
        let renamed;
        let event = match event.job_jid().and_then(|jid| self.tracker.batch_of(jid)) {
            Some(batch) => {
                renamed = event.of_job(&batch.clone());
                &renamed
            }
            None => event,
        };
        // Verdicts due before this event first, on event time, live as in replay.
        self.advance_onto(now, out);
        let at = event.stamp.unwrap_or(now);
        self.pressure.on_event(event, at);
        let found = self.find(event);
        self.sync_pressure();
        // The job of the return being handled: its drift is decided after the
        // return is (the tracker may close it on this very return).
        let drift_after_return = match &event.body {
            Body::JobReturn(r) if self.drift.enabled() => Some(r.jid.as_str()),
            _ => None,
        };
        // A job it publishes is made whole with its commits, asked of the
        // correlator then (a HEAD that moved is a config_change first).
        let correlator = &mut self.correlator;
        let mut changes = Vec::new();
        let mut tracked = std::mem::take(&mut self.tracked);
        self.tracker.on_event_with(
            event,
            now,
            &mut |jid, at| correlator.commits_for_new_job(jid, at, &mut changes),
            &mut tracked,
        );
        // What triage found goes before the return's records, given only when
        // the tracker counted the return: a duplicate is counted once.
        let counted = match &event.body {
            Body::JobReturn(_) => self.tracker.last_return().is_some(),
            _ => true,
        };
        let triaged = match found {
            Some((findings, context)) if counted => Some(self.give(findings, context, at, out)),
            Some((findings, _)) => {
                self.triage.recycle(findings);
                None
            }
            None => None,
        };
        // The commits go before the job they made whole (rare: a new job).
        let start = out.len();
        out.append(&mut changes);
        out.append(&mut tracked);
        if tracked.capacity() <= KEPT_TRACKED {
            self.tracked = tracked;
        }
        // A job published (and any rollout its HEADs opened): the fleet it
        // expects is made room for.
        if let Body::JobNew(p) = &event.body {
            let minions = p.minions.as_ref().map_or(0, crate::event::TextList::len);
            self.correlator.expect_minions(minions);
            if self.correlator_wants_outcomes {
                self.drift.expect_minions(minions);
            }
        }
        self.after_tracker(start, drift_after_return, out);
        if let Body::JobReturn(r) = &event.body {
            self.follow_state_run(r, triaged.as_ref(), at, out);
            // A job the tracker does not hold open (scheduled, closed by this
            // return, or a late return): its drift is decided now.
            if let Some(jid) = drift_after_return {
                if !self.tracker.is_open(jid) {
                    self.drift.close_job(jid, out);
                }
            }
        }
        self.flush_rollouts(at, out);
        if let Some(Triaged { jid, context, .. }) = triaged {
            if self.tracker.context(&jid).is_none() {
                let groups = self.triage.close_job(&jid);
                let incidents = &self.incidents;
                let records = self.correlator.on_groups(
                    groups,
                    &context,
                    0,
                    &|cause| incidents.incident_of(cause),
                    at,
                );
                out.extend(records);
            }
        }
    }

    /// Whether the master is under pressure now (an episode is open).
    pub fn under_pressure(&self) -> bool {
        self.pressure.is_open()
    }

    /// What the master's connections say (live only).
    pub fn on_connections(&mut self, view: &crate::master_connections::ConnectionView, at: Stamp) {
        self.tracker.on_connections(view, at);
    }

    /// One event's bus lag (seconds), live.
    pub fn on_lag(&mut self, lag: f64, at: Stamp) {
        self.pressure.on_lag(lag, at);
    }

    /// A sample of the master's processes (or `None`), and the master's
    /// pressure judged at `at`.
    pub fn on_master_sample(&mut self, sample: Option<&MasterSample>, at: Stamp) -> Vec<Record> {
        let mut out = Vec::new();
        self.pressure.on_sample(sample, at, &mut out);
        out
    }

    /// A return read but not readable: its minion is not waited for, and its
    /// verdict is `unknown_gap`.
    pub fn on_unreadable_return(&mut self, jid: &str, minion: &str, at: Stamp) -> Vec<Record> {
        let mut out = Vec::new();
        let batch = self.tracker.batch_of(jid).cloned();
        let jid = batch.as_deref().unwrap_or(jid);
        self.synced_tracker()
            .on_unreadable_return(jid, minion, at, &mut out);
        self.after_tracker(0, None, &mut out);
        out
    }

    /// The next batch of a large job's verdicts, when one is part way: the
    /// driver calls this until `None` before the next event, so no call holds
    /// more than a batch of records.
    pub fn more(&mut self) -> Option<Vec<Record>> {
        let owed = self.tracker.has_more();
        owed.then(|| self.tracker_step(JobTracker::more))
    }

    /// Whether a big job's names are part way taken: the driver calls
    /// [`Stages::take_names`] between events (a return or the job's
    /// `publish` meanwhile waits for none; what reads open jobs' minions
    /// takes the rest first).
    pub fn taking(&self) -> bool {
        self.tracker.taking()
    }

    /// The next slice of a big job's names (see [`Stages::taking`]), then
    /// [`Stages::more`] until `None`, as after an event.
    pub fn take_names(&mut self) -> Option<Vec<Record>> {
        let taking = self.tracker.taking();
        taking.then(|| self.tracker_step(JobTracker::take_more_names))
    }

    /// One step of the tracker's own (no event), its records through the
    /// stages after it.
    fn tracker_step(&mut self, step: fn(&mut JobTracker, &mut Vec<Record>)) -> Vec<Record> {
        let mut out = Vec::new();
        step(self.synced_tracker(), &mut out);
        self.after_tracker(0, None, &mut out);
        out
    }

    /// Events may be being missed from now on.
    pub fn gap_started(&mut self) {
        self.tracker.on_gap_start();
    }

    /// A stretch in which events may have been missed.
    pub fn on_gap(
        &mut self,
        start: Stamp,
        end: Stamp,
        reason: &'static str,
        dropped: u64,
    ) -> Vec<Record> {
        let mut out = Vec::new();
        self.tracker.on_gap(start, end, reason, dropped, &mut out);
        self.after_tracker(0, None, &mut out);
        out
    }

    /// Verdicts (and incident revisions and closes) due at or before `now`.
    pub fn advance(&mut self, now: Stamp) -> Vec<Record> {
        let mut out = Vec::new();
        self.advance_onto(now, &mut out);
        out
    }

    /// [`Stages::advance`], its records onto `out`.
    fn advance_onto(&mut self, now: Stamp, out: &mut Vec<Record>) {
        let start = out.len();
        self.synced_tracker().advance(now, out);
        self.after_tracker(start, None, out);
        self.flush_rollouts(now, out);
        let tracker = &self.tracker;
        self.triage
            .forget_idle(now, tracker.late_window(), |jid| tracker.is_open(jid));
        self.incidents.advance(now, out);
        self.correlator.advance_rollouts(now, out);
    }

    /// The end of a recording: every open job reaches its deadline.
    pub fn finish(&mut self) -> Vec<Record> {
        let mut out = Vec::new();
        self.synced_tracker().finish(&mut out);
        self.after_tracker(0, None, &mut out);
        out
    }

    /// Triage of a return, before the tracker takes it: what it found, and
    /// the context of its job as the tracker holds it then.
    fn find(&mut self, event: &Event<'_>) -> Option<(Findings, Shared<JobContext>)> {
        self.triage
            .want_outcomes(self.correlator_wants_outcomes || self.incidents.any_open());
        match &event.body {
            Body::JobReturn(r) => {
                // One lookup of an open job: the texts triage shares, and
                // the context its records carry.
                let open = self.tracker.open_job(r.jid.as_str());
                let shared = open.map(|(jid, fun, _)| (jid, fun));
                let findings = self.triage.on_job_return(r, shared)?;
                let context = match open {
                    Some((_, _, context)) => context.clone(),
                    None => self.tracker.context_of(r),
                };
                Some((findings, context))
            }
            Body::RunReturn(r) => {
                let findings = self.triage.on_runner_return(r)?;
                let context = Shared::new(JobContext {
                    run_kind: RunKind::Runner,
                    ..JobContext::default()
                });
                Some((findings, context))
            }
            _ => None,
        }
    }

    /// A return's findings, counted: its failure groups, incidents and the
    /// correlator's records onto `out`; the job and its context.
    fn give(
        &mut self,
        findings: Findings,
        context: Shared<JobContext>,
        at: Stamp,
        out: &mut Vec<Record>,
    ) -> Triaged {
        self.triage.add_to_groups(&findings, at);
        self.incidents.on_outcomes(&findings.outcomes, at, out);
        let mut incidents = std::mem::take(&mut self.incidents_found);
        self.incidents_of(&findings, at, &mut incidents, out);
        self.correlator
            .on_findings(&findings, &context, &incidents, at, out);
        incidents.clear();
        self.incidents_found = incidents;
        let root_cause = findings
            .state_failures
            .first()
            .map(|f| f.fingerprint.clone())
            .or_else(|| {
                findings
                    .render_failures
                    .first()
                    .map(|f| f.fingerprint.as_str().into())
            });
        let jid = Arc::clone(&findings.jid);
        self.triage.recycle(findings);
        Triaged {
            jid,
            context,
            root_cause,
        }
    }

    /// Each root cause with an external target to the incident stage: the
    /// open incident of each (in the findings' order) onto `incidents`, handed
    /// to the correlator before it makes the `state_failure` records.
    fn incidents_of(
        &mut self,
        findings: &Findings,
        at: Stamp,
        incidents: &mut Vec<Option<String>>,
        out: &mut Vec<Record>,
    ) {
        incidents.extend(findings.state_failures.iter().map(|finding| {
            let failure = Failure {
                jid: &findings.jid,
                minion: &findings.minion,
                sls: &finding.state.sls,
                state_id: &finding.state.state_id,
                state_hash: Some(finding.state.key_hash),
                cause: &finding.classification,
            };
            self.incidents.on_failure(&failure, at, out)
        }));
    }

    /// After the tracker's records (`out` from `start`): the failure groups of
    /// every job it closed, and the drift of each but `drift_after_return`'s
    /// (decided after its return is followed).
    fn after_tracker(
        &mut self,
        start: usize,
        drift_after_return: Option<&str>,
        out: &mut Vec<Record>,
    ) {
        self.count_pressure(&out[start..]);
        for JobClosed {
            jid,
            revision,
            context,
            at,
        } in self.tracker.drain_closed()
        {
            let groups = self.triage.close_job(&jid);
            let incidents = &self.incidents;
            let records = self.correlator.on_groups(
                groups,
                &context,
                revision,
                &|cause| incidents.incident_of(cause),
                at,
            );
            out.extend(records);
            if drift_after_return != Some(jid.as_str()) {
                self.drift.close_job(&jid, out);
            }
            self.closed_since_flush = true;
        }
    }

    /// The rollouts a closed job's runs changed go out at its close.
    fn flush_rollouts(&mut self, at: Stamp, out: &mut Vec<Record>) {
        if std::mem::take(&mut self.closed_since_flush) {
            self.correlator.flush_rollouts(at, out);
        }
    }

    /// The tracker, holding the pressure stage's episodes as they are now
    /// (handed over only when one opened or closed), so that the records it
    /// makes carry the episode they overlapped.
    fn synced_tracker(&mut self) -> &mut JobTracker {
        self.sync_pressure();
        &mut self.tracker
    }

    fn sync_pressure(&mut self) {
        if self.pressure.changes() != self.pressure_seen {
            self.pressure_seen = self.pressure.changes();
            self.tracker.set_pressure(self.pressure.windows());
        }
    }

    /// A verdict given while an episode lasts is counted on the open one.
    fn count_pressure(&mut self, records: &[Record]) {
        for record in records {
            if let RecordBody::MinionMissing(m) = &record.body {
                if m.during_master_pressure.is_some() {
                    self.pressure.note_missing();
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::event::{decode, encode_frame};
    use crate::record::RecordKind;
    use serde_json::json;

    pub(super) fn frame(tag: &str, data: serde_json::Value) -> Vec<u8> {
        encode_frame(tag, &rmp_serde::to_vec_named(&data).unwrap(), false)
    }

    /// The defaults, with no master config or git checkout to read.
    pub(in crate::pipeline) fn config() -> Config {
        config_with("")
    }

    /// [`config`] with `correlate` lines added (e.g. a checkout to watch).
    fn config_with(correlate: &str) -> Config {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("saltsight.toml");
        std::fs::write(
            &path,
            format!(
                "[bus]\nendpoint = \"unix:/unused\"\n[correlate]\ndiscover = false\n{correlate}"
            ),
        )
        .expect("write config");
        crate::config::load(&crate::config::Overrides {
            config: Some(path),
            ..Default::default()
        })
        .expect("config loads")
    }

    /// A git checkout with `web.sls` at its first commit, and [`config`]
    /// watching it as the state tree.
    pub(super) fn a_watched_tree() -> (tempfile::TempDir, Config) {
        use crate::correlate::git::tests::{commit, git};
        let repo = tempfile::tempdir().expect("tempdir");
        git(repo.path(), &["init", "-q", "-b", "main"]);
        commit(repo.path(), "web.sls", "a: 1\n", "web: first");
        let config = config_with(&format!(
            "state_repos = {{ states = {:?} }}\n",
            repo.path().display().to_string()
        ));
        (repo, config)
    }

    /// A HEAD that moved before a job was published is a `config_change` (and
    /// the rollouts it starts), made while the tracker takes the job: they come
    /// before the job's `job_published`, as the commit came before the job.
    #[test]
    fn a_head_that_moved_is_a_config_change_before_the_job_it_runs() {
        use crate::correlate::git::tests::commit;
        let (repo, config) = a_watched_tree();
        let mut stages = Stages::from_config(&config);
        let published = |jid: &str, s: u32| {
            frame(
                &format!("salt/job/{jid}/new"),
                json!({"jid": jid, "fun": "test.ping", "arg": [], "tgt": "web1",
                    "tgt_type": "glob", "minions": ["web1"], "missing": [], "user": "root",
                    "_stamp": format!("2026-11-27T10:00:{s:02}.000000+00:00")}),
            )
        };
        let kinds = |stages: &mut Stages, f: Vec<u8>| {
            let event = decode(&f).expect("decode");
            let mut records = Vec::new();
            stages.on_event(&event, event.stamp.expect("stamped"), &mut records);
            records.into_iter().map(|r| r.kind).collect::<Vec<_>>()
        };
        kinds(&mut stages, published("20261127100000000001", 0));
        commit(repo.path(), "web.sls", "a: 2\n", "web: second");
        // The commit's records (its change, the rollouts it starts), then the job.
        let second = kinds(&mut stages, published("20261127100000000002", 1));
        assert_eq!(
            second.first(),
            Some(&RecordKind::ConfigChange),
            "{second:?}"
        );
        assert_eq!(second.last(), Some(&RecordKind::JobPublished), "{second:?}");
    }

    /// A failing state run on the last expected minion: triage's findings come
    /// before the tracker's return and completion, and the job's failure group
    /// after its `job_completed`.
    #[test]
    fn triage_then_the_tracker_then_the_correlator() {
        let mut stages = Stages::from_config(&config());
        let jid = "20261124100000000000";
        let stamp = |s: u32| format!("2026-11-24T10:00:{s:02}.000000+00:00");
        let mut kinds = Vec::new();
        let new = frame(
            &format!("salt/job/{jid}/new"),
            json!({"jid": jid, "fun": "state.apply", "arg": ["web"], "tgt": "web1",
                "tgt_type": "glob", "minions": ["web1"], "missing": [], "user": "root",
                "_stamp": stamp(0)}),
        );
        let ret = frame(
            &format!("salt/job/{jid}/ret/web1"),
            json!({"jid": jid, "id": "web1", "fun": "state.apply", "fun_args": ["web"],
                "retcode": 2, "success": false, "_stamp": stamp(3),
                "return": {"cmd_|-broken_|-false_|-run": {"result": false,
                    "comment": "Command \"false\" run", "__sls__": "web", "__id__": "broken",
                    "__run_num__": 0, "changes": {"retcode": 1, "stderr": "", "stdout": ""},
                    "name": "false"}}}),
        );
        for f in [new, ret] {
            let event = decode(&f).expect("decode");
            let now = event.stamp.expect("stamped");
            let mut records = Vec::new();
            stages.on_event(&event, now, &mut records);
            // The return's records share one allocation of its minion's name.
            let names: Vec<&Arc<str>> = records
                .iter()
                .filter_map(|r| match &r.body {
                    RecordBody::MinionReturn(m) => Some(&m.minion),
                    RecordBody::StateFailure(f) => Some(&f.minion),
                    _ => None,
                })
                .collect();
            assert!(
                names.windows(2).all(|w| Arc::ptr_eq(w[0], w[1])),
                "{names:?}"
            );
            kinds.extend(records.into_iter().map(|r| r.kind));
        }
        assert_eq!(
            kinds,
            [
                RecordKind::JobPublished,
                RecordKind::StateFailure,
                RecordKind::MinionReturn,
                RecordKind::JobCompleted,
                RecordKind::FailureGroup,
            ]
        );
    }
}
