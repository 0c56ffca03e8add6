//! salt-exporter compatibility (`metrics.salt_exporter_compat`): every series
//! kpetremann/salt-exporter v0.13.0 exposes, with its names, types, labels and
//! help texts, counted from the same bus events it counts, so its dashboards
//! and alerts keep working after a switch. Its switches are
//! `[metrics.salt_exporter]` (`config::salt_exporter`).
//!
//! From jobs and runners: `salt_new_job_total`, `salt_expected_responses_total`
//! (function, state), `salt_function_responses_total` and
//! `salt_scheduled_job_return_total` (function, state, success; minion with
//! `minion_label`), `salt_responses_total` (minion, success),
//! `salt_function_status` (minion, function, state; as its filters say),
//! `salt_job_duration_seconds` (function, state; the summed state durations).
//! From any event naming a minion: `salt_responses_last_received_response`;
//! from status beacons and accepted keys: `salt_health_last_heartbeat`, and
//! `salt_health_minions_total` (the keys in `<pki_dir>/minions`, listed at
//! start and again when a `salt/auth` or `salt/key` event says they may have
//! changed: no timer).
//!
//! Unlike salt-exporter, labels stay bounded: `function` shares saltsight's
//! values (`metrics::labels`), `state` at most [`MAX_STATES`] learned values,
//! minions `metrics.max_minions`; every refusal is counted. One difference on
//! purpose: `salt_job_duration_seconds` is in seconds (salt-exporter exports
//! Salt's milliseconds under that name).

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::time::{SystemTime, UNIX_EPOCH};

