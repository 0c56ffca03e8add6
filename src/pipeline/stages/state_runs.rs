//! A minion's state run, followed past triage and the tracker: the rollouts it
//! applies (or fails) and its changes for drift, under the HEAD its job ran
//! under.

use super::{Stages, Triaged};
use crate::correlate::applied::coverage_of;
use crate::correlate::rollout::Coverage;
use crate::correlate::{Correlator, StateTreeHead};
use crate::drift::{SlsHistory, StateRunSeen};
use crate::event::Raw;
use crate::jobs::tracker::context_of_return;
use crate::record::{JobContext, Record, Shared};
use crate::time::Stamp;

impl Stages {
    /// A minion's return of a state run, judged by the return the tracker
    /// recorded (`out` holds it): the rollouts it applies (or fails), and its
    /// changes for drift.
    pub(super) fn follow_state_run(
        &mut self,
        r: &crate::event::JobReturn<'_>,
        triaged: Option<&Triaged>,
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        let (jid, minion) = (r.jid.as_str(), r.minion.as_str());
        self.correlator.saw_minion(minion);
        // The tracker's judgement of this very return (the event it judged
        // last); none when it did not count it (a duplicate).
        let Some(returned) = self.tracker.last_return() else {
            return;
        };
        let fun = r.fun.as_ref().map_or("", |f| f.as_str());
        // Only a state run covers states: no other return's arguments are read.
        if !crate::event::args::is_state_run(fun) {
            return;
        }
        let (test, succeeded) = (returned.test, returned.succeeded);
        let args = self.run_args(fun, r.fun_args);
        let test = test || args.test;
        if args.coverage.is_none() {
            return;
        }
        let context = triaged.map(|t| &t.context);
        self.follow_drift(r, fun, test, context, at, out);
        if test {
            return;
        }
        let Some(coverage) = self.run_args.as_ref().and_then(|a| a.coverage.as_ref()) else {
            return;
        };
        let run = crate::correlate::applied::StateRun {
            jid,
            shared_jid: triaged.map(|t| &t.jid),
            minion,
            coverage,
            succeeded,
            fingerprint: triaged.and_then(|t| t.root_cause.as_ref()),
        };
        self.correlator.on_state_run(&run, at, out);
    }

    /// What the state run's arguments say, read once for the arguments of
    /// the run before (every minion of a job returns the job's).
    fn run_args(&mut self, fun: &str, raw: Option<Raw<'_>>) -> &RunArgs {
        let known = self.run_args.take().filter(|known| known.are(fun, raw));
        self.run_args
            .insert(known.unwrap_or_else(|| RunArgs::of(fun, raw)))
    }

    /// A state run's changes to the drift stage, under the HEAD its job ran
    /// under.
    fn follow_drift(
        &mut self,
        r: &crate::event::JobReturn<'_>,
        fun: &str,
        test: bool,
        context: Option<&Shared<JobContext>>,
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        let Some(ret) = r.ret.as_ref().filter(|_| self.drift.enabled()) else {
            return;
        };
        let jid = r.jid.as_str();
        let tree = self.correlator.state_tree_of(jid, at, out);
        // Borrowed: drift copies it only for a run it holds.
        let of_return;
        let context = match context.or_else(|| self.tracker.context(jid)) {
            Some(context) => context,
            None => {
                of_return = Shared::new(context_of_return(r));
                &of_return
            }
        };
        let run = StateRunSeen {
            jid,
            minion: r.minion.as_str(),
            fun,
            test,
            context,
            tree: tree.as_ref().and_then(StateTreeHead::name_and_head),
            ret: ret.0,
            states: r.states(),
            at,
        };
        self.drift
            .on_state_run(&run, &mut StateTreeHistory(&mut self.correlator), out);
    }
}

/// A state run's arguments as returned, and what they say: run with
/// `test=True`, and which states they cover (`None`: not a run of the state
/// tree).
pub(super) struct RunArgs {
    fun: Box<str>,
    raw: Option<Box<[u8]>>,
    test: bool,
    coverage: Option<Coverage>,
}

impl RunArgs {
    fn of(fun: &str, raw: Option<Raw<'_>>) -> Self {
        let args = match crate::event::args::raw_to_json(raw) {
            Some(serde_json::Value::Array(args)) => args,
            _ => Vec::new(),
        };
        Self {
            fun: fun.into(),
            raw: raw.map(|r| r.0.into()),
            test: crate::event::args::test_kwarg(raw),
            coverage: coverage_of(fun, &args, false),
        }
    }

    /// Whether these are the arguments `raw` of `fun`.
    fn are(&self, fun: &str, raw: Option<Raw<'_>>) -> bool {
        *self.fun == *fun && self.raw.as_deref() == raw.map(|r| r.0)
    }
}

/// The correlator's git answers, as drift asks them.
struct StateTreeHistory<'a>(&'a mut Correlator);

impl SlsHistory for StateTreeHistory<'_> {
    fn sls_changed(&mut self, old: &str, new: &str, sls: &str) -> Option<bool> {
        self.0.sls_changed(old, new, sls)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::pipeline::stages::tests::config;

    /// Each job's arguments are read for what they say, though the reading
    /// is kept from one return to the next.
    #[test]
    fn a_runs_arguments_are_read_again_when_they_change() {
        let mut stages = Stages::from_config(&config());
        let msgpack = |v: serde_json::Value| rmp_serde::to_vec(&v).expect("msgpack");
        let dry = msgpack(json!(["web", {"__kwarg__": true, "test": true}]));
        let db = msgpack(json!(["db"]));
        let mut said = |fun: &str, raw: &[u8]| {
            let args = stages.run_args(fun, Some(Raw(raw)));
            (args.test, args.coverage.clone())
        };
        let web = Some(Coverage::Sls(vec!["web".into()]));
        assert_eq!(said("state.apply", &dry), (true, web.clone()));
        assert_eq!(said("state.apply", &dry), (true, web));
        let db_run = Some(Coverage::Sls(vec!["db".into()]));
        assert_eq!(said("state.apply", &db), (false, db_run));
        assert_eq!(said("state.highstate", &db), (false, Some(Coverage::All)));
        assert_eq!(said("state.single", &db), (false, None));
    }
}
