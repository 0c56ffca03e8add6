//! Master pressure: whether the master itself is saturated, from three signals,
//! each with its threshold (`[pressure]`):
//!
//! - `worker_cpu`: the request workers' (MWorker) CPU, a share of a core each
//!   on average, from two samples of the master's processes;
//! - `bus_lag`: the p99 of receipt minus `_stamp` over the last `sustain`;
//! - `request_time`: the mean time of `_return` / `_pillar` requests in Salt's
//!   own `salt/stats` events (`master_stats: True`), a worker's lower of its
//!   last two reports, so one slow request alone does not count.
//!
//! A signal over its threshold for `sustain` opens a `master_pressure`
//! episode; it closes once every signal has stayed under 80% of its threshold
//! for `sustain` (hysteresis). Verdicts and jobs whose window overlaps an
//! episode carry its id. No IO here: the agent hands in the process samples
//! and the lags.

pub mod saved;

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt};

use crate::config::pressure::PressureConfig;
use crate::event::Event;
use crate::event::json::to_json;
use crate::event::states::fields;
use crate::master_processes::MasterSample;
use crate::record::episodes::EpisodeWindow;
use crate::record::{
    EpisodeStatus, MasterPressure, PressureSignal, Record, RecordBody, RecordFactory, SignalFigure,
    stable_hash,
};
use crate::time::Stamp;

/// A signal is calm again under this share of its threshold.
const RELEASE: f64 = 0.8;
/// Lags kept (the most recent; at the master's top rate a few seconds' worth).
const MAX_LAGS: usize = 8192;
/// Fewer lags than this in the window say nothing.
const MIN_LAGS: usize = 20;
/// Workers whose `salt/stats` are followed at most.
const MAX_WORKERS: usize = 1024;
/// A `salt/stats` report counts with fewer requests than this in it.
const MIN_RUNS: u64 = 3;
/// Closed episodes remembered, to mark the jobs that overlapped them.
const RECENT: usize = 64;
/// A worker's `salt/stats` reports count this long at least.
const STATS_STALE: std::time::Duration = std::time::Duration::from_secs(180);
/// The request kinds whose mean time is a signal.
const WATCHED_REQUESTS: &[&str] = &["_return", "_pillar"];

crate::counts! {
    /// The pressure stage's own figures, read at scrape.
    pub struct PressureStats {
        counter samples = "saltsight_master_samples",
            "Samples of the master's processes taken from /proc";
        counter sample_errors = "saltsight_master_sample_errors",
            "Samples of the master's processes that failed (no pidfile, not running, not visible: the log says which)";
        counter stats_events = "saltsight_master_stats_events",
            "salt/stats events read (the master's master_stats: True)";
        float worker_cpu = "saltsight_master_worker_cpu_ratio",
            "The master's request workers (MWorker): CPU as a share of a core each, on average, over the last sample interval";
        gauge workers = "saltsight_master_workers",
            "The master's request worker (MWorker) processes";
        gauge master_rss = "saltsight_master_resident_memory_bytes",
            "Resident memory of the salt-master process tree";
        float bus_lag_p99 = "saltsight_master_bus_lag_p99_seconds",
            "p99 of bus lag (receipt minus _stamp) over the last pressure.sustain";
        float request_time = "saltsight_master_request_mean_seconds",
            "The slowest worker's mean _return/_pillar request time in salt/stats (the lower of its last two reports)";
    }
}

/// One worker's last two `salt/stats` reports of the watched requests.
#[derive(Debug, Clone, Copy)]
struct WorkerReports {
    at: Stamp,
    latest: Option<f64>,
    previous: Option<f64>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Episode {
    record: MasterPressure,
}

pub struct Pressure {
    config: PressureConfig,
    records: RecordFactory,
    lags: VecDeque<(Stamp, f64)>,
    workers: HashMap<Box<str>, WorkerReports>,
    /// The last process sample: when, the workers' CPU seconds, how many.
    last_sample: Option<(Stamp, f64, u32)>,
    worker_cpu: Option<f64>,
    over_since: [Option<Stamp>; PressureSignal::COUNT],
    calm_since: Option<Stamp>,
    open: Option<Episode>,
    /// Closed episodes: id, opened, closed.
    recent: VecDeque<(String, Stamp, Stamp)>,
    /// Bumped whenever an episode opens or closes (or is restored): the
    /// windows the tracker holds are refreshed only then.
    changes: u64,
    pub stats: std::sync::Arc<PressureStats>,
}

impl Pressure {
    pub fn new(config: PressureConfig, records: RecordFactory) -> Self {
        Self {
            config,
            records,
            lags: VecDeque::new(),
            workers: HashMap::new(),
            last_sample: None,
            worker_cpu: None,
            over_since: [None; PressureSignal::COUNT],
            calm_since: None,
            open: None,
            recent: VecDeque::new(),
            changes: 0,
            stats: std::sync::Arc::default(),
        }
    }

