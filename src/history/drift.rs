//! What the history says of drift (`saltsight drift`, and a job's recap): the
//! states that drifted, newest first, and the states judged to never settle.

use std::collections::BTreeMap;

use serde::Serialize;

use super::rows::Stored;
use super::{HistoryError, Store};
use crate::record::{Drift, NonIdempotent, RecordKind, SettleStatus};
use crate::time::Stamp;

/// One drifted state of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriftLine {
    pub at: String,
    pub jid: String,
    pub minion: String,
    /// `corrected` or `detected`.
    pub change: String,
    pub sls: String,
    pub state_id: String,
    pub function: String,
    pub name: String,
    pub summary: String,
    pub repo: String,
    pub commit: String,
}

/// A state judged non-idempotent and not settled since.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NeverSettles {
    pub sls: String,
    pub state_id: String,
    pub function: String,
    pub hint: String,
    pub since: String,
    pub minions: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriftAnswer {
    /// Newest first.
    pub drifted: Vec<DriftLine>,
    pub never_settles: Vec<NeverSettles>,
}

/// What `saltsight drift` filters on.
#[derive(Debug, Clone, Default)]
pub struct DriftFilter {
    pub since: Option<Stamp>,
    pub minion: Option<String>,
    /// An SLS, or its prefix (`web` matches `web` and `web.nginx`).
    pub sls: Option<String>,
}

impl DriftFilter {
    fn keeps_sls(&self, sls: &str) -> bool {
        self.sls.as_deref().is_none_or(|want| {
            sls == want
                || sls
                    .strip_prefix(want)
                    .is_some_and(|rest| rest.starts_with('.'))
        })
    }
}

/// Each drifted state of `records`, newest first.
pub fn lines_of(records: Vec<Stored<Drift>>) -> Vec<DriftLine> {
    let mut lines: Vec<DriftLine> = records
        .into_iter()
        .flat_map(|d| {
            let at = d.at.to_string();
            let run = d.body;
            run.states.into_iter().map(move |s| DriftLine {
                at: at.clone(),
                jid: run.jid.clone(),
                minion: run.minion.clone(),
                change: s.change.to_string(),
                sls: s.sls,
                state_id: s.state_id,
                function: s.function,
                name: s.name,
                summary: s.summary,
                repo: run.repo.clone(),
                commit: run.commit.clone(),
            })
        })
        .collect();
    lines.sort_by(|a, b| b.at.cmp(&a.at).then(a.minion.cmp(&b.minion)));
    lines
}

/// Drift since `filter.since` (of one minion, of one SLS), and the states
/// that never settle (judged at any time, not settled since).
pub fn drift(store: &Store, filter: &DriftFilter) -> Result<DriftAnswer, HistoryError> {
    let since = filter.since.map_or(i64::MIN, |s| s.0);
    let rows = match &filter.minion {
        Some(minion) => store.rows(
            "SELECT kind, record FROM records WHERE kind = 'drift' AND minion = ?1 AND at >= ?2 ORDER BY at, rowid",
            &[minion, &since],
        )?,
        None => store.rows(
            "SELECT kind, record FROM records WHERE kind = 'drift' AND at >= ?1 ORDER BY at, rowid",
            &[&since],
        )?,
    };
    let mut drifted = lines_of(rows.of(RecordKind::Drift));
    drifted.retain(|l| filter.keeps_sls(&l.sls));
    let judged = store.rows(
        "SELECT kind, record FROM records WHERE kind = 'non_idempotent' ORDER BY at, rowid",
        &[],
    )?;
    // The latest judgement of each state.
    let mut latest: BTreeMap<(String, String, String), Stored<NonIdempotent>> = BTreeMap::new();
    for n in judged.of::<NonIdempotent>(RecordKind::NonIdempotent) {
        let key = (
            n.body.sls.clone(),
            n.body.state_id.clone(),
            n.body.function.clone(),
        );
        latest.insert(key, n);
    }
    let never_settles = latest
        .into_values()
        .map(|n| n.body)
        .filter(|n| n.status == SettleStatus::NeverSettles && filter.keeps_sls(&n.sls))
        .map(|n| NeverSettles {
            since: n.since.to_string(),
            sls: n.sls,
            state_id: n.state_id,
            function: n.function,
            hint: n.hint,
            minions: n.minions,
        })
        .collect();
    Ok(DriftAnswer {
        drifted,
        never_settles,
    })
}
