//! The typed walk over a record's texts: each impl names every field of its
//! struct, so a field (or a record kind) added later does not compile until it
//! is decided here whether it is scanned.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Fired, Inner, clean};
use crate::record::{
    BusGapRecord, Classification, CommandOutput, Commit, ConfigChange, Correlation, Drift,
    DriftedState, ExternalIncident, FailedStateFacts, FailureGroup, IntroducedBy, JobCompleted,
    JobContext, JobPublished, MasterPressure, MinionMissing, MinionReturn, NonIdempotent, Record,
    RecordBody, RenderFailure, Rollout, RolloutFailure, Shared, SignalFigure, StateFailure,
    SuspectCommits,
};

/// Walks every text a record carries. Each impl names every field, so a field
/// added to a record does not compile until it is decided here.
pub(super) trait Scrub {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired);
}

macro_rules! scrub_all {
    ($r:expr, $fired:expr; $($field:expr),+ $(,)?) => {
        $( Scrub::scrub($field, $r, $fired); )+
    };
}

impl Scrub for String {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        r.text(self, fired);
    }
}

/// A text held as something other than a `String`: replaced only when a
/// rule changes it.
fn scrub_replaced<T>(text: &mut T, r: &Inner, fired: &mut Fired)
where
    T: std::ops::Deref<Target = str> + From<String>,
{
    if let Some(settled) = r.settle(text, fired) {
        *text = settled.into();
    }
}

/// A short text held inline (a state's start time).
impl Scrub for compact_str::CompactString {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        scrub_replaced(self, r, fired);
    }
}

/// A text many records share (a job's jid, a return's minion): one found
/// clean is recalled by its address, not scanned again.
impl Scrub for std::sync::Arc<str> {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        if clean::known(r.id, self) {
            return;
        }
        match r.settle(self, fired) {
            Some(settled) => *self = settled.into(),
            None => clean::remember(r.id, self),
        }
    }
}

impl Scrub for Value {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        r.value(self, fired, 0);
    }
}

/// A part many records hold is scrubbed once: the first holder scrubs a copy,
/// later holders take what it became (and fire its rules again, so counts
/// are per record as for any text).
impl<T: Scrub + Clone + PartialEq + Send + Sync + 'static> Scrub for Shared<T> {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        if let Some(became) = r.recall_shared(self.arc(), fired) {
            *self = Shared::from_arc(became);
            return;
        }
        let mut part = (**self).clone();
        let mut own = Fired::tallied();
        part.scrub(r, &mut own);
        let tally = own.tally.unwrap_or_default();
        fired.bits |= own.bits;
        if let Some(outer) = &mut fired.tally {
            outer.extend_from_slice(&tally);
        }
        let became = if part == **self {
            self.clone()
        } else {
            Shared::new(part)
        };
        r.remember_shared(self.arc().clone(), became.arc().clone(), tally);
        *self = became;
    }
}

impl<T: Scrub> Scrub for Option<T> {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        if let Some(v) = self {
            v.scrub(r, fired);
        }
    }
}

impl<T: Scrub> Scrub for Box<T> {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        (**self).scrub(r, fired);
    }
}

impl<T: Scrub> Scrub for Vec<T> {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        for v in self {
            v.scrub(r, fired);
        }
    }
}

/// Repo name → commit id: the ids are scanned (repo names come from the config).
impl Scrub for BTreeMap<String, String> {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        for v in self.values_mut() {
            v.scrub(r, fired);
        }
    }
}

impl Scrub for Record {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let Record {
            kind: _,
            schema_version: _,
            id: _,
            master,
            at: _,
            body,
            redacted: _,
        } = self;
        scrub_all!(r, fired; master);
        match body {
            RecordBody::JobPublished(b) => b.scrub(r, fired),
            RecordBody::MinionReturn(b) | RecordBody::LateReturn(b) => b.scrub(r, fired),
            RecordBody::MinionMissing(b) => b.scrub(r, fired),
            RecordBody::JobCompleted(b) => b.scrub(r, fired),
            RecordBody::BusGap(BusGapRecord {
                reason: _,
                started_at: _,
                ended_at: _,
                duration_ms: _,
                dropped_frames: _,
            }) => {}
            RecordBody::StateFailure(b) => b.scrub(r, fired),
            RecordBody::RenderFailure(b) => b.scrub(r, fired),
            RecordBody::FailureGroup(b) => b.scrub(r, fired),
            RecordBody::ConfigChange(b) => b.scrub(r, fired),
            RecordBody::ExternalIncident(b) => b.scrub(r, fired),
            RecordBody::MasterPressure(b) => b.scrub(r, fired),
            RecordBody::Rollout(b) => b.scrub(r, fired),
            RecordBody::Drift(b) => b.scrub(r, fired),
            RecordBody::NonIdempotent(b) => b.scrub(r, fired),
        }
    }
}

