//! Returns to jobs no `new` announced. A minion's scheduler (a `schedule` name)
//! and `salt-call` (a jid the master gave it on receipt) run jobs the master
//! never published: each is a job of its own, published and completed by its one
//! return, and counted as what it is. Any other such return belongs to a job
//! saltsight did not see published (it started before saltsight, or in a gap):
//! that is what `saltsight_unknown_job_returns_total` counts.

use std::collections::BTreeMap;

use super::{JobClosed, JobTracker};
use crate::record::{JobCompleted, MinionReturn, Record, RecordBody, RunKind};
use crate::time::Stamp;

impl JobTracker {
    pub(super) fn on_unpublished_return(
        &mut self,
        record: MinionReturn,
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        let run_kind = record.context.run_kind;
        match run_kind {
            RunKind::Scheduled => self.stats.scheduled_returns.inc(),
            RunKind::Call => self.stats.salt_call_returns.inc(),
            _ => {
                self.stats.unknown_job_returns.inc();
                let (jid, minion) = (record.jid.clone(), record.minion.clone());
                out.push(
                    self.records
                        .make(at, &[&jid, &minion], RecordBody::MinionReturn(record)),
                );
                return;
            }
        }
        let jid = record.jid.clone();
        let minion = record.minion.clone();
        let completed = JobCompleted {
            jid: jid.to_string(),
            fun: record.fun.as_deref().unwrap_or_default().to_owned(),
            tgt: vec![record.minion.to_string()],
            expected: 1,
            returned: 1,
            succeeded: u32::from(record.succeeded),
            failed: u32::from(!record.succeeded),
            missing: BTreeMap::new(),
            published_at: at,
            duration_ms: 0,
            first_return_ms: Some(0),
            revision: 0,
            evicted: false,
            during_master_pressure: None,
            context: record.context.clone(),
            batch: None,
        };
        out.push(
            self.records
                .make(at, &[&jid, &minion], RecordBody::MinionReturn(record)),
        );
        self.closed_now.push(JobClosed {
            jid: jid.to_string(),
            revision: 0,
            context: completed.context.clone(),
            at,
        });
        out.push(
            self.records
                .make(at, &[&jid, "0"], RecordBody::JobCompleted(completed)),
        );
    }
}
