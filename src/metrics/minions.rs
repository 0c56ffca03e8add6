//! Opt-in per-minion series (`metrics.per_minion`): returns by outcome and
//! missing returns for each minion, under a hard cap on minions
//! (`metrics.max_minions`). A minion past the cap gets no series; each refusal is
//! counted in `saltsight_metric_series_refused_total`, so the cap is visible.

use foldhash::{HashMap, HashMapExt};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::record::{Record, RecordBody};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MinionOutcome {
    minion: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MinionLabel {
    minion: String,
}

/// One admitted minion's series.
#[derive(Debug)]
struct Series {
    returns: [Counter; 2],
    missing: Counter,
}

#[derive(Debug)]
pub struct MinionMetrics {
    returns: Family<MinionOutcome, Counter>,
    missing: Family<MinionLabel, Counter>,
    admitted: HashMap<String, Series>,
    max_minions: usize,
    refused: Counter,
}

impl MinionMetrics {
    /// `refused` is registered by the caller (salt-exporter's series share it).
    pub fn register(registry: &mut Registry, max_minions: usize, refused: Counter) -> Self {
        let returns = Family::default();
        registry.register(
            "saltsight_minion_returns",
            "Returns to tracked jobs per minion, by outcome (opt-in: metrics.per_minion)",
            returns.clone(),
        );
        let missing = Family::default();
        registry.register(
            "saltsight_minion_missing_returns",
            "Missing returns per minion (opt-in: metrics.per_minion)",
            missing.clone(),
        );
        Self {
            returns,
            missing,
            admitted: HashMap::new(),
            max_minions,
            refused,
        }
    }

    fn series(&mut self, minion: &str) -> Option<&Series> {
        if !self.admitted.contains_key(minion) {
            if self.admitted.len() >= self.max_minions {
                self.refused.inc();
                return None;
            }
            let outcome = |outcome| {
                self.returns.get_or_create_owned(&MinionOutcome {
                    minion: minion.to_owned(),
                    outcome,
                })
            };
            let series = Series {
                returns: [outcome("success"), outcome("failure")],
                missing: self.missing.get_or_create_owned(&MinionLabel {
                    minion: minion.to_owned(),
                }),
            };
            self.admitted.insert(minion.to_owned(), series);
        }
        self.admitted.get(minion)
    }

    pub fn record(&mut self, record: &Record) {
        match &record.body {
            RecordBody::MinionReturn(r) | RecordBody::LateReturn(r) => {
                if let Some(series) = self.series(&r.minion) {
                    series.returns[usize::from(!r.succeeded)].inc();
                }
            }
            RecordBody::MinionMissing(m) => {
                if let Some(series) = self.series(&m.minion) {
                    series.missing.inc();
                }
            }
            _ => {}
        }
    }
}
