//! `[pressure]`: when the master itself counts as saturated (the `pressure`
//! stage), and where its processes are found.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::defaults::{
    DEFAULT_PRESSURE_BUS_LAG, DEFAULT_PRESSURE_REQUEST_TIME, DEFAULT_PRESSURE_SAMPLE_INTERVAL,
    DEFAULT_PRESSURE_SUSTAIN, DEFAULT_PRESSURE_WORKER_CPU,
};
use super::duration::positive_or;

/// `[pressure]` as written.
#[derive(Debug, Default, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PressureSection {
    pub sample_processes: Option<bool>,
    pub pidfile: Option<PathBuf>,
    pub sample_interval: Option<String>,
    pub sustain: Option<String>,
    pub worker_cpu: Option<f64>,
    pub bus_lag: Option<String>,
    pub request_time: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PressureConfig {
    /// Read the master's processes from /proc (the worker CPU signal).
    pub sample_processes: bool,
    /// The master's pidfile: `pressure.pidfile`, else the master config's.
    pub pidfile: PathBuf,
    pub sample_interval: Duration,
    /// A signal must stay over its threshold this long to open an episode,
    /// and every signal under 80% of it this long to close one.
    pub sustain: Duration,
    /// Share of a core each request worker (MWorker) is busy, on average.
    pub worker_cpu: f64,
    /// p99 of bus lag (receipt minus `_stamp`).
    pub bus_lag: Duration,
    /// Mean time of `_return` / `_pillar` requests in Salt's `salt/stats`.
    pub request_time: Duration,
}

impl Default for PressureConfig {
    fn default() -> Self {
        Self {
            sample_processes: true,
            pidfile: PathBuf::from("/var/run/salt-master.pid"),
            sample_interval: DEFAULT_PRESSURE_SAMPLE_INTERVAL,
            sustain: DEFAULT_PRESSURE_SUSTAIN,
            worker_cpu: DEFAULT_PRESSURE_WORKER_CPU,
            bus_lag: DEFAULT_PRESSURE_BUS_LAG,
            request_time: DEFAULT_PRESSURE_REQUEST_TIME,
        }
    }
}

/// `[pressure]`, with the master's own pidfile (from its config) unless one
/// is given.
pub fn resolve(
    section: &PressureSection,
    master_pidfile: Option<PathBuf>,
    errors: &mut Vec<String>,
) -> PressureConfig {
    let d = PressureConfig::default();
    let worker_cpu = match section.worker_cpu {
        None => d.worker_cpu,
        Some(v) if v > 0.0 && v.is_finite() => v,
        Some(v) => {
            errors.push(format!(
                "pressure.worker_cpu is {v}; it must be above 0 (a share of a core, e.g. 0.9)"
            ));
            d.worker_cpu
        }
    };
    let duration =
        |key: &str, value: &Option<String>, default: Duration, errors: &mut Vec<String>| {
            positive_or(
                &format!("pressure.{key}"),
                value.as_deref(),
                default,
                errors,
            )
        };
    PressureConfig {
        sample_processes: section.sample_processes.unwrap_or(d.sample_processes),
        pidfile: section
            .pidfile
            .clone()
            .or(master_pidfile)
            .unwrap_or(d.pidfile),
        sample_interval: duration(
            "sample_interval",
            &section.sample_interval,
            d.sample_interval,
            errors,
        ),
        sustain: duration("sustain", &section.sustain, d.sustain, errors),
        worker_cpu,
        bus_lag: duration("bus_lag", &section.bus_lag, d.bus_lag, errors),
        request_time: duration(
            "request_time",
            &section.request_time,
            d.request_time,
            errors,
        ),
    }
}