use foldhash::{HashSet, HashSetExt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::Value;

use super::labels::{Choice, LabelValues};
use crate::config::salt_exporter::{SaltExporterConfig, matches};
use crate::event::args;
use crate::event::states::States;
use crate::event::{Body, Event, Raw};
use crate::master_keys;

/// Distinct `state` label values learned at most.
pub const MAX_STATES: usize = 500;

/// What salt-exporter names a runner's minion (runner events carry no `id`).
const RUNNER_MINION: &str = "master";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FunctionState {
    function: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MinionSuccess {
    minion: String,
    success: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MinionFunctionState {
    minion: String,
    function: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MinionLabel {
    minion: String,
}

/// Labels with an optional `minion` (salt-exporter's `add-minion-label`).
type Labels = Vec<(&'static str, String)>;

/// salt-exporter's `state` label (its `ExtractState`): for `state.sls` and
/// `state.apply` the first argument if it is text, its `mods` if it is a map
/// (else empty), `highstate` for a `state.apply` without arguments; for
/// `state.single` the first argument or its `fun`; `highstate` for
/// `state.highstate`; empty for any other function.
pub fn state_label(fun: &str, arg: Option<Raw<'_>>) -> String {
    let first = || match args::raw_to_json(arg) {
        Some(Value::Array(items)) => items.into_iter().next(),
        _ => None,
    };
    let text_or_field = |item: Value, key: &str| match item {
        Value::String(text) => text,
        Value::Object(mut map) => match map.remove(key) {
            Some(Value::String(text)) => text,
            _ => String::new(),
        },
        _ => String::new(),
    };
    match fun {
        "state.sls" | "state.apply" => match first() {
            Some(item) => text_or_field(item, "mods"),
            None if fun == "state.apply" => "highstate".into(),
            None => String::new(),
        },
        "state.single" => first()
            .map(|item| text_or_field(item, "fun"))
            .unwrap_or_default(),
        "state.highstate" => "highstate".into(),
        _ => String::new(),
    }
}

/// salt-exporter's `test=True`/`mock=True` check: the first map among the
/// arguments with that key holding a boolean.
fn bool_kwarg(arg: Option<Raw<'_>>, name: &str) -> bool {
    let Some(Value::Array(items)) = args::raw_to_json(arg) else {
        return false;
    };
    items
        .iter()
        .find_map(|item| item.as_object()?.get(name)?.as_bool())
        .unwrap_or(false)
}

/// A return, as salt-exporter reads it.
struct Response<'e> {
    fun: &'e str,
    minion: &'e str,
    arg: Option<Raw<'e>>,
    success: bool,
    scheduled: bool,
    /// Its return's states, when it is a state run.
    states: Option<&'e States<'e>>,
}

/// The accepted keys, listed again when the directory changed.
#[derive(Debug)]
struct Keys {
    dir: PathBuf,
    modified: Option<SystemTime>,
    listed: HashSet<Box<str>>,
}

#[derive(Debug)]
pub struct SaltExporterMetrics {
    config: SaltExporterConfig,
    new_job: Family<FunctionState, Counter>,
    expected: Family<FunctionState, Counter>,
    responses: Family<Labels, Counter>,
    scheduled: Family<Labels, Counter>,
    minion_responses: Family<MinionSuccess, Counter>,
    status: Family<MinionFunctionState, Gauge>,
    duration: Family<Labels, Gauge<f64, AtomicU64>>,
    last_response: Family<MinionLabel, Gauge>,
    heartbeat: Family<MinionLabel, Gauge>,
    minions_total: Gauge,
    keys: Option<Keys>,
    states: LabelValues,
    minions: HashSet<String>,
    max_minions: usize,
    refused: Counter,
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl SaltExporterMetrics {
    /// `refused` counts minions refused series, `states_refused` state label
    /// values refused (both registered by the caller).
    pub fn register(
        registry: &mut Registry,
        config: SaltExporterConfig,
        max_minions: usize,
        refused: Counter,
        states_refused: Counter,
    ) -> Self {
        // Names and help texts are salt-exporter's (internal/metrics/registry.go).
        fn add<M: prometheus_client::registry::Metric + Clone>(
            registry: &mut Registry,
            name: &str,
            help: &str,
            metric: M,
        ) -> M {
            registry.register(name, help, metric.clone());
            metric
        }
        let states = Choice::Learned {
            seed: vec!["highstate".into()],
            max: MAX_STATES,
        };
        let keys = config.minion_keys.clone().map(|dir| Keys {
            dir,
            modified: None,
            listed: HashSet::new(),
        });
        let mut metrics = Self {
            new_job: add(
                registry,
                "salt_new_job",
                "Total number of new jobs processed",
                Family::default(),
            ),
            expected: add(
                registry,
                "salt_expected_responses",
                "Total number of expected minions responses",
                Family::default(),
            ),
            responses: add(
                registry,
                "salt_function_responses",
                "Total number of responses per function processed",
                Family::default(),
            ),
            scheduled: add(
                registry,
                "salt_scheduled_job_return",
                "Total number of scheduled job responses",
                Family::default(),
            ),
            minion_responses: add(
                registry,
                "salt_responses",
                "Total number of responses",
                Family::default(),
            ),
            status: add(
                registry,
                "salt_function_status",
                "Last function/state success, 0=Failed, 1=Success",
                Family::default(),
            ),
            duration: add(
                registry,
                "salt_job_duration_seconds",
                "Last duration of a Salt job in seconds",
                Family::default(),
            ),
            last_response: add(
                registry,
                "salt_responses_last_received_response",
                "Last event received from minion, Unix timestamp",
                Family::default(),
            ),
            heartbeat: add(
                registry,
                "salt_health_last_heartbeat",
                "Last status beacon received. Unix timestamp",
                Family::default(),
            ),
            minions_total: add(
                registry,
                "salt_health_minions_total",
                "Total number of observed minions via status beacon",
                Gauge::default(),
            ),
            config,
            keys,
            states: LabelValues::new(&states, states_refused),
            minions: HashSet::new(),
            max_minions,
            refused,
        };
        metrics.refresh_keys();
        metrics
    }

    /// Lists the accepted keys again if their directory changed (one `stat`
    /// when it did not): a new key gets a heartbeat now, a removed one loses
    /// its minion's series, as salt-exporter's key watcher does.
    fn refresh_keys(&mut self) {
        let Some(keys) = &mut self.keys else {
            return;
        };
        let modified = std::fs::metadata(&keys.dir).and_then(|m| m.modified()).ok();
        if modified.is_some() && modified == keys.modified {
            return;
        }
        keys.modified = modified;
        let Ok(listed) = master_keys::accepted(&keys.dir, self.max_minions) else {
            // Unreadable (or gone): keep what was listed; said by check-config.
            return;
        };
        let now = now_unix();
        let gone: Vec<Box<str>> = keys.listed.difference(&listed).cloned().collect();
        let new: Vec<Box<str>> = listed.difference(&keys.listed).cloned().collect();
        keys.listed = listed;
        self.minions_total.set(keys.listed.len() as i64);
        for minion in gone {
            let label = MinionLabel {
                minion: minion.into(),
            };
            self.heartbeat.remove(&label);
            self.last_response.remove(&label);
        }
        if self.config.enabled("salt_health_last_heartbeat") {
            for minion in new {
                if self.admit(&minion) {
                    self.heartbeat
                        .get_or_create(&MinionLabel {
                            minion: minion.into(),
                        })
                        .set(now);
                }
            }
        }
    }

    fn bounded_state(&mut self, state: String) -> String {
        if state.is_empty() {
            return state;
        }
        let id = self.states.of(&state);
        self.states.name(id).to_owned()
    }

    fn admit(&mut self, minion: &str) -> bool {
        if self.minions.contains(minion) {
            return true;
        }
        if self.minions.len() >= self.max_minions {
            self.refused.inc();
            return false;
        }
        self.minions.insert(minion.to_owned());
        true
    }

    /// Whether salt-exporter's global filters drop this job's events.
    fn ignored(&self, arg: Option<Raw<'_>>) -> bool {
        (self.config.ignore_test && bool_kwarg(arg, "test"))
            || (self.config.ignore_mock && bool_kwarg(arg, "mock"))
    }

    fn seen(&mut self, minion: &str) {
        if self.config.enabled("salt_responses_last_received_response") && self.admit(minion) {
            self.last_response
                .get_or_create(&MinionLabel {
                    minion: minion.to_owned(),
                })
                .set(now_unix());
        }
    }

    /// One event; `functions` gives the `function` label (the same values as
    /// saltsight's own families).
    pub fn event(&mut self, event: &Event<'_>, functions: &mut LabelValues) {
        let mut function = |fun: &str| {
            let id = functions.of(fun);
            functions.name(id).to_owned()
        };
        match &event.body {
            Body::JobNew(p) if !self.ignored(p.arg) => {
                let fun = p.fun.as_ref().map(|f| f.as_str()).unwrap_or_default();
                let minions = p.minions.as_ref().map_or(0, crate::event::TextList::len);
                let labels = FunctionState {
                    function: function(fun),
                    state: self.bounded_state(state_label(fun, p.arg)),
                };
                self.published(&labels, minions);
            }
            Body::RunNew(r) if !self.ignored(r.fun_args) => {
                self.seen(RUNNER_MINION);
                let fun = r.fun.as_ref().map(|f| f.as_str()).unwrap_or_default();
                let labels = FunctionState {
                    function: function(fun),
                    state: String::new(),
                };
                self.published(&labels, 0);
            }
            Body::JobReturn(r) if !self.ignored(r.fun_args) => {
                let fun = r.fun.as_ref().map(|f| f.as_str()).unwrap_or_default();
                let states = r.states();
                let failed_state = states.is_some_and(|s| s.counts().failed > 0);
                let response = Response {
                    fun,
                    minion: r.minion.as_str(),
                    arg: r.fun_args,
                    success: r.retcode.unwrap_or(0) == 0
                        && r.success != Some(false)
                        && !failed_state,
                    scheduled: r.schedule.as_ref().is_some_and(|s| !s.as_str().is_empty()),
                    states,
                };
                let function = function(fun);
                self.response(&response, function);
            }
            Body::RunReturn(r) if !self.ignored(r.fun_args) => {
                let fun = r.fun.as_ref().map(|f| f.as_str()).unwrap_or_default();
                let states = r.ret.and_then(|raw| States::of(raw.0));
                let response = Response {
                    fun,
                    minion: RUNNER_MINION,
                    arg: r.fun_args,
                    success: r.success != Some(false),
                    scheduled: false,
                    states: states.as_ref(),
                };
                let function = function(fun);
                self.response(&response, function);
            }
            Body::RunArgs(_) => self.seen(RUNNER_MINION),
            Body::JobProgress(p) => self.seen(p.minion.as_str()),
            Body::Beacon(b) => {
                let minion = b.minion.as_str();
                self.seen(minion);
                if b.name.as_str() == "status"
                    && self.config.enabled("salt_health_last_heartbeat")
                    && self.admit(minion)
                {
                    self.heartbeat
                        .get_or_create(&MinionLabel {
                            minion: minion.to_owned(),
                        })
                        .set(now_unix());
                }
            }
            Body::Auth(_) | Body::Key(_) => self.refresh_keys(),
            _ => {}
        }
    }

    fn published(&mut self, labels: &FunctionState, minions: usize) {
        if self.config.enabled("salt_new_job_total") {
            self.new_job.get_or_create(labels).inc();
        }
        if self.config.enabled("salt_expected_responses_total") {
            self.expected.get_or_create(labels).inc_by(minions as u64);
        }
    }

    fn response(&mut self, response: &Response<'_>, function: String) {
        let minion = response.minion;
        self.seen(minion);
        let state = self.bounded_state(state_label(response.fun, response.arg));
        let success = if response.success { "true" } else { "false" };
        let admitted = self.admit(minion);
        let labels = |with: &[(&'static str, &str)]| -> Labels {
            let mut labels: Labels = Vec::with_capacity(4);
            if self.config.minion_label {
                labels.push(("minion", minion.to_owned()));
            }
            labels.push(("function", function.clone()));
            labels.push(("state", state.clone()));
            labels.extend(with.iter().map(|(k, v)| (*k, (*v).to_owned())));
            labels
        };
        // A minion label needs room for the minion.
        let labelled = admitted || !self.config.minion_label;
        let (family, name) = if response.scheduled {
            (&self.scheduled, "salt_scheduled_job_return_total")
        } else {
            (&self.responses, "salt_function_responses_total")
        };
        if labelled && self.config.enabled(name) {
            family.get_or_create(&labels(&[("success", success)])).inc();
        }
        if labelled && self.config.enabled("salt_job_duration_seconds") {
            if let Some(ms) = response.states.and_then(States::summed_duration_ms) {
                self.duration.get_or_create(&labels(&[])).set(ms / 1e3);
            }
        }
        if !admitted {
            return;
        }
        if self.config.enabled("salt_responses_total") {
            self.minion_responses
                .get_or_create(&MinionSuccess {
                    minion: minion.to_owned(),
                    success,
                })
                .inc();
        }
        if self.config.enabled("salt_function_status")
            && matches(&self.config.status_functions, response.fun)
            && matches(&self.config.status_states, &state)
        {
            self.status
                .get_or_create(&MinionFunctionState {
                    minion: minion.to_owned(),
                    function,
                    state,
                })
                .set(i64::from(response.success));
        }
    }
}

#[cfg(test)]
mod tests;
