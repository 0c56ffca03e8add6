//! How long one step of the pipeline holds it, as a job grows: the stages
//! (triage, the tracker, the correlator, drift) and the periodic checkpoint's
//! encoding, driven in event time with one failing `state.apply` job of N
//! minions (2% never return), for a small job and for big ones. Each step is
//! timed as the agent takes it: the job's publication (its decoding and the
//! first slice of a big job's names too), each return (with the next slice
//! while a big job's names are part way taken), the checkpoint taken half
//! way (the pause; then its write, on its thread in the agent, timed
//! apart), and the tick past the deadline that closes the job, each batch
//! of verdicts it owes a step of its own. The longest step of each kind is
//! reported, and its ratio to the small job's (a step whose ratio grows with
//! N holds the pipeline for a time that grows with the job), and the
//! publication's (with every slice) and the close's steps added up.
//!
//! Run: `taskset -c 0 cargo bench --bench big_job [-- MINIONS...]` (default
//! 500 50000 200000; the first is the reference). `BIG_JOB_SLOW=1` prints
//! each return over 1 ms with its place in the job (a table that grows with
//! the returns shows at its sizes: 28,672, 57,344, ...); `BIG_JOB_DUMP=FILE`
//! writes the last job's frames as a raw dump of the bus, for `saltsight
//! replay` under `perf`; `BIG_JOB_STATES=1` watches a state tree the job
//! rolls out (rollouts, the correlator's history and drift then hold the
//! fleet too). `BIG_JOB_MANY=N` runs N of the load test's `failing` jobs
//! (500 minions, one every 10 s of event time, `BIG_JOB_EVERY` to change
//! it; 0 keeps every job open, as the load test's rate does) instead, and
//! times the checkpoint's copy amid them.

use std::time::{Duration, Instant};

use saltsight::event::{Event, decode, decode_shared, encode_frame};
use saltsight::pipeline::{Checkpointer, Stages};
use saltsight::record::Record;
use saltsight::time::Stamp;
use serde_json::json;

/// The load test's traffic: its failing return is the one used here.
#[path = "load/traffic.rs"]
#[allow(dead_code)]
mod traffic;

/// The longest and the total of one kind of step.
#[derive(Default, Clone, Copy)]
struct Steps {
    longest: Duration,
    total: Duration,
    count: u32,
}

impl Steps {
    fn time<T>(&mut self, step: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let value = step();
        let took = started.elapsed();
        self.longest = self.longest.max(took);
        self.total += took;
        self.count += 1;
        value
    }
}

#[derive(Default, Clone, Copy)]
struct JobSteps {
    publish: Steps,
    ret: Steps,
    checkpoint: Steps,
    close: Steps,
    checkpoint_bytes: u64,
    /// A checkpoint taken and written on the caller's thread.
    checkpoint_write: Duration,
}

fn frame(tag: &str, data: &serde_json::Value) -> Vec<u8> {
    encode_frame(tag, &rmp_serde::to_vec_named(data).expect("encode"), false)
}

fn stamp(secs: i64) -> String {
    let text = Stamp(secs * 1_000_000 + 1_796_000_000_000_000).to_string();
    format!("{}+00:00", text.trim_end_matches('Z'))
}

/// Fresh stages; with `BIG_JOB_STATES` set, watching a state tree (a git
/// checkout whose one commit changed the job's SLS) whose rollout the job
/// runs, on a master whose keys cannot be read (the fleet is the minions
/// seen: it grows at every return).
fn stages() -> (tempfile::TempDir, Stages) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("saltsight.toml");
    let mut config =
        "[bus]\nendpoint = \"unix:/unused\"\n[correlate]\ndiscover = false\n".to_owned();
    if std::env::var_os("BIG_JOB_STATES").is_some() {
        let tree = dir.path().join("states");
        std::fs::create_dir(&tree).expect("state tree");
        std::fs::write(
            tree.join("load.sls"),
            "load:\n  test.fail_without_changes: []\n",
        )
        .expect("an SLS");
        for args in [
            &["init", "-q"][..],
            &["add", "load.sls"],
            &[
                "-c",
                "user.name=bench",
                "-c",
                "user.email=bench@localhost",
                "commit",
                "-qm",
                "load",
            ],
        ] {
            let done = std::process::Command::new("git")
                .args(args)
                .current_dir(&tree)
                .status()
                .expect("git");
            assert!(done.success(), "git {args:?}");
        }
        config.push_str(&format!(
            "state_repos = {{ states = {:?} }}\n[rollouts]\nminions_dir = {:?}\n",
            tree,
            dir.path().join("no-keys")
        ));
    }
    std::fs::write(&path, config).expect("write config");
    let config = saltsight::config::load(&saltsight::config::Overrides {
        config: Some(path),
        ..Default::default()
    })
    .expect("config loads");
    (dir, Stages::from_config(&config))
}

