//! Runner jobs (`salt/run/<jid>/new` and `/ret`, e.g. an orchestration): one
//! return on the master, no minions to wait for, so no deadline: published, then
//! completed with the runner's own success.

use std::collections::BTreeMap;

use super::{JobClosed, JobTracker, millis_between};
use crate::event::Text;
use crate::record::{JobCompleted, JobContext, JobPublished, Record, RecordBody, RunKind, Shared};
use crate::time::Stamp;

impl JobTracker {
    pub(super) fn on_runner_new(
        &mut self,
        jid: &str,
        fun: Option<&Text<'_>>,
        at: Stamp,
        commits: &mut dyn FnMut(&str, Stamp) -> super::Commits,
        out: &mut Vec<Record>,
    ) {
        let fun = fun.map_or("", Text::as_str);
        if self.runners.len() >= self.config.max_jobs {
            // A runner whose return never came: forget the oldest (a rare O(n)).
            let oldest = self
                .runners
                .iter()
                .min_by_key(|(_, (_, started))| *started)
                .map(|(j, _)| j.clone());
            if let Some(oldest) = oldest {
                self.runners.remove(&oldest);
                self.stats.evicted_jobs.inc();
            }
        }
        self.runners.insert(jid.into(), (fun.into(), at));
        out.push(self.records.make(
            at,
            &[jid],
            RecordBody::JobPublished(Box::new(JobPublished {
                jid: jid.to_owned(),
                fun: fun.to_owned(),
                arg: None,
                tgt: Vec::new(),
                tgt_type: None,
                user: None,
                expected: Vec::new(),
                expected_count: 0,
                not_connected: Vec::new(),
                deadline: at,
                context: Shared::new(JobContext {
                    run_kind: RunKind::Runner,
                    ..JobContext::default()
                }),
                commits: commits(jid, at),
                batch: None,
            })),
        ));
    }

    pub(super) fn on_runner_return(
        &mut self,
        jid: &str,
        fun: Option<&Text<'_>>,
        success: Option<bool>,
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        let (fun, published_at) = match self.runners.remove(jid) {
            Some((fun, published_at)) => (fun.into_string(), published_at),
            None => (fun.map_or("", Text::as_str).to_owned(), at),
        };
        let ok = success != Some(false);
        let duration_ms = millis_between(published_at, at);
        let context = Shared::new(JobContext {
            run_kind: RunKind::Runner,
            ..JobContext::default()
        });
        self.closed_now.push(JobClosed {
            jid: jid.to_owned(),
            revision: 0,
            context: context.clone(),
            at,
        });
        out.push(self.records.make(
            at,
            &[jid, "0"],
            RecordBody::JobCompleted(JobCompleted {
                jid: jid.to_owned(),
                fun,
                tgt: Vec::new(),
                expected: 0,
                returned: 1,
                succeeded: u32::from(ok),
                failed: u32::from(!ok),
                missing: BTreeMap::new(),
                published_at,
                duration_ms,
                first_return_ms: Some(duration_ms),
                revision: 0,
                evicted: false,
                during_master_pressure: None,
                context,
                batch: None,
            }),
        ));
    }
}
