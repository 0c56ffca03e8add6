//! A big master's history, generated: `minions` minions, a highstate every
//! `every_minutes` for `days`, `failing` of each job's returns failed (each
//! with its `state_failure`, one `failure_group` a job) and `missing` of its
//! minions silent. Written through the store's own batches (as the agent
//! writes them), from the records of a real 3008.3 capture (their text
//! kept, their jid, minion and time changed). Then the query commands are
//! timed against it, each answer checked.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use saltsight::history::Row;
use saltsight::history::verdicts::{Answer, FailedState, MissingFacts, Returned, Verdict};
use saltsight::history::write::{Batch, JobVerdicts, Writer};
use saltsight::record::{MissingEvidence, MissingReason, StateFailure};
use saltsight::time::Stamp;
use serde_json::{Value, json};

/// The shape of the history.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub minions: usize,
    pub days: i64,
    pub every_minutes: i64,
    /// Returns failed, per 1,000.
    pub failing_per_mille: usize,
    /// Minions missing, per 1,000.
    pub missing_per_mille: usize,
}

impl Scale {
    /// The big master: 7 days of 10,000 minions, a highstate every 30
    /// minutes, 2% failing (and 0.5% missing): about 3.4 M returns.
    pub const BIG: Scale = Scale {
        minions: 10_000,
        days: 7,
        every_minutes: 30,
        failing_per_mille: 20,
        missing_per_mille: 5,
    };

    pub fn jobs(&self) -> i64 {
        self.days * 24 * 60 / self.every_minutes
    }
}

/// What was generated, for the questions asked of it.
pub struct Generated {
    pub jobs: Vec<String>,
    pub returns: u64,
    pub failed: u64,
    pub missing: u64,
    /// Jobs, failed and missing of the last day.
    pub last_day_jobs: usize,
}

const S: i64 = 1_000_000;

fn template(root: &Path, kind: &str) -> Value {
    let file = root.join("tests/fixtures/captures/3008.3_ipc_state_apply_fail.records.jsonl");
    let text = std::fs::read_to_string(&file).expect("the capture's records");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {}", file.display()))
}

fn row(kind: &'static str, at: i64, jid: &str, minion: Option<&str>, mut v: Value, n: u64) -> Row {
    v["at"] = json!(Stamp(at).to_string());
    v["id"] = json!(format!("{n:032x}"));
    v["jid"] = json!(jid);
    if let Some(m) = minion {
        v["minion"] = json!(m);
    }
    let fingerprint = v["fingerprint"].as_str().map(str::to_owned);
    Row {
        id: format!("{n:032x}"),
        kind,
        at,
        jid: Some(jid.to_owned()),
        minion: minion.map(str::to_owned),
        fingerprint,
        commit: None,
        fun: Some("state.apply".into()),
        json: v.to_string(),
    }
}

/// Writes the history of `scale` ending now into `path`.
pub fn generate(root: &Path, path: &Path, scale: Scale) -> Generated {
    let published = template(root, "job_published");
    let failure: StateFailure =
        serde_json::from_value(template(root, "state_failure")).expect("a state_failure");
    let failure = FailedState::of(&failure);
    let group = template(root, "failure_group");
    let completed = template(root, "job_completed");
    let minions: Vec<String> = (0..scale.minions)
        .map(|i| format!("web{i:05}.dc1.example.com"))
        .collect();
    // A verdict's name is shared, as the agent's records share it.
    let names: Vec<Arc<str>> = minions.iter().map(|m| Arc::from(m.as_str())).collect();
    let mut store = Writer::open(path).expect("a new history");
    let now = Stamp::now().0;
    let first = now - scale.jobs() * scale.every_minutes * 60 * S;
    let (mut generated, mut n) = (
        Generated {
            jobs: Vec::new(),
            returns: 0,
            failed: 0,
            missing: 0,
            last_day_jobs: 0,
        },
        0u64,
    );
    for job in 0..scale.jobs() {
        let at = first + job * scale.every_minutes * 60 * S;
        let jid = Stamp(at)
            .to_string()
            .chars()
            .filter(char::is_ascii_digit)
            .collect::<String>();
        let mut batch = Batch::default();
        let mut p = published.clone();
        p["expected"] = json!(minions);
        p["expected_count"] = json!(minions.len());
        n += 1;
        batch.rows.push(row("job_published", at, &jid, None, p, n));
        let (mut verdicts, mut failures) = (Vec::new(), Vec::new());
        let (mut failed, mut missed) = (Vec::new(), 0u64);
        for (i, minion) in minions.iter().enumerate() {
            // Spread over the jobs: not the same minions fail every time.
            let draw = (i + job as usize * 7) % 1000;
            let back = at + (1 + (i as i64 % 300)) * S;
            if draw < scale.missing_per_mille {
                missed += 1;
                verdicts.push(Verdict {
                    minion: Arc::clone(&names[i]),
                    at: Stamp(at + 600 * S),
                    answer: Answer::Missing(MissingFacts {
                        reason: MissingReason::NoResponse,
                        evidence: MissingEvidence::Nothing,
                        disconnected_at: None,
                        address: None,
                        streak: 1,
                        missing_since: None,
                    }),
                });
                continue;
            }
            let ok = draw >= scale.missing_per_mille + scale.failing_per_mille;
            verdicts.push(Verdict {
                minion: Arc::clone(&names[i]),
                at: Stamp(back),
                answer: Answer::Returned(Returned {
                    succeeded: ok,
                    late: false,
                    test: false,
                    state_run: true,
                    changed: u32::from(i % 10 == 0),
                    duration_ms: Some((back - at) as u64 / 1000),
                }),
            });
            if !ok {
                failures.push((minion.as_str().into(), Stamp(back), 0));
                failed.push(minion.clone());
            }
            if verdicts.len() == 2048 {
                batch.verdicts.push(JobVerdicts {
                    jid: jid.clone(),
                    fun: Some("state.apply".into()),
                    verdicts: std::mem::take(&mut verdicts),
                    failures: std::mem::take(&mut failures),
                    causes: vec![failure.clone()],
                });
                store.write(&std::mem::take(&mut batch)).expect("written");
            }
        }
        let close = at + 600 * S;
        let mut g = group.clone();
        g["count"] = json!(failed.len());
        g["minions"] = json!(failed.iter().take(10).collect::<Vec<_>>());
        n += 1;
        batch
            .rows
            .push(row("failure_group", close, &jid, None, g, n));
        let mut c = completed.clone();
        let returned = (minions.len() as u64) - missed;
        c["expected"] = json!(minions.len());
        c["returned"] = json!(returned);
        c["succeeded"] = json!(returned - failed.len() as u64);
        c["failed"] = json!(failed.len());
        c["missing"] = json!({ "no_response": missed });
        n += 1;
        batch
            .rows
            .push(row("job_completed", close, &jid, None, c, n));
        batch.verdicts.push(JobVerdicts {
            jid: jid.clone(),
            fun: Some("state.apply".into()),
            verdicts,
            failures,
            causes: vec![failure.clone()],
        });
        store.write(&batch).expect("written");
        generated.returns += returned;
        generated.failed += failed.len() as u64;
        generated.missing += missed;
        if at >= now - 86_400 * S {
            generated.last_day_jobs += 1;
        }
        generated.jobs.push(jid);
    }
    generated
}

