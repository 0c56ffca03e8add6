//! What a job's failure records share, made once: a failure's correlation
//! per job (a minion whose state flipped gets its own), and a failed state's
//! facts, cause and output per failure triage found alike. The records hold
//! them as [`Shared`] parts.

use std::sync::Arc;

use super::history::Flip;
use super::{Correlator, Heads};
use crate::record::{Classification, CommandOutput, Correlation, FailedStateFacts, Shared};
use crate::triage::failures::SharedState;
use crate::triage::{Judged, StateFailure};

/// A failure of a job (its SLS, its fingerprint) and its correlation.
type FailureCorrelation = (Option<Box<str>>, Box<str>, Shared<Correlation>);

/// A job's correlations by failure (SLS, fingerprint), made under `heads`:
/// one per failure of a job and shared by its minions' records, not one per
/// minion. A minion whose state flipped (passed before) has its own.
#[derive(Default)]
pub(super) struct JobCorrelations {
    jid: Box<str>,
    heads: Arc<Heads>,
    by_failure: Vec<FailureCorrelation>,
}

/// Failures of one job whose correlation is kept (a job fails in a few ways).
const MAX_JOB_CORRELATIONS: usize = 64;

/// What a `state_failure` record says of its state, cause and output, made
/// once for the failure triage found the same on many minions (its state and
/// judgement are the same pointers then: both are held, so neither address
/// is another's while kept).
#[derive(Clone)]
pub(super) struct FailureParts {
    state: Arc<SharedState>,
    judged: Arc<Judged>,
    pub(super) facts: Shared<FailedStateFacts>,
    pub(super) cause: Shared<Classification>,
    pub(super) output: Shared<CommandOutput>,
}

/// Failures whose record parts are kept.
const MAX_FAILURE_PARTS: usize = 64;

impl Correlator {
    /// The record parts of failure `f`: made once while minions fail alike
    /// (the same state and judgement from triage), then shared.
    pub(super) fn failure_parts(&mut self, f: &StateFailure) -> FailureParts {
        let known =
            self.failure_parts.iter().rev().find(|p| {
                Arc::ptr_eq(&p.state, &f.state.shared) && Arc::ptr_eq(&p.judged, &f.judged)
            });
        if let Some(parts) = known {
            return parts.clone();
        }
        let state = &f.state;
        let made = FailureParts {
            state: state.shared.clone(),
            judged: f.judged.clone(),
            facts: Shared::new(FailedStateFacts {
                sls: state.sls.clone(),
                state_id: state.state_id.clone(),
                function: state.function.clone(),
                name: state.name.clone(),
                comment: f.comment.text.clone(),
                comment_len: f.comment.original_len,
            }),
            cause: Shared::new(f.classification.clone()),
            output: Shared::new(f.output()),
        };
        if self.failure_parts.len() >= MAX_FAILURE_PARTS {
            self.failure_parts.pop_front();
        }
        self.failure_parts.push_back(made.clone());
        made
    }

    /// A failure's correlation in job `jid`: made once per failure of the
    /// job (its SLS and fingerprint) and shared, unless the state flipped on
    /// this minion (its suspects are its own).
    pub(super) fn job_correlation(
        &mut self,
        jid: &str,
        heads: &Arc<Heads>,
        sls: Option<&str>,
        flip: Option<&Flip>,
        fingerprint: &str,
    ) -> Shared<Correlation> {
        if flip.is_some() {
            return self.correlation(heads, sls, flip, fingerprint).into();
        }
        let memo = &mut self.job_correlations;
        if *memo.jid != *jid || memo.heads != *heads {
            memo.jid = jid.into();
            memo.heads = heads.clone();
            memo.by_failure.clear();
        }
        let known = memo
            .by_failure
            .iter()
            .find(|(s, f, _)| s.as_deref() == sls && **f == *fingerprint);
        if let Some((_, _, correlation)) = known {
            return correlation.clone();
        }
        let made = Shared::new(self.correlation(heads, sls, None, fingerprint));
        let memo = &mut self.job_correlations;
        if memo.by_failure.len() < MAX_JOB_CORRELATIONS {
            memo.by_failure
                .push((sls.map(Box::from), fingerprint.into(), made.clone()));
        }
        made
    }
}
