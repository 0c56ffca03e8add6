//! Prometheus metrics (docs/metrics.md): the catalog updated as events and
//! records go by, counts read at scrape time, and the HTTP endpoint.
//!
//! ```text
//! app (per event) ──▶ EventMetrics ─┐
//! run handler ──────▶ Observer ─────┼─▶ Registry ◀── /metrics (server, its own task)
//!   (records, minions, salt-exporter)│
//! ReaderStats, spools (atomics) ─────┘ read by SelfCollector at scrape
//! ```
//!
//! Metrics sit at the end of the data flow with the sink: they see events and
//! records, never the stages' internals, and nothing flows back.

pub mod catalog;
pub mod collect;
pub mod exposition;
pub mod labels;
pub mod minions;
pub mod rollouts;
pub mod salt_exporter;
pub mod server;
pub mod web;

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use crate::bus::ReaderStats;
use crate::config::metrics::MetricsConfig;
use crate::counter::Counts;
use crate::event::{Body, Event};
use crate::record::Record;
use crate::record::redact::Redactor;
use crate::sink::spool::Spool;
use catalog::{EventMetrics, RecordMetrics};
use collect::{ConfigReloads, PipelineCounters, SelfCollector};
use labels::{Fnv1a, LabelValues};
use minions::MinionMetrics;
use salt_exporter::SaltExporterMetrics;

/// Distinct minions remembered for `saltsight_minions_seen` at most.
const MAX_MINIONS_SEEN: usize = 1_000_000;

/// The registry and the handles that feed it.
pub struct Metrics {
    pub registry: Arc<Registry>,
    pub events: EventMetrics,
    pub observer: Observer,
    /// Set by whoever reloads the config.
    pub reloads: Arc<ConfigReloads>,
}

impl Metrics {
    pub fn new(
        config: &MetricsConfig,
        reader: Arc<ReaderStats>,
        spools: Vec<Spool>,
        counts: Vec<Arc<dyn Counts>>,
        redactor: Redactor,
    ) -> Metrics {
        let mut registry = Registry::default();
        let events = EventMetrics::register(&mut registry);
        let observer = Observer::register(&mut registry, config);
        let reloads = Arc::new(ConfigReloads::default());
        registry.register_collector(Box::new(SelfCollector {
            reader,
            reloads: reloads.clone(),
            spools,
            pipeline: observer.pipeline.clone(),
            counts,
            redactor,
        }));
        Metrics {
            registry: Arc::new(registry),
            events,
            observer,
            reloads,
        }
    }
}

/// What the `run` handler feeds: records, the minions it sees, and (opt-in)
/// per-minion and salt-exporter series.
#[derive(Debug)]
pub struct Observer {
    /// The `function` label's values, one set for every family that has it.
    functions: LabelValues,
    records: RecordMetrics,
    rollouts: rollouts::RolloutMetrics,
    minions: Option<MinionMetrics>,
    salt_exporter: Option<SaltExporterMetrics>,
    pipeline: Arc<PipelineCounters>,
    /// FNV-1a hashes of the minion ids seen (8 bytes each, no pointer to chase;
    /// a collision among a million ids is a one-in-30-million chance, for a gauge).
    seen: HashSet<u64, BuildHasherDefault<Identity>>,
}

/// The keys are hashes already.
#[derive(Debug, Default, Clone, Copy)]
struct Identity(u64);

impl Hasher for Identity {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Observer {
    fn register(registry: &mut Registry, config: &MetricsConfig) -> Observer {
        let label_refusals = prometheus_client::metrics::family::Family::<
            [(&'static str, &'static str); 1],
            Counter,
        >::default();
        registry.register(
            "saltsight_metric_label_values_refused",
            "Distinct label values counted as \"other\" because their label had as many values as its bound (metrics.max_functions for function)",
            label_refusals.clone(),
        );
        let refusals = |label| label_refusals.get_or_create_owned(&[("label", label)]);
        let functions = LabelValues::new(&config.functions, refusals("function"));
        let records = RecordMetrics::register(registry, &functions);
        let rollouts = rollouts::RolloutMetrics::register(registry);
        // Refusals are one count, whichever per-minion part refused.
        let refused = Counter::default();
        if config.per_minion || config.salt_exporter.is_some() {
            registry.register(
                "saltsight_metric_series_refused",
                "Per-minion series not created because metrics.max_minions minions have series",
                refused.clone(),
            );
        }
        let minions = config
            .per_minion
            .then(|| MinionMetrics::register(registry, config.max_minions, refused.clone()));
        let salt_exporter = config.salt_exporter.clone().map(|compat| {
            SaltExporterMetrics::register(
                registry,
                compat,
                config.max_minions,
                refused,
                refusals("state"),
            )
        });
        Observer {
            functions,
            records,
            rollouts,
            minions,
            salt_exporter,
            pipeline: Arc::new(PipelineCounters::default()),
            seen: HashSet::default(),
        }
    }

    /// Handles registered nowhere, for runs that serve no metrics (replay, demo).
    pub fn unregistered(config: &MetricsConfig) -> Observer {
        Observer::register(&mut Registry::default(), config)
    }

    pub fn event(&mut self, event: &Event<'_>) {
        let minion = match &event.body {
            Body::JobReturn(r) => Some(r.minion.as_str()),
            Body::MinionStart(s) => Some(s.minion.as_str()),
            _ => None,
        };
        if let Some(minion) = minion {
            let mut hash = Fnv1a::default();
            hash.write(minion.as_bytes());
            if self.seen.len() < MAX_MINIONS_SEEN && self.seen.insert(hash.finish()) {
                self.pipeline
                    .minions_seen
                    .store(self.seen.len() as u64, Ordering::Relaxed);
            }
        }
        if let Some(compat) = &mut self.salt_exporter {
            compat.event(event, &mut self.functions);
        }
    }

    /// The watched state trees (`correlate`'s, with `states`): their rollout
    /// series exist from the start.
    pub fn expect_state_trees(&self, repos: &[String]) {
        self.rollouts.expect(repos);
    }

    pub fn record(&mut self, record: &Record) {
        self.records.record(record, &mut self.functions);
        if let crate::record::RecordBody::Rollout(r) = &record.body {
            self.rollouts.record(r);
        }
        if let Some(minions) = &mut self.minions {
            minions.record(record);
        }
    }
}
