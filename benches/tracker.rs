//! The job tracker on one core: returns/s with 100,000 expected returns
//! outstanding (10 jobs x 10,000 minions), and the heap that state takes; and the
//! same with every metric update `run` makes (per event and per record), for the
//! metrics' cost.
//!
//! Run: `taskset -c 0 cargo bench --bench tracker`. Figures are in the README.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{BatchSize, Criterion, Throughput, criterion_group};
use saltsight::event::{decode, encode_frame};
use saltsight::jobs::{JobTracker, TrackerConfig};
use saltsight::metrics::Metrics;
use saltsight::record::RecordFactory;
use saltsight::time::Stamp;
use serde_json::json;

/// Counts live heap bytes, to measure what the tracker holds.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded as is to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded as is to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const JOBS: usize = 10;
const MINIONS: usize = 10_000;

fn frame(tag: &str, data: &serde_json::Value) -> Vec<u8> {
    encode_frame(tag, &rmp_serde::to_vec_named(data).expect("encode"), false)
}

fn jid(j: usize) -> String {
    format!("2026112119{j:010}")
}

fn minion(m: usize) -> String {
    format!("web{m:05}.example.net")
}

/// The `new` events of 10 jobs, each expecting 10,000 minions.
fn publications() -> Vec<Vec<u8>> {
    let minions: Vec<String> = (0..MINIONS).map(minion).collect();
    (0..JOBS)
        .map(|j| {
            frame(
                &format!("salt/job/{}/new", jid(j)),
                &json!({"jid": jid(j), "fun": "test.ping", "arg": [], "tgt": "*", "tgt_type": "glob",
                        "user": "root", "minions": minions, "missing": [], "_stamp": "2026-11-21T19:00:00.000000+00:00"}),
            )
        })
        .collect()
}

/// One real-shaped test.ping return per expected minion (~250 B each).
fn returns() -> Vec<Vec<u8>> {
    (0..JOBS)
        .flat_map(|j| {
            (0..MINIONS).map(move |m| {
                frame(
                    &format!("salt/job/{}/ret/{}", jid(j), minion(m)),
                    &json!({"cmd": "_return", "id": minion(m), "success": true, "return": true, "retcode": 0,
                            "jid": jid(j), "fun": "test.ping", "fun_args": [], "user": "root",
                            "_stamp": "2026-11-21T19:00:01.000000+00:00", "ts": 1795287601}),
                )
            })
        })
        .collect()
}

fn published_tracker(publications: &[Vec<u8>]) -> JobTracker {
    let mut tracker = JobTracker::new(TrackerConfig::default(), RecordFactory::new("bench"));
    let mut out = Vec::new();
    for f in publications {
        let event = decode(f).expect("decode");
        tracker.on_event(&event, Stamp(0), &mut out);
    }
    tracker
}

fn feed(tracker: &mut JobTracker, frames: &[Vec<u8>]) -> usize {
    let mut out = Vec::with_capacity(64);
    let mut records = 0;
    for f in frames {
        let event = decode(f).expect("decode");
        tracker.on_event(&event, Stamp(0), &mut out);
        records += out.len();
        out.clear();
    }
    records
}

/// `feed`, plus the metric updates the `run` handler and `app` make: the event's
/// class and lag, minions seen, and each record.
fn feed_with_metrics(tracker: &mut JobTracker, frames: &[Vec<u8>], metrics: &mut Metrics) -> usize {
    let mut out = Vec::with_capacity(64);
    let mut records = 0;
    let received = Stamp(1_000_000);
    for f in frames {
        let event = decode(f).expect("decode");
        let lag = event.stamp.map(|s| received.micros_since(s));
        metrics
            .events
            .event(event.class, event.malformed_field.is_some(), lag);
        metrics.observer.event(&event);
        tracker.on_event(&event, Stamp(0), &mut out);
        for record in &out {
            metrics.observer.record(record);
        }
        records += out.len();
        out.clear();
    }
    records
}

