//! The rules that tell one changed state apart: a commit's change, drift put
//! back or seen, or a state that has not settled. Pure: the memory of the
//! state on that minion and the answers about the commit come in.

use crate::record::ChangeKind;

/// What the memory holds of one state on one minion, from its last non-test
/// run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prior {
    /// The commit (its hash) the run was under.
    pub commit: u64,
    /// That run changed the state.
    pub changed: bool,
    /// ...under a commit the minion had applied already (not a commit's change).
    pub changed_applied: bool,
    /// Runs in a row that changed it.
    pub streak: u32,
}

/// A changed state's judgement; `candidate`: corrected, unless the job shows
/// it changing again on most of its minions (then unsettled): decided at the
/// job's close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judgement {
    pub kind: ChangeKind,
    pub candidate: bool,
}

impl Judgement {
    fn is(kind: ChangeKind) -> Self {
        Self {
            kind,
            candidate: false,
        }
    }
}

/// One changed state (or, `test`, one that would change). `applied` answers
/// whether the minion had applied what the run applies to this state: the
/// same commit, or one with no change to its SLS since (`None`: git could
/// not say, taken as not applied: no drift is claimed on a guess).
pub fn judge(
    prior: Option<Prior>,
    applied: impl FnOnce(&Prior) -> Option<bool>,
    judged_never_settles: bool,
    test: bool,
) -> Judgement {
    if judged_never_settles {
        return Judgement::is(ChangeKind::NeverSettles);
    }
    let Some(prior) = prior else {
        // Never seen run on this minion: its first run is a commit's change.
        return Judgement::is(ChangeKind::Intentional);
    };
    if applied(&prior) != Some(true) {
        return Judgement::is(ChangeKind::Intentional);
    }
    if prior.changed_applied {
        // Changed under the applied commit in the run before as well.
        return Judgement::is(ChangeKind::Unsettled);
    }
    if test {
        return if prior.changed {
            Judgement::is(ChangeKind::Unsettled)
        } else {
            Judgement::is(ChangeKind::Detected)
        };
    }
    if prior.changed {
        // The run before changed it too, as a commit's change: drift put back,
        // unless the job shows it on most of its minions (not settled yet).
        return Judgement {
            kind: ChangeKind::Corrected,
            candidate: true,
        };
    }
    Judgement::is(ChangeKind::Corrected)
}

/// The memory after a non-test run of the state: `changed` with `judgement`,
/// or ran without a change (`None`).
pub fn after_run(prior: Option<Prior>, commit: u64, judgement: Option<Judgement>) -> Prior {
    match judgement {
        None => Prior {
            commit,
            changed: false,
            changed_applied: false,
            streak: 0,
        },
        Some(j) => {
            let intentional = j.kind == ChangeKind::Intentional;
            Prior {
                commit,
                changed: true,
                changed_applied: !intentional,
                streak: if intentional {
                    1
                } else {
                    prior.map_or(0, |p| p.streak).saturating_add(1)
                },
            }
        }
    }
}

/// Whether the job's changes of a state that changed again (candidates) are
/// the state not settling: on at least two of its minions and `share` of
/// those that ran it.
pub fn unsettled_in_job(candidates: u32, ran: u32, share: f64) -> bool {
    candidates >= 2 && f64::from(candidates) >= share * f64::from(ran)
}

#[cfg(test)]
mod tests {
    use super::*;

    const C1: u64 = 1;
    const C2: u64 = 2;

    fn same_commit(now: u64) -> impl FnOnce(&Prior) -> Option<bool> {
        move |p| Some(p.commit == now)
    }

    fn settled(commit: u64) -> Option<Prior> {
        Some(Prior {
            commit,
            ..Prior::default()
        })
    }

    #[test]
    fn a_first_run_is_intentional_whatever_it_changes() {
        let j = judge(None, |_| panic!("not asked"), false, false);
        assert_eq!(j, Judgement::is(ChangeKind::Intentional));
        // test=True on a minion never seen run: nothing applied to drift from.
        assert_eq!(
            judge(None, |_| Some(true), false, true).kind,
            ChangeKind::Intentional
        );
    }

    #[test]
    fn a_settled_state_changed_under_the_applied_commit_is_corrected() {
        assert_eq!(
            judge(settled(C1), same_commit(C1), false, false),
            Judgement::is(ChangeKind::Corrected)
        );
        // A newer commit that did not touch its SLS: still the applied state.
        assert_eq!(
            judge(settled(C1), |_| Some(true), false, false).kind,
            ChangeKind::Corrected
        );
    }

    #[test]
    fn a_commit_that_changed_the_sls_or_a_revert_is_intentional() {
        // C2 changed the SLS (or reverted C1's change: the tree differs).
        assert_eq!(
            judge(settled(C1), |_| Some(false), false, false).kind,
            ChangeKind::Intentional
        );
        // git could not say: no drift claimed.
        assert_eq!(
            judge(settled(C1), |_| None, false, false).kind,
            ChangeKind::Intentional
        );
        assert_eq!(
            judge(settled(C1), same_commit(C2), false, false).kind,
            ChangeKind::Intentional
        );
    }

    #[test]
    fn test_runs_detect_drift_of_a_settled_state_only() {
        assert_eq!(
            judge(settled(C1), same_commit(C1), false, true).kind,
            ChangeKind::Detected
        );
        let unsettled = Some(Prior {
            commit: C1,
            changed: true,
            changed_applied: false,
            streak: 1,
        });
        assert_eq!(
            judge(unsettled, same_commit(C1), false, true).kind,
            ChangeKind::Unsettled
        );
        assert_eq!(
            judge(settled(C1), same_commit(C2), false, true).kind,
            ChangeKind::Intentional
        );
    }

    #[test]
    fn a_state_that_keeps_changing_is_unsettled_then_never_settles() {
        // Run 1: the commit's change.
        let j1 = judge(None, |_| None, false, false);
        let p1 = after_run(None, C1, Some(j1));
        assert_eq!((p1.streak, p1.changed_applied), (1, false));
        // Run 2 changes it again: a candidate (corrected unless the job says otherwise).
        let j2 = judge(Some(p1), same_commit(C1), false, false);
        assert!(j2.candidate, "{j2:?}");
        let p2 = after_run(Some(p1), C1, Some(j2));
        // Run 3 again: unsettled, whatever the job.
        let j3 = judge(Some(p2), same_commit(C1), false, false);
        assert_eq!(j3, Judgement::is(ChangeKind::Unsettled));
        let p3 = after_run(Some(p2), C1, Some(j3));
        assert_eq!(p3.streak, 3);
        // Once judged, it is never drift.
        assert_eq!(
            judge(Some(p3), same_commit(C1), true, false).kind,
            ChangeKind::NeverSettles
        );
        // A run without a change settles the memory.
        assert_eq!(after_run(Some(p3), C1, None), settled(C1).expect("a prior"));
    }

    #[test]
    fn candidates_are_unsettled_only_on_most_of_the_jobs_minions() {
        assert!(unsettled_in_job(3, 3, 0.5));
        assert!(unsettled_in_job(2, 4, 0.5));
        assert!(!unsettled_in_job(1, 3, 0.5), "one minion is drift");
        assert!(!unsettled_in_job(1, 1, 0.5), "one minion is drift");
        assert!(!unsettled_in_job(2, 10, 0.5));
    }
}