/// One job of `minions` through fresh stages, every step timed; its frames
/// appended to `dump` when given (a raw dump of the bus, for `saltsight replay`
/// under a profiler).
fn one_job(minions: usize, mut dump: Option<&mut dyn std::io::Write>) -> JobSteps {
    let (dir, mut stages) = stages();
    let mut checkpointer = Checkpointer::new(dir.path(), "bench", Duration::from_secs(60));
    // In no order, as Salt's are (its minions as the key directory lists
    // them): a permutation of the numbers, 7,919 being prime to the sizes.
    let names: Vec<String> = (0..minions)
        .map(|m| format!("web{:06}.example.net", m * 7_919 % minions))
        .collect();
    let jid = "20261207120000000001";
    let states = traffic::failing_states();
    let mut steps = JobSteps::default();
    let mut out = Vec::new();
    let new = frame(
        &format!("salt/job/{jid}/new"),
        &json!({"jid": jid, "fun": "state.apply", "arg": ["load"], "tgt": "*", "tgt_type": "glob",
                "user": "root", "minions": names, "missing": [], "_stamp": stamp(0)}),
    );
    if let Some(dump) = dump.as_mut() {
        dump.write_all(&new).expect("dump");
    }
    // Decoded within the step, as the pipeline's own step does; each
    // further slice of its names rides with an event after it, as the
    // agent takes them (and counts to the publication's total).
    let new = bytes::Bytes::from(new);
    steps.publish.time(|| {
        let event = decode_shared(&new).expect("decode");
        agent_event(&mut stages, &event, Stamp::now(), &mut out)
    });
    out.clear();
    let returned: Vec<&String> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 50 != 49)
        .map(|(_, m)| m)
        .collect();
    for (i, minion) in returned.iter().enumerate() {
        let ret = frame(
            &format!("salt/job/{jid}/ret/{minion}"),
            &json!({"cmd": "_return", "id": minion, "success": false, "return": states, "retcode": 2,
                    "jid": jid, "fun": "state.apply", "fun_args": ["load"], "user": "root", "out": "highstate",
                    "_stamp": stamp(1), "ts": 1_796_000_001}),
        );
        if let Some(dump) = dump.as_mut() {
            dump.write_all(&ret).expect("dump");
        }
        let event = decode(&ret).expect("decode");
        let started = Instant::now();
        let at = Stamp(1_796_000_001_000_000);
        let slice = if i == 0 {
            // The first return warms triage up (its rules' first use): not a
            // step that grows with the job, and not counted.
            agent_event(&mut stages, &event, at, &mut out)
        } else {
            steps
                .ret
                .time(|| agent_event(&mut stages, &event, at, &mut out))
        };
        steps.publish.total += slice;
        if started.elapsed() > Duration::from_millis(1)
            && std::env::var_os("BIG_JOB_SLOW").is_some()
        {
            eprintln!("return {i}: {:?}", started.elapsed());
        }
        out.clear();
        if i == returned.len() / 2 {
            steps
                .checkpoint
                .time(|| checkpointer.write_behind(|| stages.snapshot(), Stamp::now()));
            // Its size and its thread's time (to encode and write it): the
            // same written again, waited for.
            checkpointer.write(stages.snapshot(), Stamp::now());
            steps.checkpoint_write = Duration::from_micros(checkpointer.stats.write_micros.get());
            steps.checkpoint_bytes = checkpointer.stats.bytes.get();
        }
    }
    let past_deadline = Stamp(1_796_000_000_000_000 + 24 * 3600 * 1_000_000);
    // The tick past the deadline, then each batch of verdicts: a step each.
    let mut records = steps.close.time(|| stages.advance(past_deadline));
    while let Some(more) = steps.close.time(|| stages.more()) {
        records.extend(more);
    }
    steps
}