impl Scrub for JobContext {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let JobContext {
            run_kind: _,
            orchestration_jid,
            metadata,
            test: _,
            // Hex ids Salt generated: nothing to redact.
            trace: _,
        } = self;
        scrub_all!(r, fired; orchestration_jid, metadata);
    }
}

impl Scrub for JobPublished {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let JobPublished {
            jid,
            fun,
            arg,
            tgt,
            tgt_type,
            user,
            expected,
            expected_count: _,
            not_connected,
            deadline: _,
            context,
            commits,
            batch,
        } = self;
        scrub_all!(r, fired; jid, fun, arg, tgt, tgt_type, user, expected, not_connected, context, commits, batch);
    }
}

impl Scrub for MinionReturn {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let MinionReturn {
            jid,
            minion,
            fun,
            retcode: _,
            salt_success: _,
            succeeded: _,
            context,
            schedule,
            duration_ms: _,
            states: _,
            trimmed: _,
            return_trace: _,
        } = self;
        scrub_all!(r, fired; jid, minion, fun, context, schedule);
    }
}

impl Scrub for MinionMissing {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let MinionMissing {
            jid,
            minion,
            fun,
            reason: _,
            evidence: _,
            disconnected_at: _,
            // An IP address the master saw; not a secret.
            address: _,
            streak: _,
            missing_since: _,
            published_at: _,
            deadline: _,
            during_master_pressure,
            context,
        } = self;
        scrub_all!(r, fired; jid, minion, fun, during_master_pressure, context);
    }
}

impl Scrub for JobCompleted {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let JobCompleted {
            jid,
            fun,
            tgt,
            expected: _,
            returned: _,
            succeeded: _,
            failed: _,
            missing: _,
            published_at: _,
            duration_ms: _,
            first_return_ms: _,
            revision: _,
            evicted: _,
            during_master_pressure,
            batch,
            context,
        } = self;
        scrub_all!(r, fired; jid, fun, tgt, during_master_pressure, batch, context);
    }
}

impl Scrub for crate::record::BatchInfo {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let crate::record::BatchInfo {
            size: _,
            sub_batches: _,
            unsent: _,
            sub_jids,
            ping_jid,
            ended: _,
            halted_reason,
        } = self;
        scrub_all!(r, fired; sub_jids, ping_jid, halted_reason);
    }
}

impl Scrub for Classification {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let Classification {
            category: _,
            rule: _,
            evidence,
            host,
            url,
            package,
        } = self;
        scrub_all!(r, fired; evidence, host, url, package);
    }
}

impl Scrub for CommandOutput {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let CommandOutput {
            retcode: _,
            stderr,
            stdout,
        } = self;
        scrub_all!(r, fired; stderr, stdout);
    }
}

impl Scrub for Commit {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let Commit {
            id,
            author,
            time,
            subject,
            // A number, a project path and the configured URL template's
            // expansion: nothing from a payload.
            pull_request: _,
        } = self;
        scrub_all!(r, fired; id, author, time, subject);
    }
}

impl Scrub for IntroducedBy {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let IntroducedBy {
            repo,
            path,
            commit,
            basis: _,
        } = self;
        scrub_all!(r, fired; repo, path, commit);
    }
}

impl Scrub for SuspectCommits {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let SuspectCommits {
            repo,
            last_ok,
            first_failed,
            commits,
            truncated: _,
        } = self;
        scrub_all!(r, fired; repo, last_ok, first_failed, commits);
    }
}

impl Scrub for Correlation {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let Correlation {
            commits,
            introduced_by,
            suspect_commits,
        } = self;
        scrub_all!(r, fired; commits, introduced_by, suspect_commits);
    }
}

impl Scrub for StateFailure {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let StateFailure {
            jid,
            minion,
            fun,
            state,
            run_num: _,
            duration_ms: _,
            start_time,
            cause,
            fallout: _,
            output,
            fingerprint: _,
            incident: _,
            first_failing: _,
            context,
            correlation,
        } = self;
        scrub_all!(r, fired; jid, minion, fun, state, start_time, cause, output, context, correlation);
    }
}

