//! The drift stage over whole runs: three minions, a commit applied, a hand
//! edit on one, a command that changes every run, a test=True run, a new
//! commit.

use serde_json::{Value, json};

use super::*;

const C1: &str = "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1";
const C2: &str = "c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2";

/// The SLS that changed between two commits (here: `web` between C1 and C2).
struct Git;

impl SlsHistory for Git {
    fn sls_changed(&mut self, old: &str, new: &str, sls: &str) -> Option<bool> {
        Some(old != new && sls == "web")
    }
}

fn state(sls: &str, id: &str, fun: &str, changes: Value, result: Value) -> (String, Value) {
    let (module, function) = fun.split_once('.').expect("mod.fun");
    (
        format!("{module}_|-{id}_|-{id}_|-{function}"),
        json!({"result": result, "__sls__": sls, "__id__": id, "name": id, "changes": changes}),
    )
}

/// A highstate's return: `motd` (web), `stamp` (a cmd.run), `tools` (pkgs);
/// each changed or not.
fn highstate(motd: bool, stamp: bool, tools: bool, test: bool) -> Vec<u8> {
    let result = if test { Value::Null } else { json!(true) };
    let changed = |yes: bool, what: Value| if yes { what } else { json!({}) };
    let entries = [
        state(
            "web",
            "motd",
            "file.managed",
            changed(motd, json!({"diff": "-by hand\n+managed"})),
            if test && !motd {
                json!(true)
            } else {
                result.clone()
            },
        ),
        state(
            "base",
            "stamp",
            "cmd.run",
            changed(stamp, json!({"pid": 1, "retcode": 0})),
            if test && !stamp {
                json!(true)
            } else {
                result.clone()
            },
        ),
        state(
            "pkgs",
            "tools",
            "pkg.installed",
            changed(tools, json!({"htop": {"old": "", "new": "3"}})),
            if test && !tools {
                json!(true)
            } else {
                result.clone()
            },
        ),
    ];
    let map: serde_json::Map<String, Value> = entries.into_iter().collect();
    rmp_serde::to_vec_named(&Value::Object(map)).expect("packs")
}

struct Lab {
    stage: DriftStage,
    context: Shared<JobContext>,
    test_context: Shared<JobContext>,
    t: i64,
}

impl Lab {
    fn new() -> Self {
        Self {
            stage: DriftStage::new(
                DriftConfig::default(),
                RecordFactory::new("master".to_owned()),
            ),
            context: Default::default(),
            test_context: JobContext {
                test: true,
                ..JobContext::default()
            }
            .into(),
            t: 0,
        }
    }

    /// One job: each minion's return; the records at its close.
    fn job(
        &mut self,
        jid: &str,
        commit: &str,
        test: bool,
        returns: &[(&str, Vec<u8>)],
    ) -> Vec<Record> {
        let mut out = Vec::new();
        for (minion, ret) in returns {
            self.t += 1;
            let states = States::of(ret);
            let run = StateRunSeen {
                jid,
                minion,
                fun: "state.highstate",
                test,
                context: if test {
                    &self.test_context
                } else {
                    &self.context
                },
                tree: Some(("states", commit)),
                ret,
                states: states.as_ref(),
                at: Stamp(self.t * 1_000_000),
            };
            self.stage.on_state_run(&run, &mut Git, &mut out);
        }
        self.stage.close_job(jid, &mut out);
        out
    }
}

fn drifts(records: &[Record]) -> Vec<(String, Vec<(String, ChangeKind)>)> {
    records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::Drift(d) => Some((
                d.minion.clone(),
                d.states
                    .iter()
                    .map(|s| (format!("{}:{}", s.sls, s.state_id), s.change))
                    .collect(),
            )),
            _ => None,
        })
        .collect()
}

fn judged(records: &[Record]) -> Vec<(String, SettleStatus)> {
    records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::NonIdempotent(n) => Some((format!("{}:{}", n.sls, n.state_id), n.status)),
            _ => None,
        })
        .collect()
}

