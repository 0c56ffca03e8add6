//! salt-exporter compatibility (`metrics.salt_exporter_compat`): the metric names
//! and labels of kpetremann/salt-exporter, counted from the same bus events it
//! counts, so its dashboards and alerts keep working after a switch.
//!
//! Mirrored: `salt_new_job_total`, `salt_expected_responses_total`
//! (function, state), `salt_function_responses_total` and
//! `salt_scheduled_job_return_total` (function, state, success),
//! `salt_responses_total` (minion, success) and `salt_function_status` (minion,
//! function, state; `state.highstate`/`highstate` only, as salt-exporter's
//! default filter). Not mirrored: `salt_job_duration_seconds` (a gauge of summed
//! state durations; `saltsight_job_duration_seconds` is the histogram) and the
//! `salt_health_*` gauges (they watch the PKI directory and status beacons).
//!
//! Unlike salt-exporter, labels stay bounded: `function` is the configured
//! allow-list plus `other`, `state` at most [`MAX_STATES`] values plus `other`,
//! and minions share `metrics.max_minions` (refusals counted in
//! `saltsight_metric_series_refused_total`).

use std::collections::HashSet;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::catalog::FunctionLabels;
use crate::event::{Body, Event, Raw};
use crate::event::{args, states};

pub const MAX_STATES: usize = 500;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FunctionState {
    function: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FunctionStateSuccess {
    function: String,
    state: String,
    success: &'static str,
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

#[derive(Debug)]
pub struct SaltExporterMetrics {
    functions: FunctionLabels,
    new_job: Family<FunctionState, Counter>,
    expected: Family<FunctionState, Counter>,
    responses: Family<FunctionStateSuccess, Counter>,
    scheduled: Family<FunctionStateSuccess, Counter>,
    minion_responses: Family<MinionSuccess, Counter>,
    status: Family<MinionFunctionState, Gauge>,
    states: HashSet<String>,
    minions: HashSet<String>,
    max_minions: usize,
    refused: Counter,
}

/// salt-exporter's `state` label: the SLS of `state.sls`/`state.apply`
/// (`highstate` for a bare `state.apply`), `state.single`'s function, else empty.
pub fn state_label(fun: &str, arg: Option<Raw<'_>>) -> String {
    let mods = || {
        args::first_arg(arg).or_else(|| match args::kwarg(arg, "mods") {
            Some(serde_json::Value::String(s)) => Some(s),
            _ => None,
        })
    };
    // A label holds an SLS list, nothing else: a first argument that is not one
    // (a typo, or a secret passed where it does not belong) is "other".
    let sls = |text: String| {
        let plausible = text.len() <= 200
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-,/".contains(c));
        if plausible { text } else { "other".into() }
    };
    match fun {
        "state.sls" => mods().map(sls).unwrap_or_default(),
        "state.apply" => mods().map_or_else(|| "highstate".into(), sls),
        "state.highstate" => "highstate".into(),
        "state.single" => args::first_arg(arg)
            .or_else(|| match args::kwarg(arg, "fun") {
                Some(serde_json::Value::String(s)) => Some(s),
                _ => None,
            })
            .map(sls)
            .unwrap_or_default(),
        _ => String::new(),
    }
}

impl SaltExporterMetrics {
    pub fn register(
        registry: &mut Registry,
        functions: FunctionLabels,
        max_minions: usize,
        refused: Counter,
    ) -> Self {
        let new_job = Family::default();
        registry.register(
            "salt_new_job",
            "Total number of new jobs processed",
            new_job.clone(),
        );
        let expected = Family::default();
        registry.register(
            "salt_expected_responses",
            "Total number of expected minion responses",
            expected.clone(),
        );
        let responses = Family::default();
        registry.register(
            "salt_function_responses",
            "Total number of responses per function processed",
            responses.clone(),
        );
        let scheduled = Family::default();
        registry.register(
            "salt_scheduled_job_return",
            "Counts the scheduled job returns",
            scheduled.clone(),
        );
        let minion_responses = Family::default();
        registry.register(
            "salt_responses",
            "Total number of responses",
            minion_responses.clone(),
        );
        let status = Family::default();
        registry.register(
            "salt_function_status",
            "Last function/state success, 0=Failed, 1=Success",
            status.clone(),
        );
        Self {
            functions,
            new_job,
            expected,
            responses,
            scheduled,
            minion_responses,
            status,
            states: HashSet::new(),
            minions: HashSet::new(),
            max_minions,
            refused,
        }
    }

    fn bounded_state(&mut self, state: String) -> String {
        if state.is_empty() || self.states.contains(&state) {
            return state;
        }
        if self.states.len() >= MAX_STATES {
            return "other".into();
        }
        self.states.insert(state.clone());
        state
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

    fn function(&self, fun: &str) -> String {
        self.functions.names()[self.functions.of(fun)].clone()
    }

    pub fn event(&mut self, event: &Event<'_>) {
        match &event.body {
            Body::JobNew(p) => {
                let fun = p.fun.as_ref().map(|f| f.as_str()).unwrap_or_default();
                let labels = FunctionState {
                    function: self.function(fun),
                    state: self.bounded_state(state_label(fun, p.arg)),
                };
                self.new_job.get_or_create(&labels).inc();
                let minions = p.minions.as_ref().map_or(0, |m| m.0.len());
                self.expected.get_or_create(&labels).inc_by(minions as u64);
            }
            Body::RunNew(r) => {
                let fun = r.fun.as_ref().map(|f| f.as_str()).unwrap_or_default();
                let labels = FunctionState {
                    function: self.function(fun),
                    state: String::new(),
                };
                self.new_job.get_or_create(&labels).inc();
            }
            Body::JobReturn(r) => {
                let fun = r.fun.as_ref().map(|f| f.as_str()).unwrap_or_default();
                let failed_state = r
                    .ret
                    .and_then(|ret| states::count_states(ret.0))
                    .is_some_and(|c| c.failed > 0);
                let success =
                    r.retcode.unwrap_or(0) == 0 && r.success != Some(false) && !failed_state;
                let success_label = if success { "true" } else { "false" };
                let function = self.function(fun);
                let state = self.bounded_state(state_label(fun, r.fun_args));
                let labels = FunctionStateSuccess {
                    function: function.clone(),
                    state: state.clone(),
                    success: success_label,
                };
                if r.schedule.as_ref().is_some_and(|s| !s.as_str().is_empty()) {
                    self.scheduled.get_or_create(&labels).inc();
                } else {
                    self.responses.get_or_create(&labels).inc();
                }
                let minion = r.minion.as_str();
                if self.admit(minion) {
                    self.minion_responses
                        .get_or_create(&MinionSuccess {
                            minion: minion.to_owned(),
                            success: success_label,
                        })
                        .inc();
                    if fun == "state.highstate" && state == "highstate" {
                        self.status
                            .get_or_create(&MinionFunctionState {
                                minion: minion.to_owned(),
                                function,
                                state,
                            })
                            .set(i64::from(success));
                    }
                }
            }
            _ => {}
        }
    }
}
