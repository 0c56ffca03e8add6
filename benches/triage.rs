//! Triage on one core: a ~500 KB highstate return of 2,000 states, 3 of them
//! failed (one with requisite fallout), walked raw for its root causes; and the
//! same with every state's outcome reported for the correlator's memory. Also the
//! per-job cost of checking a git checkout's HEAD (a few `stat`s).
//!
//! Run: `taskset -c 0 cargo bench --bench triage`. Figures are in the README.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group};
use saltsight::correlate::git::{GitDir, HeadWatch};
use saltsight::event::{Body, decode, encode_frame};
use saltsight::time::Stamp;
use saltsight::triage::{Triage, TriageConfig};
use serde_json::{Value, json};

const STATES: usize = 2_000;

/// A state.apply return shaped like the lab's (`file.managed` with a diff).
fn highstate_frame() -> Vec<u8> {
    let mut states = serde_json::Map::new();
    for i in 0..STATES {
        let (result, comment, changes) = match i {
            500 => (false, "Unable to manage file: Source file salt://files/web.conf not found in saltenv 'base'".to_string(), json!({})),
            501 => (false, "One or more requisite failed: web.state_500".to_string(), json!({})),
            1500 => (false, "Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: Unable to locate package nginx-extra".to_string(), json!({})),
            _ => (true, format!("File /srv/www/site{i}/index.html updated"), json!({"diff": format!("--- \n+++ \n@@ -1 +1 @@\n-old {i}\n+new {i}\n")})),
        };
        states.insert(
            format!("file_|-state_{i}_|-/srv/www/site{i}/index.html_|-managed"),
            json!({"name": format!("/srv/www/site{i}/index.html"), "changes": changes, "result": result,
                   "comment": comment, "__sls__": "web", "__run_num__": i, "start_time": "19:33:17.565051",
                   "duration": 3.25, "__id__": format!("state_{i}")}),
        );
    }
    let data = json!({"cmd": "_return", "id": "web1", "success": false, "return": Value::Object(states),
        "retcode": 2, "jid": "20261121193316907494", "fun": "state.apply", "fun_args": ["web"],
        "user": "root", "out": "highstate", "_stamp": "2026-11-21T19:33:17.593904+00:00"});
    encode_frame(
        "salt/job/20261121193316907494/ret/web1",
        &rmp_serde::to_vec_named(&data).expect("encode"),
        false,
    )
}

fn triage(c: &mut Criterion) {
    let frame = highstate_frame();
    let event = decode(&frame).expect("decode");
    let Body::JobReturn(ret) = &event.body else {
        panic!("a return")
    };
    let ret_bytes = ret.ret.expect("return").0.len();
    eprintln!("return: {ret_bytes} bytes, {STATES} states");
    let mut group = c.benchmark_group("triage");
    group.throughput(Throughput::Bytes(ret_bytes as u64));
    for (name, want_outcomes) in [("root_causes", false), ("with_outcomes", true)] {
        let mut triage = Triage::new(TriageConfig {
            want_outcomes,
            ..TriageConfig::default()
        });
        let found = triage.on_return(ret, Stamp(0)).expect("findings");
        assert_eq!(found.state_failures.len(), 2);
        assert_eq!(found.state_failures[0].fallout, 1);
        group.bench_function(name, |b| {
            b.iter(|| {
                let findings = triage.on_return(black_box(ret), Stamp(0));
                triage.close_job("20261121193316907494");
                black_box(findings)
            })
        });
    }
    group.finish();
}

fn head_check(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .env("GIT_AUTHOR_NAME", "b")
            .env("GIT_AUTHOR_EMAIL", "b@example.com")
            .env("GIT_COMMITTER_NAME", "b")
            .env("GIT_COMMITTER_EMAIL", "b@example.com")
            .status()
            .expect("git")
            .success();
        assert!(ok);
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("top.sls"), "base: {}\n").expect("write");
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "first"]);
    let mut watch = HeadWatch::new(GitDir::discover(dir.path()).expect("repo"), "HEAD".into());
    watch.refresh().expect("first read");
    c.bench_function("git_head_check_per_job", |b| {
        b.iter(|| black_box(watch.refresh().expect("refresh")))
    });
}

criterion_group!(benches, triage, head_check);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
