//! Metrics read at scrape time from counts other parts keep anyway: the bus
//! reader's atomics, each HTTP output's spool, the pipeline stages' own stats
//! (mirrored into [`PipelineCounters`] by the consumer task), the build, and the
//! process (from /proc). Nothing here costs anything between scrapes.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::bus::ReaderStats;
use crate::counter::{Counts, Kind};
use crate::record::redact::Redactor;
use crate::sink::spool::Spool;

/// The observer's own gauge, set as minions are first seen.
#[derive(Debug, Default)]
pub struct PipelineCounters {
    pub minions_seen: AtomicU64,
}

/// How the last config reload (SIGHUP) went, as Prometheus reports its own.
#[derive(Debug)]
pub struct ConfigReloads {
    pub last_successful: AtomicBool,
    /// Seconds since the epoch of the last load that worked (the start, at first).
    pub last_success_seconds: AtomicU64,
}

impl Default for ConfigReloads {
    fn default() -> Self {
        ConfigReloads {
            last_successful: AtomicBool::new(true),
            last_success_seconds: AtomicU64::new(epoch_seconds()),
        }
    }
}

impl ConfigReloads {
    pub fn record(&self, ok: bool) {
        self.last_successful.store(ok, Ordering::Relaxed);
        if ok {
            self.last_success_seconds
                .store(epoch_seconds(), Ordering::Relaxed);
        }
    }
}

fn epoch_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub struct SelfCollector {
    pub reader: Arc<ReaderStats>,
    pub reloads: Arc<ConfigReloads>,
    pub spools: Vec<Spool>,
    pub pipeline: Arc<PipelineCounters>,
    /// The stages' and outputs' own counts, each read where it lives.
    pub counts: Vec<Arc<dyn Counts>>,
    /// Its rules' counts (names only, never values).
    pub redactor: Redactor,
}

impl fmt::Debug for SelfCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelfCollector")
            .field("spools", &self.spools.len())
            .finish()
    }
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