fn bench(c: &mut Criterion) {
    let publications = publications();
    let returns = returns();
    let mut group = c.benchmark_group("tracker_100k_outstanding");
    group.throughput(Throughput::Elements(returns.len() as u64));
    group.sample_size(10);
    group.bench_function("decode_only", |b| {
        b.iter(|| {
            for f in &returns {
                black_box(decode(black_box(f)).is_ok());
            }
        })
    });
    // The events decoded once; the tracker alone (it copies what it keeps).
    let events: Vec<_> = returns.iter().map(|f| decode(f).expect("decode")).collect();
    group.bench_function("track_only", |b| {
        b.iter_batched(
            || published_tracker(&publications),
            |mut tracker| {
                let mut out = Vec::with_capacity(64);
                for event in &events {
                    tracker.on_event(event, Stamp(0), &mut out);
                    out.clear();
                }
                black_box(tracker.expected_outstanding())
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function("decode_and_track", |b| {
        b.iter_batched(
            || published_tracker(&publications),
            |mut tracker| black_box(feed(&mut tracker, &returns)),
            BatchSize::PerIteration,
        )
    });
    let mut metrics = Metrics::new(
        &saltsight::config::metrics::MetricsConfig::default(),
        std::sync::Arc::new(saltsight::bus::ReaderStats::default()),
        Vec::new(),
        Vec::new(),
        saltsight::record::redact::Redactor::new(&Default::default()).expect("default rules"),
    );
    group.bench_function("decode_and_track_with_metrics", |b| {
        b.iter_batched(
            || published_tracker(&publications),
            |mut tracker| black_box(feed_with_metrics(&mut tracker, &returns, &mut metrics)),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

/// Heap held by the tracker with every expected return outstanding.
fn memory() {
    let publications = publications();
    let before = LIVE.load(Ordering::Relaxed);
    let tracker = published_tracker(&publications);
    let held = LIVE.load(Ordering::Relaxed).saturating_sub(before);
    println!(
        "\ntracker memory: {} expected returns outstanding in {} jobs hold {:.1} MB of heap ({} B per expected return)",
        tracker.expected_outstanding(),
        tracker.open_jobs(),
        held as f64 / 1e6,
        held / tracker.expected_outstanding().max(1)
    );
    drop(tracker);
}

/// The metrics' cost, measured A/B interleaved in one process (criterion's
/// separate runs drift more than 5% on a shared machine): the median time of
/// decode + track with and without every metric update, the fastest of 31
/// rounds each (the least disturbed by other work on the machine).
fn metrics_cost() {
    let publications = publications();
    let returns = returns();
    let mut metrics = Metrics::new(
        &saltsight::config::metrics::MetricsConfig::default(),
        std::sync::Arc::new(saltsight::bus::ReaderStats::default()),
        Vec::new(),
        Vec::new(),
        saltsight::record::redact::Redactor::new(&Default::default()).expect("default rules"),
    );
    let (mut plain, mut measured) = (Vec::new(), Vec::new());
    for round in 0..62 {
        for with_metrics in [round % 2 == 0, round % 2 != 0] {
            let mut tracker = published_tracker(&publications);
            let started = std::time::Instant::now();
            if with_metrics {
                black_box(feed_with_metrics(&mut tracker, &returns, &mut metrics));
                measured.push(started.elapsed());
            } else {
                black_box(feed(&mut tracker, &returns));
                plain.push(started.elapsed());
            }
        }
    }
    plain.sort();
    measured.sort();
    let (a, b) = (plain[0], measured[0]);
    let per = |d: std::time::Duration| returns.len() as f64 / d.as_secs_f64() / 1e6;
    println!(
        "\nmetrics cost (fastest of 31 interleaved rounds each): decode + track {:.2} M returns/s, with metrics {:.2} M returns/s: {:+.1}%",
        per(a),
        per(b),
        (b.as_secs_f64() / a.as_secs_f64() - 1.0) * 100.0
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    memory();
    metrics_cost();
}
