//! `salt/batch/<jid>/{new,progress,complete,halted}`: Salt 3008.2+ runs a
//! `salt -b` batch under one jid for every sub-batch and ships the batch's
//! whole state (`BatchState`, `salt/utils/batch_state.py`) in each of these
//! events: `{jid, fun, tgt, tgt_type, user, driver, state: {all_minions,
//! pending, active, done, failed, batch_size, halted, halted_reason, ...}}`.
//!
//! Only what the tracker needs is read: who the batch runs on, its size, and
//! whether it halted. `done` holds every finished minion's whole return, so
//! a progress event grows with the batch; it is passed over, never decoded.

use super::cursor::Cursor;
use super::payload::{Int, Raw, Text, TextList, typed};

/// Which of the batch's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchStep {
    /// Registered: every minion it will run on, none sent yet.
    #[default]
    New,
    /// A sub-batch sent, or minions finished.
    Progress,
    /// Every minion accounted for.
    Complete,
    /// Stopped early (`--failhard`, `salt-run batch.stop`): the minions not
    /// sent yet never will be.
    Halted,
}

impl BatchStep {
    /// The step a tag's last part names.
    pub fn of(detail: &str) -> Option<Self> {
        Some(match detail {
            "new" => Self::New,
            "progress" => Self::Progress,
            "complete" => Self::Complete,
            "halted" => Self::Halted,
            _ => return None,
        })
    }

    /// The batch has ended (nothing more will be sent).
    pub fn ends(self) -> bool {
        matches!(self, Self::Complete | Self::Halted)
    }
}

/// What the tracker reads of a batch event.
#[derive(Debug, Clone, Default)]
pub struct BatchEvent<'a> {
    pub jid: Text<'a>,
    pub step: BatchStep,
    pub fun: Option<Text<'a>>,
    /// The job's arguments (`state.arg`), as its sub-batches publish them.
    pub arg: Option<Raw<'a>>,
    pub tgt: Option<TextList<'a>>,
    pub tgt_type: Option<Text<'a>>,
    pub user: Option<Text<'a>>,
    /// Every minion the batch runs on (`state.all_minions`): those that
    /// answered its `test.ping`.
    pub minions: Option<TextList<'a>>,
    /// How many run at once (`state.batch_size`).
    pub size: Option<i64>,
    /// How many it runs on, when it does not name them (the master's own
    /// batches, `salt --async -b`: `total_minions`).
    pub total: Option<i64>,
    pub halted: bool,
    /// Why it halted (`failhard`, `stop`...).
    pub halted_reason: Option<Text<'a>>,
    /// The minions it halted before sending to (`abandoned_pending`).
    pub abandoned: Option<TextList<'a>>,
}

/// The fields of `state` the tracker reads, from its raw msgpack map.
#[derive(Debug, Default)]
pub(super) struct StateFields<'a> {
    pub minions: Option<TextList<'a>>,
    pub arg: Option<Raw<'a>>,
    pub size: Option<i64>,
    pub halted: bool,
    pub halted_reason: Option<Text<'a>>,
    /// The first field with an unexpected type.
    pub malformed: Option<&'static str>,
}

impl<'a> StateFields<'a> {
    /// Reads `state`; what is not a map gives nothing (and says so).
    pub fn read(raw: &'a [u8]) -> Self {
        let mut f = StateFields::default();
        let mut cursor = Cursor::new(raw);
        let Some(pairs) = cursor.read_map_len() else {
            f.malformed = Some("state");
            return f;
        };
        let m = &mut f.malformed;
        for _ in 0..pairs {
            let Ok(key) = cursor.read_key() else {
                m.get_or_insert("state");
                break;
            };
            let Ok(value) = cursor.take_raw() else {
                m.get_or_insert("state");
                break;
            };
            match key {
                Some(b"all_minions") => f.minions = typed(value, "state.all_minions", m),
                Some(b"arg") => f.arg = Some(Raw(value)),
                Some(b"batch_size") => {
                    f.size = typed::<Int>(value, "state.batch_size", m).map(|Int(n)| n)
                }
                Some(b"halted") => f.halted = typed(value, "state.halted", m).unwrap_or(false),
                Some(b"halted_reason") => f.halted_reason = typed(value, "state.halted_reason", m),
                _ => {}
            }
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Body, decode, salt_frame};

    fn state_event(step: &str, halted: bool) -> Vec<u8> {
        salt_frame(
            &format!("salt/batch/20261207043319530601/{step}"),
            &serde_json::json!({
                "jid": "20261207043319530601", "fun": "state.apply", "tgt": "*",
                "tgt_type": "glob", "user": "root", "driver": "cli",
                "state": {
                    "jid": "20261207043319530601",
                    "all_minions": ["web1", "web2"], "pending": ["web2"],
                    "active": {"web1": 1796617999.5},
                    "done": {"web0": {"ret": {"a_|-b_|-c_|-run": {"result": true}}, "retcode": 0}},
                    "failed": {}, "wait": [], "batch_size": 1,
                    "halted": halted, "halted_reason": if halted { Some("failhard") } else { None },
                },
                "_stamp": "2026-12-07T04:33:19.535000+00:00",
            }),
            false,
        )
    }

    #[test]
    fn reads_who_the_batch_runs_on_its_size_and_whether_it_halted() {
        let frame = state_event("progress", false);
        let event = decode(&frame).expect("decodes");
        let Body::Batch(b) = event.body else {
            panic!("a batch event: {:?}", event.body)
        };
        assert_eq!(b.jid.as_str(), "20261207043319530601");
        assert_eq!(b.step, BatchStep::Progress);
        assert_eq!(b.fun.as_ref().map(Text::as_str), Some("state.apply"));
        let minions: Vec<&str> = b.minions.iter().flat_map(TextList::iter).collect();
        assert_eq!(minions, ["web1", "web2"]);
        assert_eq!(b.size, Some(1));
        assert!(!b.halted);
        assert_eq!(event.malformed_field, None);

        let frame = state_event("halted", true);
        let Body::Batch(b) = decode(&frame).expect("decodes").body else {
            panic!("a batch event")
        };
        assert_eq!(b.step, BatchStep::Halted);
        assert!(b.halted);
        assert_eq!(b.halted_reason.as_ref().map(Text::as_str), Some("failhard"));
    }

    #[test]
    fn a_state_that_is_no_map_is_malformed_not_an_error() {
        let frame = salt_frame(
            "salt/batch/20261207043319530601/new",
            &serde_json::json!({"jid": "20261207043319530601", "state": [1, 2]}),
            false,
        );
        let event = decode(&frame).expect("decodes");
        assert_eq!(event.malformed_field, Some("state"));
        let Body::Batch(b) = event.body else {
            panic!("a batch event")
        };
        assert!(b.minions.is_none());
    }
}
