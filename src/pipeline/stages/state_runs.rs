//! A minion's state run, followed past triage and the tracker: the rollouts it
//! applies (or fails) and its changes for drift, under the HEAD its job ran
//! under.

use super::Stages;
use crate::correlate::Correlator;
use crate::drift::{SlsHistory, StateRunSeen};
use crate::jobs::tracker::context_of_return;
use crate::record::{JobContext, Record};
use crate::time::Stamp;

impl Stages {
    /// A minion's return of a state run, judged by the return the tracker
    /// recorded (`out` holds it): the rollouts it applies (or fails), and its
    /// changes for drift.
    pub(super) fn follow_state_run(
        &mut self,
        r: &crate::event::JobReturn<'_>,
        triaged: Option<&(String, JobContext, Option<String>)>,
        at: Stamp,
        out: &mut Vec<Record>,
    ) {
        let (jid, minion) = (r.jid.as_str(), r.minion.as_str());
        self.correlator.saw_minion(minion, at);
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
        let args = match crate::event::args::raw_to_json(r.fun_args) {
            Some(serde_json::Value::Array(args)) => args,
            _ => Vec::new(),
        };
        let test = returned.test || crate::event::args::test_kwarg(r.fun_args);
        let Some(coverage) = crate::correlate::applied::coverage_of(fun, &args, false) else {
            return;
        };
        let context = triaged.map(|(_, context, _)| context);
        self.follow_drift(r, fun, test, context, at, out);
        if test {
            return;
        }
        let succeeded = returned.succeeded;
        let fingerprint = triaged.and_then(|(_, _, f)| f.clone());
        let run = crate::correlate::applied::StateRun {
            jid,
            minion,
            coverage,
            succeeded,
            fingerprint: fingerprint.as_deref(),
        };
        self.correlator.on_state_run(&run, at, out);
    }

    /// A state run's changes to the drift stage, under the HEAD its job ran
    /// under.
    fn follow_drift(
        &mut self,
        r: &crate::event::JobReturn<'_>,
        fun: &str,
        test: bool,
        context: Option<&JobContext>,
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
                of_return = context_of_return(r);
                &of_return
            }
        };
        let run = StateRunSeen {
            jid,
            minion: r.minion.as_str(),
            fun,
            test,
            context,
            tree: tree
                .as_ref()
                .map(|(repo, head)| (repo.as_str(), head.as_str())),
            ret: ret.0,
            states: r.states(),
            at,
        };
        self.drift
            .on_state_run(&run, &mut StateTreeHistory(&mut self.correlator), out);
    }
}

/// The correlator's git answers, as drift asks them.
struct StateTreeHistory<'a>(&'a mut Correlator);

impl SlsHistory for StateTreeHistory<'_> {
    fn sls_changed(&mut self, old: &str, new: &str, sls: &str) -> Option<bool> {
        self.0.sls_changed(old, new, sls)
    }
}