    /// An event: Salt's own `salt/stats/<worker>` reports are read.
    pub fn on_event(&mut self, event: &Event<'_>, at: Stamp) {
        let Some(worker) = event.tag.strip_prefix("salt/stats/") else {
            return;
        };
        self.stats.stats_events.inc();
        let [stats] = fields(event.data, [b"stats"]);
        let Some(Ok(serde_json::Value::Object(stats))) = stats.map(to_json) else {
            return;
        };
        let worst = WATCHED_REQUESTS
            .iter()
            .filter_map(|cmd| stats.get(*cmd))
            .filter(|s| s["runs"].as_u64().unwrap_or(0) >= MIN_RUNS)
            .filter_map(|s| s["mean"].as_f64())
            .fold(None, |worst: Option<f64>, mean| {
                Some(worst.map_or(mean, |w| w.max(mean)))
            });
        if !self.workers.contains_key(worker) && self.workers.len() >= MAX_WORKERS {
            return;
        }
        let reports = self.workers.entry(worker.into()).or_insert(WorkerReports {
            at,
            latest: None,
            previous: None,
        });
        reports.previous = reports.latest;
        reports.latest = Some(worst.unwrap_or(0.0));
        reports.at = at;
    }

    /// One event's bus lag, in seconds.
    pub fn on_lag(&mut self, lag: f64, at: Stamp) {
        if self.lags.len() >= MAX_LAGS {
            self.lags.pop_front();
        }
        self.lags.push_back((at, lag.max(0.0)));
    }

    /// A sample of the master's processes (`None`: not taken, or failed), then
    /// every signal judged at `at`; an opening or a closing into `out`.
    pub fn on_sample(&mut self, sample: Option<&MasterSample>, at: Stamp, out: &mut Vec<Record>) {
        if let Some(sample) = sample {
            self.stats.samples.inc();
            let rss: u64 = sample.roles.values().map(|r| r.rss_bytes).sum();
            self.stats.master_rss.set(rss);
            let (cpu, workers) = sample
                .role("MWorker")
                .map_or((0.0, 0), |w| (w.cpu_seconds, w.processes));
            self.stats.workers.set(u64::from(workers));
            if let Some((then, cpu_then, workers_then)) = self.last_sample {
                let secs = at.micros_since(then) as f64 / 1e6;
                if secs > 0.0 && workers > 0 && workers == workers_then && cpu >= cpu_then {
                    self.worker_cpu = Some((cpu - cpu_then) / secs / f64::from(workers));
                }
            }
            self.last_sample = Some((at, cpu, workers));
        } else {
            self.worker_cpu = None;
            self.last_sample = None;
        }
        self.judge(at, out);
    }

    /// Each signal's figure now (`None`: nothing to tell), with its threshold.
    fn figures(&mut self, at: Stamp) -> [(PressureSignal, Option<f64>, f64); 3] {
        let window = self.config.sustain;
        while self.lags.front().is_some_and(|(t, _)| t.plus(window) < at) {
            self.lags.pop_front();
        }
        let bus_lag = (self.lags.len() >= MIN_LAGS).then(|| {
            let mut lags: Vec<f64> = self.lags.iter().map(|(_, l)| *l).collect();
            lags.sort_by(f64::total_cmp);
            lags[(lags.len() * 99 / 100).min(lags.len() - 1)]
        });
        // A worker's reports go stale after three sustain windows, or three of
        // Salt's default stats intervals (60 s), whichever is longer.
        let stale = (window * 3).max(STATS_STALE);
        let request_time = self
            .workers
            .values()
            .filter(|r| r.at.plus(stale) >= at)
            .filter_map(|r| Some(r.latest?.min(r.previous?)))
            .fold(None, |worst: Option<f64>, t| {
                Some(worst.map_or(t, |w| w.max(t)))
            });
        self.stats
            .worker_cpu
            .set_f64(self.worker_cpu.unwrap_or(0.0));
        self.stats.bus_lag_p99.set_f64(bus_lag.unwrap_or(0.0));
        self.stats.request_time.set_f64(request_time.unwrap_or(0.0));
        [
            (
                PressureSignal::WorkerCpu,
                self.worker_cpu,
                self.config.worker_cpu,
            ),
            (
                PressureSignal::BusLag,
                bus_lag,
                self.config.bus_lag.as_secs_f64(),
            ),
            (
                PressureSignal::RequestTime,
                request_time,
                self.config.request_time.as_secs_f64(),
            ),
        ]
    }

