//! A job's context: how it came to run (by hand, a minion's scheduler, an
//! orchestration, salt-api, the reactor), its `--metadata`, and `test=True`.
//!
//! Salt marks none of these on the job itself except the schedule name and the
//! metadata: an orchestration step fires `salt/run/<orchestration jid>/args`
//! (`{type, tgt, name, args}`) just before it publishes, so a `new` to the same
//! target within a few seconds is that step's job; the reactor publishes runner
//! and wheel jobs as user `Reactor` (its `local` jobs carry the master's user and
//! cannot be told from jobs run by hand); salt-api jobs carry the eauth user,
//! configured as `jobs.api_users`.

use std::collections::VecDeque;
use std::time::Duration;

use crate::event::args::{raw_to_json, test_kwarg, texts};
use crate::event::{JobPublication, JobReturn, RunArgs, Text};
use crate::record::{JobContext, RunKind, TraceContext};
use crate::time::Stamp;

/// The user the reactor publishes runner and wheel jobs as.
const REACTOR_USER: &str = "Reactor";

/// How long after an orchestration's `args` event its job's `new` may come.
const ORCHESTRATION_WINDOW: Duration = Duration::from_secs(10);
/// Orchestration steps remembered while waiting for their job's `new`.
const MAX_ORCHESTRATION_STEPS: usize = 256;

/// The rules that name a published job's context, and the orchestration steps
/// waiting for their job.
#[derive(Debug, Default)]
pub struct ContextRules {
    api_users: Vec<String>,
    /// Orchestration steps about to publish: (when, orchestration jid, target).
    steps: VecDeque<(Stamp, Box<str>, Vec<String>)>,
}

impl ContextRules {
    pub fn new(api_users: Vec<String>) -> Self {
        Self {
            api_users,
            steps: VecDeque::new(),
        }
    }

    /// How a published job came to run: by its user (the reactor's, or a
    /// salt-api user), by an orchestration step just before it with the same
    /// target, or else by hand. Metadata arrives later, with `publish`.
    pub fn for_publication(
        &mut self,
        p: &JobPublication<'_>,
        tgt: &[String],
        at: Stamp,
    ) -> JobContext {
        let user = p.user.as_ref().map_or("", Text::as_str);
        let step = self
            .steps
            .iter()
            .position(|(when, _, step_tgt)| {
                step_tgt == tgt && at >= *when && at <= when.plus(ORCHESTRATION_WINDOW)
            })
            .and_then(|i| self.steps.remove(i));
        let run_kind = if step.is_some() {
            RunKind::Orchestrated
        } else if user == REACTOR_USER {
            RunKind::Reactor
        } else if self.api_users.iter().any(|u| u == user) {
            RunKind::Api
        } else {
            RunKind::Adhoc
        };
        JobContext {
            run_kind,
            orchestration_jid: step.map(|(_, jid, _)| jid.into_string()),
            metadata: raw_to_json(p.metadata),
            test: test_kwarg(p.arg),
            trace: trace_of(p.traceparent.as_ref()),
        }
    }

    pub fn on_orchestration_step(&mut self, r: &RunArgs<'_>, at: Stamp) {
        while self
            .steps
            .front()
            .is_some_and(|(when, _, _)| when.plus(ORCHESTRATION_WINDOW) < at)
            || self.steps.len() >= MAX_ORCHESTRATION_STEPS
        {
            self.steps.pop_front();
        }
        let tgt = texts(r.tgt.as_ref());
        if !tgt.is_empty() {
            self.steps.push_back((at, r.jid.as_str().into(), tgt));
        }
    }
}

/// What a return says of its job's context on its own (a job whose `new` was not
/// seen): its metadata, its `test` flag, and how it ran: by the minion's
/// scheduler (a `schedule` name), by `salt-call` on the minion (the master gave
/// it a jid on receipt and targeted it at the minion itself, with no `success`
/// key), or unknown.
pub fn context_of_return(r: &JobReturn<'_>) -> JobContext {
    let tgt = texts(r.tgt.as_ref());
    let called = r.success.is_none() && tgt.len() == 1 && tgt[0] == r.minion.as_str();
    JobContext {
        run_kind: if r.schedule.is_some() {
            RunKind::Scheduled
        } else if called {
            RunKind::Call
        } else {
            RunKind::Unknown
        },
        orchestration_jid: None,
        metadata: raw_to_json(r.metadata),
        test: test_kwarg(r.fun_args),
        // The return's own trace is not its job's: that one is unknown here.
        trace: None,
    }
}

/// The trace context a `traceparent` field names, if it is one.
pub fn trace_of(traceparent: Option<&Text<'_>>) -> Option<TraceContext> {
    TraceContext::from_traceparent(traceparent?.as_str())
}