/// `count` `failing` jobs of 500 minions, one every `every` s of event time, as
/// the load test's `failing` mix runs them (the same minions, 2% missing):
/// jobs wait for their deadline while later ones come, and closed jobs wait
/// for late returns. The checkpoint's copy is timed every 50 jobs; its
/// longest, and the open and closed jobs then.
fn many_jobs(count: usize, every: i64) -> Duration {
    let (dir, mut stages) = stages();
    let mut checkpointer = Checkpointer::new(dir.path(), "bench", Duration::from_secs(60));
    let names: Vec<String> = (0..500).map(|m| format!("web{m:04}.example.net")).collect();
    let states = traffic::failing_states();
    let mut copy = Steps::default();
    let mut out = Vec::new();
    for job in 0..count {
        let jid = format!("2026120712{job:010}");
        let at = every * i64::try_from(job).expect("jobs");
        let new = frame(
            &format!("salt/job/{jid}/new"),
            &json!({"jid": jid, "fun": "state.apply", "arg": ["load"], "tgt": "*", "tgt_type": "glob",
                    "user": "root", "minions": names, "missing": [], "_stamp": stamp(at)}),
        );
        let now = Stamp(1_796_000_000_000_000 + at * 1_000_000);
        stages.on_event(&decode(&new).expect("decode"), now, &mut out);
        for minion in names
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 50 != 49)
            .map(|(_, m)| m)
        {
            let ret = frame(
                &format!("salt/job/{jid}/ret/{minion}"),
                &json!({"cmd": "_return", "id": minion, "success": false, "return": states, "retcode": 2,
                        "jid": jid, "fun": "state.apply", "fun_args": ["load"], "user": "root",
                        "out": "highstate", "_stamp": stamp(at + 1)}),
            );
            stages.on_event(&decode(&ret).expect("decode"), now, &mut out);
        }
        out.extend(stages.advance(now));
        while let Some(more) = stages.more() {
            out.extend(more);
        }
        out.clear();
        if job % 50 == 49 {
            copy.time(|| checkpointer.write_behind(|| stages.snapshot(), Stamp::now()));
            checkpointer.write(stages.snapshot(), Stamp::now());
        }
    }
    copy.longest
}

/// One event as the agent takes it: the event, the next slice of a big
/// job's names when one was part way before it, every batch of verdicts
/// owed. How long the slice took.
fn agent_event(
    stages: &mut Stages,
    event: &Event<'_>,
    at: Stamp,
    out: &mut Vec<Record>,
) -> Duration {
    let taking = stages.taking();
    stages.on_event(event, at, out);
    let started = Instant::now();
    if taking {
        out.extend(stages.take_names().into_iter().flatten());
    }
    let slice = started.elapsed();
    while let Some(more) = stages.more() {
        out.extend(more);
    }
    slice
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if sizes.is_empty() {
        sizes = vec![500, 50_000, 200_000];
    }
    if let Some(count) = std::env::var("BIG_JOB_MANY")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        let every = std::env::var("BIG_JOB_EVERY")
            .ok()
            .and_then(|n| n.parse().ok());
        let longest = many_jobs(count, every.unwrap_or(10));
        println!(
            "{count} failing jobs of 500 minions: the checkpoint's copy {:.2} ms at most",
            ms(longest)
        );
        return;
    }
    // BIG_JOB_DUMP=FILE: the last size's frames written to FILE.
    let mut dump = std::env::var_os("BIG_JOB_DUMP")
        .map(|path| std::io::BufWriter::new(std::fs::File::create(path).expect("create the dump")));
    let reference = one_job(sizes[0], None);
    println!(
        "longest step of each kind, ms (x the {}-minion job's)",
        sizes[0]
    );
    println!(
        "{:>8} {:>16} {:>16} {:>28} {:>16} {:>10} {:>14}",
        "minions", "publish", "return", "checkpoint", "close", "ret mean µs", "pub/close all"
    );
    for &n in &sizes {
        let last = n == sizes[sizes.len() - 1];
        let s = if n == sizes[0] {
            reference
        } else {
            one_job(
                n,
                dump.as_mut()
                    .filter(|_| last)
                    .map(|d| d as &mut dyn std::io::Write),
            )
        };
        let cell = |a: Steps, r: Steps| {
            format!(
                "{:.2} ({:.0}x)",
                ms(a.longest),
                a.longest.as_secs_f64() / r.longest.as_secs_f64().max(1e-9)
            )
        };
        println!(
            "{:>8} {:>16} {:>16} {:>28} {:>16} {:>10.1} {:>14}",
            n,
            cell(s.publish, reference.publish),
            cell(s.ret, reference.ret),
            format!(
                "{} {:.1} MB {:.0} ms",
                cell(s.checkpoint, reference.checkpoint),
                s.checkpoint_bytes as f64 / 1e6,
                ms(s.checkpoint_write)
            ),
            cell(s.close, reference.close),
            s.ret.total.as_secs_f64() * 1e6 / f64::from(s.ret.count.max(1)),
            format!("{:.1}/{:.1}", ms(s.publish.total), ms(s.close.total)),
        );
    }
}
