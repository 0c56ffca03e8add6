//! Every metric family saltsight updates as it runs, defined once; docs/metrics.md
//! is the reference. Label values come from closed enums (tag classes, missing
//! reasons, categories, record kinds), made at 0 at start so `increase()` sees a
//! family's first event, or from the bounded `function` values (`labels`): the
//! configured list, or the default ones then those learned as first seen, each
//! value's series made when it is given.
//!
//! Updates are atomic adds on handles resolved once (the `function` label costs
//! one lookup of a short string per record), from the consumer task: [`EventMetrics`] per event (in `app`),
//! [`RecordMetrics`] per record (in the `run` handler). Counts that live in
//! other tasks' atomics are read at scrape time (`collect`).

use foldhash::HashMap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::labels::{LabelValues, PerValue};
use crate::bus::GapReason;
use crate::event::{DecodeReason, TagClass};
use crate::record::{
    Category, ChangeKind, EpisodeStatus, MissingReason, PressureSignal, Record, RecordBody,
    RecordKind, RunKind, SettleStatus,
};

/// Job durations: seconds to an hour (highstates are long).
const DURATION_BUCKETS: [f64; 13] = [
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];
/// First-return latency: a minion's answer to a publish.
const FIRST_RETURN_BUCKETS: [f64; 12] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// Bus lag: receipt minus `_stamp`, milliseconds normally, seconds under load.
const LAG_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A return's outcome label values, by `succeeded`.
const OUTCOMES: [&str; 2] = ["success", "failure"];
/// A completed job: every expected minion returned and succeeded; some return
/// failed; none failed but some minion never returned.
const JOB_OUTCOMES: [&str; 3] = ["success", "failure", "incomplete"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FunctionLabel {
    function: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FunctionOutcome {
    function: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FunctionReason {
    function: String,
    reason: &'static str,
}

/// A family with one label of closed values, every series made at start.
fn closed<const N: usize, M>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    label: &'static str,
    values: [&'static str; N],
) -> [M; N]
where
    M: prometheus_client::metrics::TypedMetric
        + prometheus_client::encoding::EncodeMetric
        + Default
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let family = Family::<[(&'static str, &'static str); 1], M>::default();
    registry.register(name, help, family.clone());
    values.map(|value| family.get_or_create_owned(&[(label, value)]))
}

/// Per-event counts, updated by `app::run` for every frame it decodes.
#[derive(Clone, Debug)]
pub struct EventMetrics {
    events: [Counter; TagClass::COUNT],
    decode_errors: [Counter; DecodeReason::COUNT],
    malformed_fields: Counter,
    lag: Histogram,
    steps: [Histogram; Step::COUNT],
}

crate::label_set! {
    /// What a step of the pipeline was.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Step {
        /// One event, with everything it set off (a job's close, its records).
        Event = "event",
        /// A tick: deadlines fallen due, the checkpoint, samples.
        Tick = "tick",
        /// The end of a read: the outputs' writes.
        ReadEnd = "read_end",
    }
}

/// How long one step of the pipeline may hold it, in seconds: an event, a
/// tick, a read's end (the outputs' writes).
const STEP_BUCKETS: [f64; 7] = [0.0005, 0.002, 0.005, 0.02, 0.1, 0.5, 2.0];

impl Default for EventMetrics {
    /// Handles not registered anywhere (subcommands that serve no metrics).
    fn default() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl EventMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let lag = Histogram::new(LAG_BUCKETS);
        registry.register(
            "saltsight_bus_lag_seconds",
            "Receipt time minus the event's _stamp (a master under load shows it first)",
            lag.clone(),
        );
        Self {
            events: closed(
                registry,
                "saltsight_events",
                "Events decoded, by tag class",
                "class",
                TagClass::NAMES,
            ),
            decode_errors: closed(
                registry,
                "saltsight_decode_errors",
                "Frames skipped as undecodable, by reason",
                "reason",
                DecodeReason::NAMES,
            ),
            malformed_fields: {
                let c = Counter::default();
                registry.register(
                    "saltsight_malformed_fields",
                    "Events with a field of an unexpected type (left empty, the event kept)",
                    c.clone(),
                );
                c
            },
            lag,
            steps: {
                let family =
                    Family::<[(&'static str, &'static str); 1], Histogram>::new_with_constructor(
                        (|| Histogram::new(STEP_BUCKETS)) as fn() -> Histogram,
                    );
                registry.register(
                    "saltsight_pipeline_step_seconds",
                    "How long one step held the pipeline, by step: an event, a tick, a read's end (the reader reads on meanwhile)",
                    family.clone(),
                );
                Step::ALL.map(|step| family.get_or_create_owned(&[("step", step.as_str())]))
            },
        }
    }

    /// One step of the pipeline took `took`.
    pub fn step(&self, step: Step, took: std::time::Duration) {
        self.steps[step.index()].observe(took.as_secs_f64());
    }

    /// One decoded event; `lag_micros` when its receipt time and `_stamp` are known.
    pub fn event(&self, class: TagClass, malformed: bool, lag_micros: Option<i64>) {
        self.events[class.index()].inc();
        if malformed {
            self.malformed_fields.inc();
        }
        if let Some(lag) = lag_micros {
            self.lag.observe(lag.max(0) as f64 / 1e6);
        }
    }

    pub fn decode_error(&self, reason: DecodeReason) {
        self.decode_errors[reason.index()].inc();
    }
}