impl Scrub for FailedStateFacts {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let FailedStateFacts {
            sls,
            state_id,
            function,
            name,
            comment,
            comment_len: _,
        } = self;
        scrub_all!(r, fired; sls, state_id, function, name, comment);
    }
}

impl Scrub for RenderFailure {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let RenderFailure {
            jid,
            minion,
            fun,
            saltenv,
            sls,
            line: _,
            column: _,
            pillar: _,
            message,
            message_len: _,
            cause,
            fingerprint: _,
            context,
            correlation,
        } = self;
        scrub_all!(r, fired; jid, minion, fun, saltenv, sls, message, cause, context, correlation);
    }
}

impl Scrub for ExternalIncident {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let ExternalIncident {
            incident: _,
            target,
            category: _,
            status: _,
            revision: _,
            minions: _,
            jobs: _,
            failures: _,
            sample_minions,
            sample_jobs,
            states,
            first_seen: _,
            last_seen: _,
            opened_at: _,
            closed_at: _,
            end: _,
        } = self;
        scrub_all!(r, fired; target, sample_minions, sample_jobs, states);
    }
}

impl Scrub for MasterPressure {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let MasterPressure {
            pressure: _,
            status: _,
            revision: _,
            signals,
            peaks,
            opened_at: _,
            closed_at: _,
            missing_verdicts: _,
        } = self;
        for figure in signals.iter_mut().chain(peaks.iter_mut()) {
            let SignalFigure {
                signal: _,
                value: _,
                threshold: _,
                detail,
            } = figure;
            scrub_all!(r, fired; detail);
        }
    }
}

impl Scrub for Rollout {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let Rollout {
            repo,
            commit,
            subject,
            // As a commit's (`Commit`'s scrub): nothing from a payload.
            pull_request: _,
            committed_at: _,
            seen_at: _,
            seen_move: _,
            status: _,
            revision: _,
            known: _,
            applied: _,
            failed: _,
            pending: _,
            changed_sls,
            sample_failed,
            sample_pending,
            reached_50: _,
            reached_95: _,
            reached_100: _,
            delay_from_commit: _,
            delay_from_seen: _,
            superseded_by,
            last_progress: _,
        } = self;
        scrub_all!(r, fired; repo, commit, subject, changed_sls, sample_pending, superseded_by);
        for failure in sample_failed {
            let RolloutFailure {
                minion,
                jid,
                fingerprint,
            } = failure;
            scrub_all!(r, fired; minion, jid, fingerprint);
        }
    }
}

impl Scrub for FailureGroup {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let FailureGroup {
            jid,
            fingerprint: _,
            sls,
            pillar: _,
            state_id,
            function,
            cause,
            comment,
            comment_len: _,
            normalised,
            output,
            count: _,
            minions,
            first_seen_jid,
            first_seen_at: _,
            revision: _,
            incident: _,
            context,
            correlation,
        } = self;
        scrub_all!(r, fired; jid, sls, state_id, function, cause, comment, normalised, output, minions, first_seen_jid, context, correlation);
    }
}

impl Scrub for ConfigChange {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let ConfigChange {
            repo,
            path,
            old,
            new,
            commits,
            truncated: _,
        } = self;
        scrub_all!(r, fired; repo, path, old, new, commits);
    }
}

impl Scrub for DriftedState {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let DriftedState {
            sls,
            state_id,
            function,
            name,
            change: _,
            summary,
        } = self;
        scrub_all!(r, fired; sls, state_id, function, name, summary);
    }
}

impl Scrub for Drift {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let Drift {
            jid,
            minion,
            fun,
            change: _,
            repo: _,
            commit,
            states,
            states_not_listed: _,
            changed_not_read: _,
            intentional: _,
            unsettled: _,
            never_settles: _,
            trimmed: _,
            context,
        } = self;
        scrub_all!(r, fired; jid, minion, fun, commit, states, context);
    }
}

impl Scrub for NonIdempotent {
    fn scrub(&mut self, r: &Inner, fired: &mut Fired) {
        let NonIdempotent {
            sls,
            state_id,
            function,
            name,
            status: _,
            hint: _,
            jid,
            minion,
            changed_runs: _,
            minions: _,
            repo: _,
            commit,
            since: _,
        } = self;
        scrub_all!(r, fired; sls, state_id, function, name, jid, minion, commit);
    }
}