#[test]
fn drift_is_told_from_a_commits_changes_and_from_a_state_that_never_settles() {
    let mut lab = Lab::new();
    let all = |motd, stamp, tools| -> Vec<(&'static str, Vec<u8>)> {
        ["m1", "m2", "m3"]
            .iter()
            .map(|m| (*m, highstate(motd, stamp, tools, false)))
            .collect()
    };
    // The first highstate under C1 changes everything: the commit's changes.
    let first = lab.job("j1", C1, false, &all(true, true, true));
    assert_eq!(drifts(&first), vec![], "{first:?}");
    assert_eq!(lab.stage.stats.intentional.get(), 9);

    // Someone edits motd by hand on m1: the next highstate puts it back. The
    // command changes again everywhere: not settled, not drift.
    let second = lab.job(
        "j2",
        C1,
        false,
        &[
            ("m1", highstate(true, true, false, false)),
            ("m2", highstate(false, true, false, false)),
            ("m3", highstate(false, true, false, false)),
        ],
    );
    assert_eq!(
        drifts(&second),
        vec![(
            "m1".into(),
            vec![("web:motd".into(), ChangeKind::Corrected)]
        )]
    );
    let RecordBody::Drift(d) = &second[0].body else {
        panic!("a drift record");
    };
    assert_eq!((d.commit.as_str(), d.unsettled), (C1, 1));
    assert!(
        d.states[0].summary.contains("-by hand"),
        "{:?}",
        d.states[0]
    );

    // The third run changes the command again: judged non-idempotent once.
    let third = lab.job("j3", C1, false, &all(false, true, false));
    assert_eq!(drifts(&third), vec![]);
    assert_eq!(
        judged(&third),
        vec![("base:stamp".into(), SettleStatus::NeverSettles)]
    );
    let fourth = lab.job("j4", C1, false, &all(false, true, false));
    assert_eq!((drifts(&fourth), judged(&fourth)), (vec![], vec![]));
    assert!(lab.stage.stats.never_settles.get() >= 3);

    // A package removed by hand on m2, seen by a test=True run: detected.
    let test_run = lab.job(
        "j5",
        C1,
        true,
        &[
            ("m1", highstate(false, true, false, true)),
            ("m2", highstate(false, true, true, true)),
        ],
    );
    assert_eq!(
        drifts(&test_run),
        vec![(
            "m2".into(),
            vec![("pkgs:tools".into(), ChangeKind::Detected)]
        )]
    );
    // ... and the test run taught the memory nothing: the next real run puts
    // it back, corrected.
    let fifth = lab.job(
        "j6",
        C1,
        false,
        &[("m2", highstate(false, true, true, false))],
    );
    assert_eq!(
        drifts(&fifth),
        vec![(
            "m2".into(),
            vec![("pkgs:tools".into(), ChangeKind::Corrected)]
        )]
    );

    // C2 changed web: its motd change is intentional; pkgs did not change
    // under C2, so a tools change is still drift.
    let sixth = lab.job(
        "j7",
        C2,
        false,
        &[("m3", highstate(true, false, true, false))],
    );
    assert_eq!(
        drifts(&sixth),
        vec![(
            "m3".into(),
            vec![("pkgs:tools".into(), ChangeKind::Corrected)]
        )]
    );
    // The command ran without a change three times: it settles.
    let calm = lab.job("j8", C2, false, &all(false, false, false));
    assert_eq!(
        judged(&calm),
        vec![("base:stamp".into(), SettleStatus::Settled)]
    );
}

#[test]
fn runs_without_a_watched_tree_are_not_judged_and_the_memory_is_bounded() {
    let config = DriftConfig {
        max_remembered: 2,
        ..DriftConfig::default()
    };
    let mut stage = DriftStage::new(config, RecordFactory::new("master".to_owned()));
    let context = Shared::default();
    let ret = highstate(true, true, true, false);
    let states = States::of(&ret);
    let mut run = StateRunSeen {
        jid: "j1",
        minion: "m1",
        fun: "state.apply",
        test: false,
        context: &context,
        tree: None,
        ret: &ret,
        states: states.as_ref(),
        at: Stamp(0),
    };
    let mut out = Vec::new();
    stage.on_state_run(&run, &mut Git, &mut out);
    assert_eq!(stage.stats.runs_unjudged.get(), 1);
    run.tree = Some(("states", C1));
    stage.on_state_run(&run, &mut Git, &mut out);
    assert_eq!(stage.stats.remembered.get(), 2);
    assert_eq!(stage.stats.remembered_refused.get(), 1);
}

#[test]
fn a_checkpoint_keeps_what_decides_the_next_runs() {
    let all = |motd, stamp| -> Vec<(&'static str, Vec<u8>)> {
        ["m1", "m2", "m3"]
            .iter()
            .map(|m| (*m, highstate(motd, stamp, false, false)))
            .collect()
    };
    let mut lab = Lab::new();
    lab.job("j1", C1, false, &all(true, true));
    lab.job("j2", C1, false, &all(false, true));
    // j3's first return is held (its job open) when the checkpoint is written.
    let mut out = Vec::new();
    let ret = highstate(true, true, false, false);
    let states = States::of(&ret);
    let run = StateRunSeen {
        jid: "j3",
        minion: "m1",
        fun: "state.highstate",
        test: false,
        context: &lab.context,
        tree: Some(("states", C1)),
        ret: &ret,
        states: states.as_ref(),
        at: Stamp(100_000_000),
    };
    lab.stage.on_state_run(&run, &mut Git, &mut out);
    // A copy taken now is the memory as it is now, whatever runs come after
    // it (its parts copy on write): the checkpoint's thread encodes it.
    let snapshot = lab.stage.snapshot();
    let written = serde_json::to_string(&snapshot.saving()).expect("saves");
    let mut after = Lab::new();
    after.t = lab.t;
    after
        .stage
        .restore(serde_json::from_str(&written).expect("reads back"));
    assert_eq!(
        serde_json::to_string(&after.stage.snapshot().saving()).expect("saves"),
        written,
        "the same memory"
    );
    // The rest of j3 on both: the same records.
    let rest = [
        ("m2", highstate(false, true, false, false)),
        ("m3", highstate(false, true, false, false)),
    ];
    let before = lab.job("j3", C1, false, &rest);
    lab.job("j4", C2, false, &all(true, false));
    assert_eq!(
        serde_json::to_string(&snapshot.saving()).expect("saves"),
        written,
        "the copy is untouched by the runs after it"
    );
    let restored = after.job("j3", C1, false, &rest);
    assert_eq!(drifts(&restored), drifts(&before));
    assert_eq!(
        drifts(&restored),
        vec![(
            "m1".into(),
            vec![("web:motd".into(), ChangeKind::Corrected)]
        )]
    );
    assert_eq!(judged(&restored), judged(&before));
}