/// One function label value's series.
#[derive(Debug)]
struct FunctionSeries {
    jobs_published: Counter,
    expected_returns: Counter,
    late_returns: Counter,
    returns: [Counter; OUTCOMES.len()],
    jobs_completed: [Counter; JOB_OUTCOMES.len()],
    missing: [Counter; MissingReason::COUNT],
    job_duration: Histogram,
    first_return: Histogram,
}

/// Per-record counts, updated by the `run` handler for every record it emits.
#[derive(Debug)]
pub struct RecordMetrics {
    by_function: PerValue<FunctionSeries>,
    state_failures: [Counter; Category::COUNT],
    fallout: Counter,
    render_failures: Counter,
    runs_refused: Counter,
    gaps: [Counter; GapReason::COUNT],
    records: [Counter; RecordKind::COUNT],
    incidents_open: [Gauge; Category::COUNT],
    /// The open incidents counted in `incidents_open` (their records may come
    /// again: revisions, and re-announcements after a restart).
    open_incident_ids: std::sync::Mutex<HashMap<String, Category>>,
    incident_failures: Counter,
    pressure_open: Gauge,
    pressure_episodes: [Counter; PressureSignal::COUNT],
    missing_under_pressure: Counter,
    drifted_states: [Counter; 2],
    non_idempotent_now: Gauge,
}

