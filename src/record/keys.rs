//! A record's query columns, defined once: what the history indexes and what
//! the ClickHouse encoding puts in columns beside the whole record. Both read
//! [`Record::keys`], so the two stores cannot disagree on which jid, minion,
//! function, fingerprint or commit a record is about.

use super::{Classification, Correlation, JobContext, Record, RecordBody};

/// The columns one record fills (empty text and 0 where a kind has none).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Keys<'a> {
    pub jid: &'a str,
    pub minion: &'a str,
    pub fun: &'a str,
    /// The job's run kind (`adhoc`, `scheduled`, ...), for job records.
    pub run_kind: &'a str,
    /// A verdict or status: `succeeded`/`failed`, a missing reason, a gap's
    /// reason, an episode's status, a config change's repo.
    pub reason: &'a str,
    pub sls: &'a str,
    pub state_id: &'a str,
    pub state_function: &'a str,
    pub category: &'a str,
    /// A failure's fingerprint, or an episode's id (the key its revisions
    /// share).
    pub fingerprint: &'a str,
    /// A count of the kind's own: failed states, failed minions, minions.
    pub count: u32,
    pub revision: u32,
    /// The commit a record is about: the one that introduced a failure, the
    /// one a job ran under (its first state tree's), a rollout's, a change's
    /// new HEAD.
    pub commit: &'a str,
    pub commit_subject: &'a str,
    /// The suspect range of a failure with no `introduced_by` yet.
    pub suspect_last_ok: &'a str,
    pub suspect_first_failed: &'a str,
    /// What an external cause names: its host, else its URL, else its package.
    pub target: &'a str,
    /// The job's context, for job records.
    pub context: Option<&'a JobContext>,
}

impl<'a> Keys<'a> {
    fn job(jid: &'a str, fun: &'a str, context: &'a JobContext) -> Self {
        Self {
            jid,
            fun,
            run_kind: context.run_kind.as_str(),
            context: Some(context),
            ..Self::default()
        }
    }

    fn correlated(mut self, correlation: &'a Correlation) -> Self {
        if let Some(introduced) = &correlation.introduced_by {
            self.commit = &introduced.commit.id;
            self.commit_subject = &introduced.commit.subject;
        }
        if let Some(suspects) = &correlation.suspect_commits {
            self.suspect_last_ok = &suspects.last_ok;
            self.suspect_first_failed = &suspects.first_failed;
        }
        self
    }

    fn caused(mut self, cause: &'a Classification) -> Self {
        self.category = cause.category.as_str();
        self.target = [&cause.host, &cause.url, &cause.package]
            .into_iter()
            .find_map(|t| t.as_deref())
            .unwrap_or("");
        self
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Record {
    /// This record's query columns.
    pub fn keys(&self) -> Keys<'_> {
        match &self.body {
            RecordBody::JobPublished(p) => Keys {
                count: count(p.expected.len()),
                commit: p.commits.values().next().map_or("", String::as_str),
                ..Keys::job(&p.jid, &p.fun, &p.context)
            },
            RecordBody::MinionReturn(r) | RecordBody::LateReturn(r) => Keys {
                minion: &r.minion,
                reason: if r.succeeded { "succeeded" } else { "failed" },
                count: r.states.as_ref().map_or(0, |s| s.failed),
                ..Keys::job(&r.jid, r.fun.as_deref().unwrap_or(""), &r.context)
            },
            RecordBody::MinionMissing(m) => Keys {
                minion: &m.minion,
                reason: m.reason.as_str(),
                ..Keys::job(&m.jid, &m.fun, &m.context)
            },
            RecordBody::JobCompleted(c) => Keys {
                count: c.failed,
                revision: c.revision,
                ..Keys::job(&c.jid, &c.fun, &c.context)
            },
            RecordBody::BusGap(g) => Keys {
                reason: g.reason,
                ..Keys::default()
            },
            RecordBody::StateFailure(f) => Keys {
                minion: &f.minion,
                sls: &f.state.sls,
                state_id: &f.state.state_id,
                state_function: &f.state.function,
                fingerprint: &f.fingerprint,
                count: f.fallout,
                ..Keys::job(&f.jid, &f.fun, &f.context)
            }
            .caused(&f.cause)
            .correlated(&f.correlation),
            RecordBody::RenderFailure(f) => Keys {
                minion: &f.minion,
                sls: f.sls.as_deref().unwrap_or(""),
                fingerprint: &f.fingerprint,
                ..Keys::job(&f.jid, &f.fun, &f.context)
            }
            .caused(&f.cause)
            .correlated(&f.correlation),
            RecordBody::FailureGroup(g) => Keys {
                sls: g.sls.as_deref().unwrap_or(""),
                state_id: g.state_id.as_deref().unwrap_or(""),
                state_function: g.function.as_deref().unwrap_or(""),
                fingerprint: &g.fingerprint,
                count: g.count,
                revision: g.revision,
                ..Keys::job(&g.jid, "", &g.context)
            }
            .caused(&g.cause)
            .correlated(&g.correlation),
            RecordBody::ConfigChange(c) => Keys {
                reason: &c.repo,
                commit: c.new.as_deref().unwrap_or(""),
                count: count(c.commits.len()),
                ..Keys::default()
            },
            // An episode's id goes in `fingerprint`: the key its revisions share.
            RecordBody::ExternalIncident(i) => Keys {
                reason: i.status.as_str(),
                category: i.category.as_str(),
                target: &i.target,
                fingerprint: &i.incident,
                count: i.minions,
                revision: i.revision,
                ..Keys::default()
            },
            RecordBody::Rollout(r) => Keys {
                reason: r.status.as_str(),
                commit: &r.commit,
                commit_subject: &r.subject,
                count: r.applied,
                revision: r.revision,
                ..Keys::default()
            },
            RecordBody::Drift(d) => Keys {
                jid: &d.jid,
                minion: &d.minion,
                fun: &d.fun,
                run_kind: d.context.run_kind.as_str(),
                context: Some(&d.context),
                reason: d.change.as_str(),
                commit: &d.commit,
                count: count(d.states.len()) + d.states_not_listed,
                ..Keys::default()
            },
            // The state goes in `fingerprint`, `sls:id`: the key its judgements share.
            RecordBody::NonIdempotent(n) => Keys {
                jid: &n.jid,
                minion: &n.minion,
                reason: n.status.as_str(),
                sls: &n.sls,
                state_id: &n.state_id,
                state_function: &n.function,
                commit: &n.commit,
                count: n.minions,
                ..Keys::default()
            },
            RecordBody::MasterPressure(p) => Keys {
                reason: p.status.as_str(),
                fingerprint: &p.pressure,
                count: p.missing_verdicts,
                revision: p.revision,
                ..Keys::default()
            },
        }
    }
}