/// What an answer must hold.
type Check = Box<dyn Fn(&Value)>;

/// One question asked of the history, its answer checked, its wall time.
pub struct Timing {
    pub question: String,
    pub median_ms: f64,
    pub target_ms: f64,
}

/// Asks each question `times` times of `saltsight` (the binary) against the
/// history in `state_dir`; checks each answer against `generated`.
pub fn ask(
    saltsight: &Path,
    state_dir: &Path,
    scale: Scale,
    generated: &Generated,
    times: usize,
) -> Vec<Timing> {
    let middle = &generated.jobs[generated.jobs.len() / 2];
    let minion = format!("web{:05}.dc1.example.com", scale.minions / 3);
    let questions: Vec<(Vec<String>, f64, Check)> = vec![
        (
            vec!["job".into(), middle.clone()],
            100.0,
            Box::new(move |v: &Value| {
                let answered = v["succeeded"].as_array().map_or(0, Vec::len)
                    + v["failed"].as_array().map_or(0, Vec::len)
                    + v["missing"].as_array().map_or(0, Vec::len);
                assert_eq!(
                    answered, scale.minions,
                    "every minion of the job: {}",
                    v["jid"]
                );
            }),
        ),
        (
            vec!["jobs".into(), "--since".into(), "1d".into()],
            200.0,
            Box::new(|v: &Value| {
                assert!(
                    v.as_array().is_some_and(|a| !a.is_empty()),
                    "the day's jobs"
                )
            }),
        ),
        (
            vec!["minion".into(), minion.clone()],
            300.0,
            Box::new(|v: &Value| {
                assert!(
                    v["jobs"].as_array().is_some_and(|a| !a.is_empty()),
                    "its jobs"
                )
            }),
        ),
        (
            vec!["failures".into(), "--since".into(), "7d".into()],
            500.0,
            Box::new(|v: &Value| {
                assert!(
                    v.as_array()
                        .and_then(|a| a.first())
                        .is_some_and(|f| f["minions"].as_u64() > Some(0)),
                    "the root cause"
                )
            }),
        ),
    ];
    let day_jobs = generated.last_day_jobs;
    let mut timings = Vec::new();
    for (args, target_ms, check) in questions {
        let mut walls = Vec::new();
        for _ in 0..times {
            let start = Instant::now();
            let out = Command::new(saltsight)
                .args(&args)
                .arg("--json")
                .arg("--state.dir")
                .arg(state_dir)
                .env_remove("SALTSIGHT_CONFIG")
                .output()
                .expect("saltsight runs");
            walls.push(start.elapsed().as_secs_f64() * 1000.0);
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let answer: Value = serde_json::from_slice(&out.stdout).expect("a JSON answer");
            check(&answer);
            if args[0] == "jobs" {
                assert!(
                    answer.as_array().map_or(0, Vec::len) >= day_jobs.saturating_sub(1),
                    "the day's jobs"
                );
            }
        }
        walls.sort_by(f64::total_cmp);
        timings.push(Timing {
            question: format!("saltsight {}", args.join(" ")),
            median_ms: walls[walls.len() / 2],
            target_ms,
        });
    }
    timings
}