impl RecordMetrics {
    /// `functions` gives the label values known now; their series are made at
    /// once, a learned one's when it is first counted.
    pub fn register(registry: &mut Registry, functions: &LabelValues) -> Self {
        let counters = |registry: &mut Registry, name: &str, help: &str| {
            let family = Family::<FunctionLabel, Counter>::default();
            registry.register(name, help, family.clone());
            family
        };
        let jobs_published = counters(
            registry,
            "saltsight_jobs_published",
            "Jobs published to minions, by function",
        );
        let expected_returns = counters(
            registry,
            "saltsight_expected_returns",
            "Returns expected of minions by published jobs that were judged, by function: the denominator of the share missing",
        );
        let late_returns = counters(
            registry,
            "saltsight_late_returns",
            "Returns that came after their job's deadline, by function",
        );
        let returns = Family::<FunctionOutcome, Counter>::default();
        registry.register(
            "saltsight_returns",
            "Minion returns to tracked jobs, by function and outcome (success: retcode 0, success not false, no state failed)",
            returns.clone(),
        );
        let jobs_completed = Family::<FunctionOutcome, Counter>::default();
        registry.register(
            "saltsight_jobs_completed",
            "Jobs judged at their deadline or last return, by function and outcome (success, failure, incomplete: none failed, some never returned)",
            jobs_completed.clone(),
        );
        let missing = Family::<FunctionReason, Counter>::default();
        registry.register(
            "saltsight_missing_returns",
            "Expected minions that did not return by the deadline, by function and reason",
            missing.clone(),
        );
        let histograms = |registry: &mut Registry, name: &str, help: &str, buckets: &[f64]| {
            let buckets = buckets.to_vec();
            let family = Family::<FunctionLabel, Histogram, _>::new_with_constructor(move || {
                Histogram::new(buckets.iter().copied())
            });
            registry.register(name, help, family.clone());
            family
        };
        let job_duration = histograms(
            registry,
            "saltsight_job_duration_seconds",
            "Publication to last return (or to the deadline), by function",
            &DURATION_BUCKETS,
        );
        let first_return = histograms(
            registry,
            "saltsight_job_first_return_seconds",
            "Publication to the first return, by function",
            &FIRST_RETURN_BUCKETS,
        );
        let by_function = PerValue::new(functions, move |function| {
            let one = || FunctionLabel {
                function: function.to_owned(),
            };
            let by = |family: &Family<FunctionOutcome, Counter>, outcome| {
                family.get_or_create_owned(&FunctionOutcome {
                    function: function.to_owned(),
                    outcome,
                })
            };
            FunctionSeries {
                jobs_published: jobs_published.get_or_create_owned(&one()),
                expected_returns: expected_returns.get_or_create_owned(&one()),
                late_returns: late_returns.get_or_create_owned(&one()),
                returns: OUTCOMES.map(|o| by(&returns, o)),
                jobs_completed: JOB_OUTCOMES.map(|o| by(&jobs_completed, o)),
                missing: MissingReason::ALL.map(|r| {
                    missing.get_or_create_owned(&FunctionReason {
                        function: function.to_owned(),
                        reason: r.as_str(),
                    })
                }),
                job_duration: job_duration.get_or_create_owned(&one()),
                first_return: first_return.get_or_create_owned(&one()),
            }
        });
        let single = |registry: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        Self {
            by_function,
            state_failures: closed(
                registry,
                "saltsight_state_failures",
                "Root-cause state failures (requisite fallout excluded), by category",
                "category",
                Category::NAMES,
            ),
            fallout: single(
                registry,
                "saltsight_state_fallout",
                "States that failed only because a requisite did",
            ),
            render_failures: single(
                registry,
                "saltsight_render_failures",
                "SLS render failures, one per minion and job",
            ),
            runs_refused: single(
                registry,
                "saltsight_state_runs_refused",
                "State runs a minion refused because it was already running one",
            ),
            gaps: closed(
                registry,
                "saltsight_bus_gaps",
                "Stretches in which events may have been missed, by reason",
                "reason",
                GapReason::NAMES,
            ),
            records: closed(
                registry,
                "saltsight_records",
                "Records emitted, by kind",
                "kind",
                RecordKind::NAMES,
            ),
            incidents_open: closed(
                registry,
                "saltsight_external_incidents_open",
                "External incidents open (one target failing on several minions), by the category of their first failure",
                "category",
                Category::NAMES,
            ),
            open_incident_ids: std::sync::Mutex::default(),
            incident_failures: {
                let counter = Counter::default();
                registry.register(
                    "saltsight_incident_failures",
                    "Root-cause state failures that are part of an external incident",
                    counter.clone(),
                );
                counter
            },
            drifted_states: closed(
                registry,
                "saltsight_drifted_states",
                "States that drifted from the commit their minion had applied: corrected by a run, or detected by a test=True run",
                "change",
                ["corrected", "detected"],
            ),
            non_idempotent_now: {
                let gauge = Gauge::default();
                registry.register(
                    "saltsight_non_idempotent_states",
                    "States judged non-idempotent now (they change on every run under one commit; their changes are not drift)",
                    gauge.clone(),
                );
                gauge
            },
            pressure_open: {
                let gauge = Gauge::default();
                registry.register(
                    "saltsight_master_pressure",
                    "1 while a master_pressure episode is open (the master saturated), else 0",
                    gauge.clone(),
                );
                gauge
            },
            pressure_episodes: closed(
                registry,
                "saltsight_master_pressure_episodes",
                "master_pressure episodes opened, by each signal over its threshold at the opening",
                "signal",
                PressureSignal::NAMES,
            ),
            missing_under_pressure: {
                let counter = Counter::default();
                registry.register(
                    "saltsight_missing_returns_during_pressure",
                    "Missing-return verdicts given while the master was saturated (during_master_pressure)",
                    counter.clone(),
                );
                counter
            },
        }
    }