    fn judge(&mut self, at: Stamp, out: &mut Vec<Record>) {
        let figures = self.figures(at);
        let sustain = self.config.sustain;
        let mut firing = Vec::new();
        let mut calm = true;
        for (signal, value, threshold) in figures {
            let i = signal.index();
            match value {
                Some(v) if v >= threshold => {
                    let since = *self.over_since[i].get_or_insert(at);
                    if since.plus(sustain) <= at {
                        firing.push(figure(signal, v, threshold));
                    }
                    calm = false;
                }
                Some(v) => {
                    self.over_since[i] = None;
                    calm &= v < threshold * RELEASE;
                }
                None => self.over_since[i] = None,
            }
            if let (Some(episode), Some(v)) = (self.open.as_mut(), value) {
                let peaks = &mut episode.record.peaks;
                match peaks.iter_mut().find(|p| p.signal == signal) {
                    Some(peak) if v > peak.value => peak.value = v,
                    Some(_) => {}
                    None => peaks.push(figure(signal, v, threshold)),
                }
            }
        }
        match (&mut self.open, firing.is_empty(), calm) {
            (None, false, _) => {
                let id = format!(
                    "{:016x}",
                    stable_hash([b"pressure".as_slice(), at.0.to_le_bytes().as_slice()]) as u64
                );
                let mut record = MasterPressure {
                    pressure: id,
                    status: EpisodeStatus::Open,
                    revision: 0,
                    signals: firing.clone(),
                    peaks: firing,
                    opened_at: at,
                    closed_at: None,
                    missing_verdicts: 0,
                };
                out.push(self.emit(&mut record, at));
                self.open = Some(Episode { record });
                self.changes += 1;
                self.calm_since = None;
            }
            (Some(_), _, true) => {
                let since = *self.calm_since.get_or_insert(at);
                if since.plus(sustain) <= at {
                    if let Some(mut episode) = self.open.take() {
                        episode.record.status = EpisodeStatus::Closed;
                        episode.record.closed_at = Some(at);
                        episode.record.revision += 1;
                        out.push(self.emit(&mut episode.record, at));
                        if self.recent.len() >= RECENT {
                            self.recent.pop_front();
                        }
                        self.recent.push_back((
                            episode.record.pressure,
                            episode.record.opened_at,
                            at,
                        ));
                        self.changes += 1;
                    }
                    self.calm_since = None;
                }
            }
            (Some(_), _, false) => self.calm_since = None,
            (None, true, _) => {}
        }
    }

    fn emit(&self, record: &mut MasterPressure, at: Stamp) -> Record {
        let revision = record.revision.to_string();
        self.records.make(
            at,
            &[&record.pressure, &revision],
            RecordBody::MasterPressure(record.clone()),
        )
    }

    /// Whether an episode is open (the master is under load now).
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// How many times an episode opened or closed: a change here means
    /// [`Pressure::windows`] says something new.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Every episode known, as windows (the open one last), for the stages
    /// that mark what overlapped one (`record::episodes::episode_during`).
    pub fn windows(&self) -> Vec<EpisodeWindow> {
        self.recent
            .iter()
            .map(|(id, opened, closed)| EpisodeWindow {
                id: id.clone(),
                opened: *opened,
                closed: Some(*closed),
            })
            .chain(self.open.iter().map(|e| EpisodeWindow {
                id: e.record.pressure.clone(),
                opened: e.record.opened_at,
                closed: None,
            }))
            .collect()
    }

    /// A missing-return verdict given while the open episode lasts.
    pub fn note_missing(&mut self) {
        if let Some(open) = &mut self.open {
            open.record.missing_verdicts += 1;
        }
    }

    /// The open episode again as a new revision (after a restart).
    pub fn reannounce(&mut self, at: Stamp, out: &mut Vec<Record>) {
        if let Some(mut episode) = self.open.take() {
            episode.record.revision += 1;
            out.push(self.emit(&mut episode.record, at));
            self.open = Some(episode);
        }
    }
}

fn figure(signal: PressureSignal, value: f64, threshold: f64) -> SignalFigure {
    SignalFigure {
        signal,
        value,
        threshold,
        detail: None,
    }
}

#[cfg(test)]
mod tests;
