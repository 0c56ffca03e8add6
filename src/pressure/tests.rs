//! Tests of master pressure: sustain, hysteresis, one slow report, overlap.
use super::*;
use crate::master_processes::RoleFigures;
use crate::record::episodes::episode_during;

const S: i64 = 1_000_000;

fn stage() -> Pressure {
    Pressure::new(PressureConfig::default(), RecordFactory::new("m"))
}

fn workers(cpu_seconds: f64) -> MasterSample {
    let mut sample = MasterSample::default();
    sample.roles.insert(
        "MWorker",
        RoleFigures {
            processes: 2,
            cpu_seconds,
            rss_bytes: 1,
        },
    );
    sample
}

fn episodes(out: &[Record]) -> Vec<MasterPressure> {
    out.iter()
        .filter_map(|r| match &r.body {
            RecordBody::MasterPressure(p) => Some(p.clone()),
            _ => None,
        })
        .collect()
}

/// Feeds samples every 5 s from `from` for `secs` seconds with each worker at
/// `busy` of a core; returns the cumulative CPU.
fn busy(
    p: &mut Pressure,
    mut cpu: f64,
    from: i64,
    secs: i64,
    busy: f64,
    out: &mut Vec<Record>,
) -> f64 {
    let mut t = from;
    while t < from + secs {
        t += 5;
        cpu += busy * 5.0 * 2.0;
        p.on_sample(Some(&workers(cpu)), Stamp(t * S), out);
    }
    cpu
}

#[test]
fn busy_workers_for_the_sustain_open_an_episode_and_calm_ones_close_it() {
    let mut p = stage();
    let mut out = Vec::new();
    p.on_sample(Some(&workers(0.0)), Stamp(0), &mut out);
    // 25 s at 100%: not yet.
    let cpu = busy(&mut p, 0.0, 0, 25, 1.0, &mut out);
    assert!(episodes(&out).is_empty());
    // Over 30 s: open, naming worker_cpu.
    let cpu = busy(&mut p, cpu, 25, 10, 1.0, &mut out);
    let open = episodes(&out);
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].status, EpisodeStatus::Open);
    assert_eq!(open[0].signals[0].signal, PressureSignal::WorkerCpu);
    assert!((open[0].signals[0].value - 1.0).abs() < 1e-9);
    assert_eq!(
        episode_during(&p.windows(), Stamp(0), Stamp(40 * S)),
        Some(open[0].pressure.as_str())
    );
    // 85% is under the threshold but over the release: still open.
    let cpu = busy(&mut p, cpu, 35, 60, 0.85, &mut out);
    assert_eq!(episodes(&out).len(), 1, "hysteresis");
    // 10% for 30 s: closed, with the peak.
    busy(&mut p, cpu, 95, 40, 0.1, &mut out);
    let all = episodes(&out);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!((all[1].status, all[1].revision), (EpisodeStatus::Closed, 1));
    assert!(
        all[1]
            .peaks
            .iter()
            .any(|f| f.signal == PressureSignal::WorkerCpu && f.value >= 1.0)
    );
    // After it: a job from before and during still sees it; one after does not.
    assert!(episode_during(&p.windows(), Stamp(10 * S), Stamp(50 * S)).is_some());
    assert!(episode_during(&p.windows(), Stamp(200 * S), Stamp(300 * S)).is_none());
}

fn stats_event(worker: &str, mean: f64, runs: u64) -> Vec<u8> {
    let data = serde_json::json!({"time": 5, "worker": worker, "stats": {
        "_return": {"mean": mean, "runs": runs}, "_auth": {"mean": 0.001, "runs": 3}}});
    crate::event::encode_frame(
        &format!("salt/stats/{worker}"),
        &rmp_serde::to_vec_named(&data).unwrap(),
        false,
    )
}

fn feed_stats(p: &mut Pressure, worker: &str, mean: f64, runs: u64, secs: i64) {
    let frame = stats_event(worker, mean, runs);
    let event = crate::event::decode(&frame).expect("decode");
    p.on_event(&event, Stamp(secs * S));
}

#[test]
fn one_slow_stats_report_is_not_pressure_and_a_run_of_them_is() {
    let mut p = stage();
    let mut out = Vec::new();
    // One slow interval among fast ones, judged every 5 s for a minute.
    feed_stats(&mut p, "MWorker-default-0", 0.01, 50, 0);
    feed_stats(&mut p, "MWorker-default-0", 9.0, 50, 5);
    feed_stats(&mut p, "MWorker-default-0", 0.01, 50, 10);
    for t in (0..60).step_by(5) {
        p.on_sample(None, Stamp(t * S), &mut out);
    }
    assert!(episodes(&out).is_empty(), "{out:?}");
    // Slow with too few requests to mean anything: no.
    for t in (60..120).step_by(5) {
        feed_stats(&mut p, "MWorker-default-1", 9.0, 1, t);
        p.on_sample(None, Stamp(t * S), &mut out);
    }
    assert!(episodes(&out).is_empty());
    // Slow report after slow report: yes, once sustained.
    for t in (120..200).step_by(5) {
        feed_stats(&mut p, "MWorker-default-0", 3.0, 40, t);
        p.on_sample(None, Stamp(t * S), &mut out);
    }
    let open = episodes(&out);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].signals[0].signal, PressureSignal::RequestTime);
    assert!((open[0].signals[0].value - 3.0).abs() < 1e-9);
}

#[test]
fn a_late_bus_opens_an_episode_on_its_p99() {
    let mut p = stage();
    let mut out = Vec::new();
    for t in 0..40 {
        for i in 0..10 {
            // 1 in 10 events 8 s late: the p99 is 8 s.
            let lag = if i == 0 { 8.0 } else { 0.01 };
            p.on_lag(lag, Stamp(t * S));
        }
        if t % 5 == 0 {
            p.on_sample(None, Stamp(t * S), &mut out);
        }
    }
    let open = episodes(&out);
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].signals[0].signal, PressureSignal::BusLag);
}