    /// One record; `functions` gives its function's label value (learning it
    /// if there is room).
    pub fn record(&mut self, record: &Record, functions: &mut LabelValues) {
        self.records[record.kind.index()].inc();
        match &record.body {
            RecordBody::JobPublished(p) => {
                self.by_function.of(functions, &p.fun).jobs_published.inc();
            }
            RecordBody::MinionReturn(r) => {
                let f = self
                    .by_function
                    .of(functions, r.fun.as_deref().unwrap_or_default());
                f.returns[usize::from(!r.succeeded)].inc();
            }
            RecordBody::LateReturn(r) => {
                let f = self
                    .by_function
                    .of(functions, r.fun.as_deref().unwrap_or_default());
                f.late_returns.inc();
                f.returns[usize::from(!r.succeeded)].inc();
            }
            RecordBody::MinionMissing(m) => {
                self.by_function.of(functions, &m.fun).missing[m.reason.index()].inc();
                if m.during_master_pressure.is_some() {
                    self.missing_under_pressure.inc();
                }
            }
            // Amendments (late returns) are counted as returns, not as jobs again.
            RecordBody::JobCompleted(c) if c.revision == 0 => {
                let f = self.by_function.of(functions, &c.fun);
                let outcome = if c.failed > 0 {
                    1
                } else if c.returned < c.expected {
                    2
                } else {
                    0
                };
                f.jobs_completed[outcome].inc();
                // Minions judged: returned or missing (an evicted job's pending
                // minions are neither). Scheduled and salt-call runs expect only
                // their own return, which came: counting them would dilute the
                // share missing.
                if !matches!(c.context.run_kind, RunKind::Scheduled | RunKind::Call) {
                    let missing: u32 = c.missing.values().sum();
                    f.expected_returns.inc_by(u64::from(c.returned + missing));
                }
                f.job_duration.observe(c.duration_ms as f64 / 1e3);
                if let Some(first) = c.first_return_ms {
                    f.first_return.observe(first as f64 / 1e3);
                }
            }
            RecordBody::StateFailure(s) => {
                self.state_failures[s.cause.category.index()].inc();
                self.fallout.inc_by(u64::from(s.fallout));
                if s.incident.is_some() {
                    self.incident_failures.inc();
                }
            }
            RecordBody::ExternalIncident(i) => {
                // The stage bounds how many are open; so does this map.
                let mut open = self
                    .open_incident_ids
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match i.status {
                    EpisodeStatus::Open => {
                        if open.insert(i.incident.clone(), i.category).is_none() {
                            self.incidents_open[i.category.index()].inc();
                        }
                    }
                    EpisodeStatus::Closed => {
                        if let Some(category) = open.remove(&i.incident) {
                            self.incidents_open[category.index()].dec();
                        }
                    }
                }
            }
            RecordBody::MasterPressure(p) => match p.status {
                EpisodeStatus::Open => {
                    self.pressure_open.set(1);
                    if p.revision == 0 {
                        for figure in &p.signals {
                            self.pressure_episodes[figure.signal.index()].inc();
                        }
                    }
                }
                EpisodeStatus::Closed => {
                    self.pressure_open.set(0);
                }
            },
            RecordBody::RenderFailure(f) if f.cause.category == Category::AlreadyRunning => {
                self.runs_refused.inc();
            }
            RecordBody::RenderFailure(_) => {
                self.render_failures.inc();
            }
            RecordBody::BusGap(g) => {
                if let Ok(reason) = g.reason.parse::<GapReason>() {
                    self.gaps[reason.index()].inc();
                }
            }
            RecordBody::Drift(d) => {
                for state in &d.states {
                    let change = usize::from(state.change == ChangeKind::Detected);
                    self.drifted_states[change].inc();
                }
            }
            RecordBody::NonIdempotent(n) => match n.status {
                SettleStatus::NeverSettles => {
                    self.non_idempotent_now.inc();
                }
                SettleStatus::Settled => {
                    self.non_idempotent_now.dec();
                }
            },
            // Rollouts have their own family set (`metrics::rollouts`).
            RecordBody::JobCompleted(_)
            | RecordBody::FailureGroup(_)
            | RecordBody::ConfigChange(_)
            | RecordBody::Rollout(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::metrics::LabelChoice as Choice;

    fn functions(listed: &[&str]) -> LabelValues {
        let listed = listed.iter().map(|f| (*f).to_owned()).collect();
        LabelValues::new(&Choice::Listed(listed), Counter::default())
    }

    fn completed(run_kind: RunKind, returned: u32, missing: &[(MissingReason, u32)]) -> Record {
        let body = crate::record::JobCompleted {
            jid: "1".into(),
            fun: "test.ping".into(),
            tgt: Vec::new(),
            expected: 99,
            returned,
            succeeded: returned,
            failed: 0,
            missing: missing.iter().copied().collect(),
            published_at: crate::time::Stamp(0),
            duration_ms: 0,
            first_return_ms: None,
            revision: 0,
            evicted: false,
            during_master_pressure: None,
            context: crate::record::JobContext {
                run_kind,
                ..Default::default()
            }
            .into(),
            batch: None,
        };
        crate::record::RecordFactory::new("m").make(
            crate::time::Stamp(0),
            &["1"],
            RecordBody::JobCompleted(body),
        )
    }

    /// The share-missing alert's denominator: minions judged (returned or
    /// missing, not those an evicted job left unjudged), published jobs only.
    #[test]
    fn expected_returns_count_the_minions_judged_of_published_jobs() {
        let mut registry = Registry::default();
        let mut functions = functions(&["test.ping"]);
        let mut metrics = RecordMetrics::register(&mut registry, &functions);
        let completed_run = completed(
            RunKind::Adhoc,
            7,
            &[
                (MissingReason::NoResponse, 2),
                (MissingReason::UnknownGap, 1),
            ],
        );
        metrics.record(&completed_run, &mut functions);
        metrics.record(&completed(RunKind::Scheduled, 1, &[]), &mut functions);
        metrics.record(&completed(RunKind::Call, 1, &[]), &mut functions);
        let test_ping = functions.of("test.ping");
        let series = metrics.by_function.get(&functions, test_ping);
        assert_eq!(series.expected_returns.get(), 10);
    }

    fn render_failure(category: Category) -> Record {
        let cause = crate::record::Classification {
            category,
            ..crate::record::Classification::render()
        };
        let body = crate::record::RenderFailure {
            jid: "1".into(),
            minion: "web1".into(),
            fun: "state.apply".into(),
            saltenv: None,
            sls: None,
            line: None,
            column: None,
            pillar: false,
            message: String::new(),
            message_len: 0,
            cause,
            fingerprint: "f".into(),
            context: Default::default(),
            correlation: Default::default(),
        };
        crate::record::RecordFactory::new("m").make(
            crate::time::Stamp(0),
            &["1"],
            RecordBody::RenderFailure(Box::new(body)),
        )
    }

    /// A run refused because one was running is not a render failure: the
    /// SaltRenderFailures alert must not fire on it.
    #[test]
    fn a_refused_run_is_counted_apart_from_render_failures() {
        let mut registry = Registry::default();
        let mut functions = functions(&[]);
        let mut metrics = RecordMetrics::register(&mut registry, &functions);
        for category in [
            Category::Render,
            Category::AlreadyRunning,
            Category::AlreadyRunning,
        ] {
            metrics.record(&render_failure(category), &mut functions);
        }
        assert_eq!(
            (metrics.render_failures.get(), metrics.runs_refused.get()),
            (1, 2)
        );
    }
}
