//! The drift records: changes no commit asked for (`drift`), and states that
//! change on every run and so are not drift (`non_idempotent`). The rules that
//! make them are `drift`'s; docs/records.md says them.

use serde::{Deserialize, Serialize};

use super::{JobContext, Shared, Trimmed};
use crate::time::Stamp;

crate::label_set! {
    /// What a changed state was, judged against the commit the minion had applied.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum ChangeKind {
        /// The run applied a commit (or an SLS) the minion had not applied yet.
        Intentional = "intentional",
        /// Under an applied commit the state had settled, and the run changed it
        /// back: the system had drifted and Salt put it back.
        Corrected = "corrected",
        /// A `test=True` run under an applied commit says it would change: the
        /// system has drifted and nothing put it back.
        Detected = "detected",
        /// It changed in the run before too, under the same commit (or on most
        /// of the job's minions at once): not settled yet, not drift.
        Unsettled = "unsettled",
        /// A state judged `non_idempotent`: its changes are not drift.
        NeverSettles = "never_settles",
    }
}

/// One state a run changed (or would) that no commit asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftedState {
    pub sls: String,
    pub state_id: String,
    /// `mod.fun` (`file.managed`).
    pub function: String,
    pub name: String,
    /// `corrected` or `detected`.
    pub change: ChangeKind,
    /// `changes` in short (a diff's first lines, a package's versions),
    /// capped at `drift.summary_bytes` and redacted.
    pub summary: String,
}

/// One minion's run that found drift: its corrected (or, under `test=True`,
/// detected) states, and what else it changed. id key: jid, minion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    pub jid: String,
    pub minion: String,
    pub fun: String,
    /// `corrected` (a run that changed the system) or `detected` (`test=True`).
    pub change: ChangeKind,
    /// The state tree and the HEAD the run ran under.
    pub repo: String,
    pub commit: String,
    /// The drifted states, the first `drift.max_states`.
    pub states: Vec<DriftedState>,
    /// Drifted states past `drift.max_states` (counted, not listed), and
    /// changed states past `drift.max_changed_read` (not read, not judged).
    #[serde(default)]
    pub states_not_listed: u32,
    #[serde(default)]
    pub changed_not_read: u32,
    /// The run's other changes, by kind: `intentional`, `unsettled`,
    /// `never_settles`.
    #[serde(default)]
    pub intentional: u32,
    #[serde(default)]
    pub unsettled: u32,
    #[serde(default)]
    pub never_settles: u32,
    /// Salt trimmed the return: states may be missing from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trimmed: Option<Trimmed>,
    #[serde(flatten)]
    pub context: Shared<JobContext>,
}

crate::label_set! {
    /// Whether a state is judged non-idempotent now.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum SettleStatus {
        /// It changes on (nearly) every run under one commit.
        NeverSettles = "never_settles",
        /// Judged so before, it has run without a change since.
        Settled = "settled",
    }
}

/// A state that changes on every run under one commit: not drift, a state to
/// fix. Emitted when first judged so, and when it settles. id key: sls,
/// state_id, function, status, since.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NonIdempotent {
    pub sls: String,
    pub state_id: String,
    pub function: String,
    pub name: String,
    pub status: SettleStatus,
    /// What usually makes such a state change every run.
    pub hint: String,
    /// The run that decided it, and the minion.
    pub jid: String,
    pub minion: String,
    /// Runs in a row it changed in, on that minion, under one commit.
    pub changed_runs: u32,
    /// Minions seen changing it in consecutive runs (at most the memory's).
    pub minions: u32,
    pub repo: String,
    pub commit: String,
    /// When it was judged so (for `settled`: the judgement it ends).
    pub since: Stamp,
}

/// What usually makes a state of `function` change on every run.
pub fn hint_for(function: &str) -> &'static str {
    match function {
        "cmd.run" | "cmd.script" | "cmd.wait" | "cmd.call" => {
            "a command with no unless/onlyif/creates (or one whose condition never holds) runs and reports a change every time"
        }
        "file.managed" | "file.blockreplace" | "file.append" | "file.serialize" => {
            "its content differs on every render: a time, a random value or an unordered map in the template, or another process rewriting the file"
        }
        "file.directory" | "file.recurse" => {
            "its ownership or mode is changed back by something else between runs, or its source differs every run"
        }
        "pkg.latest" | "pkg.uptodate" => {
            "it upgrades whatever the mirror has new: expected to change"
        }
        "service.running" | "service.dead" => {
            "the service stops (or starts) by itself between runs: a crash loop or another manager"
        }
        _ => "its changes recur on every run under one commit: a state that is not idempotent",
    }
}
