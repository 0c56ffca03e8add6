//! A `salt -b` run as its job's records say it: one job for the whole
//! batch, whatever jids Salt gave its sub-batches (docs/records.md).

use serde::{Deserialize, Serialize};

/// How a batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchEnd {
    /// Salt said every minion was accounted for (`salt/batch/<jid>/complete`),
    /// or every minion it ran on returned.
    Complete,
    /// Salt stopped it early (`salt/batch/<jid>/halted`: `--failhard`,
    /// `salt-run batch.stop`).
    Halted,
    /// saltsight's deadline came while minions were still to be sent.
    Deadline,
}

/// A batch run, on its `job_published` (as known then) and `job_completed`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchInfo {
    /// How many minions run at once, as Salt resolved `-b` (`50%` of 3 is 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u32>,
    /// Sub-batches sent so far.
    pub sub_batches: u32,
    /// Targeted minions not sent the job yet (while it runs) or never (at
    /// its end: each has a `not_sent` verdict).
    pub unsent: u32,
    /// The jids of its sub-batches after the first, when Salt gave each its
    /// own (before 3008.2): the job's jid is the first sub-batch's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sub_jids: Vec<String>,
    /// The `test.ping` job the batch chose its minions with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ping_jid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<BatchEnd>,
    /// Salt's reason for a halt (`failhard`...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub halted_reason: Option<String>,
}
