//! Frame splitting and decoding, on small returns (~250 B, real 3008.3 frames) and
//! large highstate returns (~555 KB, 2,000 states, built from a real 3,000-state
//! return), in bytes/s and events/s; then the same corpora decoded by Python the
//! way Salt's event readers do, in the same run, with the ratio.
//!
//! Run on one core: `taskset -c 0 cargo bench --bench decode`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::{Criterion, Throughput, criterion_group};
use saltsight::bus::framing::{FrameSplitter, Split};
use saltsight::bus::recording::{RecordingReader, frames_of};
use saltsight::event::json::to_json;
use saltsight::event::{self, Body};

struct Corpus {
    name: &'static str,
    frames: Vec<Bytes>,
    /// The frames back to back, as a master writes them.
    stream: Vec<u8>,
}

impl Corpus {
    fn new(name: &'static str, frames: Vec<Bytes>) -> Self {
        let stream = frames.iter().flat_map(|f| f.iter().copied()).collect();
        Self {
            name,
            frames,
            stream,
        }
    }
    fn bytes(&self) -> u64 {
        self.stream.len() as u64
    }
}

fn capture_frames(name: &str) -> Vec<Bytes> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/captures")
        .join(name);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = RecordingReader::new(file, 64 << 20).expect("open capture");
    let (messages, _) = reader.read_all().expect("read capture");
    frames_of(&messages)
}

fn is_return(frame: &[u8]) -> bool {
    matches!(event::decode(frame).map(|e| e.body), Ok(Body::JobReturn(_)))
}

fn salt_frame(tag: &str, data: &serde_json::Value) -> Bytes {
    Bytes::from(event::encode_frame(
        tag,
        &rmp_serde::to_vec_named(data).expect("encode"),
        false,
    ))
}

/// Small: the three real `cmd.run` failure returns (247-249 B), repeated.
fn small_returns() -> Corpus {
    let rets: Vec<Bytes> = capture_frames("3008.3_ipc_cmd_run_fail.bin")
        .into_iter()
        .filter(|f| is_return(f))
        .collect();
    Corpus::new(
        "small_returns_250B",
        rets.iter().cycle().take(30_000).cloned().collect(),
    )
}

/// Large: real 3,000-state highstate returns cut to their first 2,000 states and
/// re-encoded as Salt encodes them (str as str, floats as float64).
fn highstate_returns() -> Corpus {
    let mut out = Vec::new();
    for frame in capture_frames("3008.3_ipc_big_highstate.bin")
        .into_iter()
        .filter(|f| is_return(f))
    {
        let event = event::decode(&frame).expect("decode");
        let mut data = to_json(event.data).expect("json");
        if let Some(states) = data.get_mut("return").and_then(|r| r.as_object_mut()) {
            let keep: Vec<String> = states.keys().take(2_000).cloned().collect();
            states.retain(|k, _| keep.contains(k));
        }
        out.push(salt_frame(event.tag, &data));
    }
    let frames: Vec<Bytes> = out.iter().cycle().take(60).cloned().collect();
    Corpus::new("highstate_returns_2000_states", frames)
}

fn split_all(stream: &[u8]) -> usize {
    let mut splitter = FrameSplitter::new(64 << 20);
    let mut buf = BytesMut::from(stream);
    let mut n = 0;
    while let Ok(Some(split)) = splitter.next(&mut buf) {
        if let Split::Frame(f) = split {
            n += f.len();
        }
    }
    n
}

/// Split, then decode every frame into a typed, borrowed event.
fn split_and_decode(stream: &[u8]) -> usize {
    let mut splitter = FrameSplitter::new(64 << 20);
    let mut buf = BytesMut::from(stream);
    let mut n = 0;
    while let Ok(Some(Split::Frame(frame))) = splitter.next(&mut buf) {
        if let Ok(event) = event::decode(&frame) {
            if let Body::JobReturn(ret) = &event.body {
                n += ret.minion.as_str().len()
                    + ret.retcode.unwrap_or(0) as usize
                    + ret.ret.map_or(0, |r| r.0.len());
            }
        }
    }
    n
}

fn bench(c: &mut Criterion) {
    for corpus in [small_returns(), highstate_returns()] {
        let mut group = c.benchmark_group(corpus.name);
        group.throughput(Throughput::Bytes(corpus.bytes()));
        group.bench_function("split", |b| {
            b.iter(|| black_box(split_all(black_box(&corpus.stream))))
        });
        group.bench_function("split_and_decode", |b| {
            b.iter(|| black_box(split_and_decode(black_box(&corpus.stream))))
        });
        group.finish();
    }
}

/// Best of `rounds` timings of `f` over the corpus.
fn best_of(rounds: usize, mut f: impl FnMut() -> usize) -> Duration {
    (0..rounds)
        .map(|_| {
            let start = Instant::now();
            black_box(f());
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn python() -> Option<PathBuf> {
    let venv = std::env::var_os("SALTSIGHT_SALT_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/saltsight/salt-3008.3")
        });
    let python = venv.join("bin/python");
    python.exists().then_some(python)
}

fn python_decode(python: &Path, corpus: &Corpus) -> Option<serde_json::Value> {
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join("corpus.bin");
    let mut container = Vec::new();
    for frame in &corpus.frames {
        container.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        container.extend_from_slice(frame);
    }
    std::fs::write(&path, container).ok()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/python_decode.py");
    let out = Command::new(python)
        .arg(script)
        .arg(&path)
        .arg("5")
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "python_decode.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// The comparison with Python, in the same run, printed as a table.
fn compare_with_python() {
    let Some(python) = python() else {
        eprintln!("No Salt venv (scripts/setup-salt): skipping the Python comparison.");
        return;
    };
    println!(
        "\n{:<32} {:>14} {:>14} {:>14} {:>14} {:>8}",
        "corpus", "rust MB/s", "rust ev/s", "python MB/s", "python ev/s", "ratio"
    );
    for corpus in [small_returns(), highstate_returns()] {
        let rust = best_of(20, || split_and_decode(&corpus.stream)).as_secs_f64();
        let rust_mbs = corpus.bytes() as f64 / rust / 1e6;
        let rust_evs = corpus.frames.len() as f64 / rust;
        let Some(py) = python_decode(&python, &corpus) else {
            continue;
        };
        let py_mbs = py["mb_per_s"].as_f64().unwrap_or(f64::NAN);
        let py_evs = py["events_per_s"].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:<32} {:>14.0} {:>14.0} {:>14.0} {:>14.0} {:>7.1}x",
            corpus.name,
            rust_mbs,
            rust_evs,
            py_mbs,
            py_evs,
            rust_mbs / py_mbs
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    compare_with_python();
}