fn counter<N>(e: &mut DescriptorEncoder, name: &str, help: &str, value: N) -> fmt::Result
where
    ConstCounter<N>: EncodeMetric,
{
    let metric = ConstCounter::new(value);
    metric.encode(e.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn gauge<N>(e: &mut DescriptorEncoder, name: &str, help: &str, value: N) -> fmt::Result
where
    ConstGauge<N>: EncodeMetric,
{
    let metric = ConstGauge::new(value);
    let kind = metric.metric_type();
    metric.encode(e.encode_descriptor(name, help, None, kind)?)
}

/// One counter family with a label of a few values.
fn counters(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &'static str,
    values: &[(&str, u64)],
) -> fmt::Result {
    let mut family =
        e.encode_descriptor(name, help, None, ConstCounter::new(0u64).metric_type())?;
    for (value, n) in values {
        ConstCounter::new(*n).encode(family.encode_family(&[(label, *value)])?)?;
    }
    Ok(())
}

fn gauges<N: Copy>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &'static str,
    values: &[(&str, N)],
) -> fmt::Result
where
    ConstGauge<N>: EncodeMetric,
{
    let Some((_, first)) = values.first() else {
        return Ok(());
    };
    let kind = ConstGauge::new(*first).metric_type();
    let mut family = e.encode_descriptor(name, help, None, kind)?;
    for (value, n) in values {
        ConstGauge::new(*n).encode(family.encode_family(&[(label, *value)])?)?;
    }
    Ok(())
}

impl SelfCollector {
    fn bus(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let r = &self.reader;
        gauge(
            e,
            "saltsight_bus_connected",
            "1 while connected to the master's event publisher",
            i64::from(r.connected.load(Ordering::Relaxed)),
        )?;
        counter(
            e,
            "saltsight_bus_connects",
            "Connections made to the event publisher",
            load(&r.connects),
        )?;
        counter(
            e,
            "saltsight_bus_connect_failures",
            "Connection attempts to the event publisher that failed",
            load(&r.connect_failures),
        )?;
        counter(
            e,
            "saltsight_bus_read_bytes",
            "Bytes read from the event publisher",
            load(&r.bytes),
        )?;
        counter(
            e,
            "saltsight_bus_frames",
            "Frames read from the event publisher",
            load(&r.frames),
        )?;
        counter(
            e,
            "saltsight_bus_desyncs",
            "Times the frame stream could not be followed (the reader reconnected)",
            load(&r.desyncs),
        )?;
        counter(
            e,
            "saltsight_bus_stalls",
            "Desyncs that were a frame begun and never finished (bus.stall_timeout)",
            load(&r.stalls),
        )?;
        counters(
            e,
            "saltsight_events_dropped",
            "Frames read but not handled, by reason (queue_full: the pipeline fell behind)",
            "reason",
            &[
                ("queue_full", load(&r.dropped_queue_full)),
                ("too_large", load(&r.skipped_too_large)),
            ],
        )?;
        counter(
            e,
            "saltsight_bus_holds",
            "Times the reader stopped reading for the consumer to take a burst (over 1 MiB queued)",
            load(&r.holds),
        )?;
        counter(
            e,
            "saltsight_bus_holds_spent",
            "Holds that ended after 100 ms with the burst not taken (the reader read on)",
            load(&r.holds_spent),
        )?;
        counter(
            e,
            "saltsight_bus_held_seconds",
            "Time the reader has spent holding, in all",
            load(&r.held_micros) as f64 / 1e6,
        )?;
        counter(
            e,
            "saltsight_bus_spilled_frames",
            "Frames that waited on disk because the queue to the pipeline was full (bus.spill_dir)",
            load(&r.spilled_frames),
        )?;
        counter(
            e,
            "saltsight_bus_spill_errors",
            "Writes or reads of the bus spill that failed (the frames they held were dropped and counted)",
            load(&r.spill_errors),
        )?;
        gauge(
            e,
            "saltsight_bus_spill_bytes",
            "Bytes of frames waiting on disk for room in the queue",
            load(&r.spill_bytes) as i64,
        )?;
        gauge(
            e,
            "saltsight_bus_queue_bytes",
            "Bytes of frames read and not yet handled",
            load(&r.queued_bytes) as i64,
        )
    }

    fn pipeline(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let p = &self.pipeline;
        for counts in &self.counts {
            let mut result = Ok(());
            counts.each(&mut |d| {
                if result.is_ok() {
                    result = match d.kind {
                        Kind::Counter => counter(e, d.name, d.help, d.value),
                        Kind::Gauge => gauge(e, d.name, d.help, d.value as i64),
                        Kind::FloatGauge => gauge(e, d.name, d.help, f64::from_bits(d.value)),
                        Kind::Seconds => gauge(e, d.name, d.help, d.value as f64 / 1e6),
                    };
                }
            });
            result?;
        }
        gauge(
            e,
            "saltsight_minions_seen",
            "Distinct minions that returned or started since saltsight started",
            load(&p.minions_seen) as i64,
        )?;
        let (recalled, forgotten) = self.redactor.memo_counts();
        counter(
            e,
            "saltsight_redact_texts_recalled",
            "Texts whose redaction was read from the memo (the same text seen lately)",
            recalled,
        )?;
        counter(
            e,
            "saltsight_redact_texts_forgotten",
            "Texts forgotten to keep the redaction memo within its bound (256)",
            forgotten,
        )?;
        let redactions: Vec<(&str, u64)> = self.redactor.counts().collect();
        counters(
            e,
            "saltsight_redactions",
            "Times a redaction rule masked or cut something before an output (docs/security.md)",
            "rule",
            &redactions,
        )
    }

    fn upstream(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        if self.spools.is_empty() {
            return Ok(());
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let each = |f: &dyn Fn(&Spool) -> u64| -> Vec<(&str, u64)> {
            self.spools.iter().map(|s| (s.name(), f(s))).collect()
        };
        let stat = |f: fn(&crate::sink::spool::SpoolStats) -> &AtomicU64| {
            each(&|s: &Spool| load(f(s.stats())))
        };
        gauges(
            e,
            "saltsight_upstream_spool_bytes",
            "Bytes in the output's spool (sealed batches and the open one)",
            "output",
            &each(&|s: &Spool| s.bytes())
                .into_iter()
                .map(|(o, n)| (o, n as i64))
                .collect::<Vec<_>>(),
        )?;
        gauges(
            e,
            "saltsight_upstream_spool_batches",
            "Sealed batches waiting to be sent",
            "output",
            &each(&|s: &Spool| s.pending() as u64)
                .into_iter()
                .map(|(o, n)| (o, n as i64))
                .collect::<Vec<_>>(),
        )?;
        let ages: Vec<(&str, f64)> = self
            .spools
            .iter()
            .map(|s| {
                let age = s
                    .oldest_unsent()
                    .map_or(0.0, |seq| now.saturating_sub(seq) as f64 / 1e6);
                (s.name(), age)
            })
            .collect();
        gauges(
            e,
            "saltsight_upstream_oldest_unsent_age_seconds",
            "Age of the oldest record not yet delivered (0 when the spool is empty)",
            "output",
            &ages,
        )?;
        counters(
            e,
            "saltsight_upstream_spooled_records",
            "Records written to the spool",
            "output",
            &stat(|s| &s.records_spooled),
        )?;
        counters(
            e,
            "saltsight_upstream_sent_records",
            "Records delivered (2xx)",
            "output",
            &stat(|s| &s.sent_records),
        )?;
        counters(
            e,
            "saltsight_upstream_rejected_records",
            "Records in delivered batches that upstream refused (an OTLP partial success)",
            "output",
            &stat(|s| &s.rejected_records),
        )?;
        counters(
            e,
            "saltsight_upstream_sent_batches",
            "Batches delivered (2xx)",
            "output",
            &stat(|s| &s.sent_batches),
        )?;
        counters(
            e,
            "saltsight_upstream_retries",
            "Sends retried (5xx, 408, 429, connection errors)",
            "output",
            &stat(|s| &s.retries),
        )?;
        counters(
            e,
            "saltsight_upstream_dead_lettered_records",
            "Records moved to dead-letter/ after a 4xx or 3xx",
            "output",
            &stat(|s| &s.dead_records),
        )?;
        counters(
            e,
            "saltsight_upstream_dropped_records",
            "Records dropped: the spool's bound (oldest first) or a write error",
            "output",
            &stat(|s| &s.dropped_records),
        )?;
        counters(
            e,
            "saltsight_upstream_corrupt_records",
            "Damaged records found in the spool (their file quarantined)",
            "output",
            &stat(|s| &s.corrupt_records),
        )
    }

    fn process(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        gauge(
            e,
            "saltsight_config_last_reload_successful",
            "Whether the last config reload (SIGHUP) worked (1) or kept the running config (0)",
            i64::from(self.reloads.last_successful.load(Ordering::Relaxed)),
        )?;
        gauge(
            e,
            "saltsight_config_last_reload_success_timestamp_seconds",
            "When the config was last loaded whole (the start, or a reload that worked)",
            load(&self.reloads.last_success_seconds) as i64,
        )?;
        let mut info = e.encode_descriptor(
            "saltsight_build_info",
            "saltsight's version (always 1)",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        ConstGauge::new(1i64)
            .encode(info.encode_family(&[("version", env!("CARGO_PKG_VERSION"))])?)?;
        let Some(process) = ProcessStats::read() else {
            return Ok(());
        };
        counter_f64(
            e,
            "process_cpu_seconds",
            "User and system CPU time spent",
            process.cpu_seconds,
        )?;
        gauge(
            e,
            "process_resident_memory_bytes",
            "Resident memory size",
            process.resident_bytes as i64,
        )?;
        gauge(
            e,
            "process_virtual_memory_bytes",
            "Virtual memory size",
            process.virtual_bytes as i64,
        )?;
        gauge(
            e,
            "process_start_time_seconds",
            "Start time since the unix epoch",
            process.start_time_seconds,
        )?;
        gauge(
            e,
            "process_open_fds",
            "Open file descriptors",
            process.open_fds as i64,
        )
    }
}

fn counter_f64(e: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> fmt::Result {
    let metric = ConstCounter::new(value);
    metric.encode(e.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for SelfCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        self.bus(&mut encoder)?;
        self.pipeline(&mut encoder)?;
        self.upstream(&mut encoder)?;
        self.process(&mut encoder)
    }
}

/// The process's own figures, from /proc/self (Linux).
#[derive(Debug, Clone, Copy, PartialEq)]
struct ProcessStats {
    cpu_seconds: f64,
    resident_bytes: u64,
    virtual_bytes: u64,
    start_time_seconds: f64,
    open_fds: usize,
}

impl ProcessStats {
    fn read() -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count();
        parse_proc(&stat, &boot, open_fds)
    }
}

/// Fields of /proc/self/stat after the command name (which may hold spaces):
/// utime 14, stime 15, starttime 22, vsize 23, rss 24 (1-based, proc(5)).
fn parse_proc(stat: &str, proc_stat: &str, open_fds: usize) -> Option<ProcessStats> {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|t| *t > 0)? as f64;
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .filter(|p| *p > 0)? as u64;
    let after_name = &stat[stat.rfind(')')? + 2..];
    // after_name starts at field 3 (state).
    let field = |n: usize| -> Option<u64> { after_name.split(' ').nth(n - 3)?.parse().ok() };
    let boot_time: u64 = proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(ProcessStats {
        cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
        start_time_seconds: boot_time as f64 + field(22)? as f64 / ticks,
        virtual_bytes: field(23)?,
        resident_bytes: field(24)? * page,
        open_fds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_fields_are_read_past_a_command_with_spaces() {
        let stat = "4242 (salt sight) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 123456789 300 18446744073709551615";
        let parsed = parse_proc(stat, "cpu  1 2 3\nbtime 1700000000\n", 7).unwrap();
        let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .unwrap()
            .unwrap() as f64;
        assert_eq!(parsed.cpu_seconds, 300.0 / ticks);
        assert_eq!(parsed.start_time_seconds, 1_700_000_000.0 + 1000.0 / ticks);
        assert_eq!(parsed.virtual_bytes, 123_456_789);
        assert!(parsed.resident_bytes >= 300 * 4096);
        assert_eq!(parsed.open_fds, 7);
        assert!(ProcessStats::read().is_some(), "this process's own /proc");
    }
}
