//! Rollouts: completion and delays, supersedes, stalls, a fleet that shrinks,
//! and a run counted without walking the fleet.

use super::*;

const S: i64 = 1_000_000;

fn facts(commit: &str, changed: &[&str]) -> CommitFacts {
    CommitFacts {
        repo: "states".into(),
        commit: commit.into(),
        subject: format!("{commit}: a change"),
        pull_request: None,
        committed_at: Some(Stamp(0)),
        changed_sls: changed.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// Rollouts (at most 4 open at once), re-emitted at every change, stalled after
/// `stall_after` without progress.
fn followed(stall_after: Duration) -> Rollouts {
    Rollouts::new(RecordFactory::new("m"), Duration::ZERO, stall_after, 4)
}

fn rollouts(out: &[Record]) -> Vec<Rollout> {
    out.iter()
        .filter_map(|r| match &r.body {
            RecordBody::Rollout(r) => Some((**r).clone()),
            _ => None,
        })
        .collect()
}

fn run<'a>(minion: &'a str, succeeded: bool) -> RunOutcome<'a> {
    static FINGERPRINT: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| "fp".into());
    RunOutcome {
        minion,
        jid: "j",
        shared_jid: None,
        succeeded,
        fingerprint: (!succeeded).then_some(&*FINGERPRINT),
    }
}

const FLEET: &[&str] = &["db1", "web1", "web2"];

#[test]
fn a_commit_is_complete_when_every_minion_applied_it_with_its_delays() {
    let mut r = followed(Duration::from_secs(3600));
    let mut out = Vec::new();
    r.head(facts("A", &["web"]), true, FLEET, Stamp(10 * S), &mut out);
    assert_eq!(rollouts(&out)[0].pending, 3);
    r.outcome(
        "states",
        0,
        &run("web1", true),
        FLEET,
        Stamp(20 * S),
        &mut out,
    );
    r.outcome(
        "states",
        0,
        &run("web2", true),
        FLEET,
        Stamp(30 * S),
        &mut out,
    );
    r.outcome(
        "states",
        0,
        &run("db1", false),
        FLEET,
        Stamp(40 * S),
        &mut out,
    );
    let mid = rollouts(&out).pop().unwrap();
    assert_eq!((mid.applied, mid.failed, mid.pending), (2, 1, 0));
    assert_eq!(mid.sample_failed[0].minion, "db1");
    assert_eq!(mid.reached_50, Some(Stamp(30 * S)));
    assert_eq!(mid.delay_from_commit.p50_s, Some(30.0));
    assert_eq!(mid.delay_from_seen.p50_s, Some(20.0));
    r.outcome(
        "states",
        0,
        &run("db1", true),
        FLEET,
        Stamp(50 * S),
        &mut out,
    );
    let done = rollouts(&out).pop().unwrap();
    assert_eq!(done.status, RolloutStatus::Complete);
    assert_eq!(done.delay_from_commit.p100_s, Some(50.0));
    assert!(r.open_rollouts("states").is_empty(), "closed once complete");
}

#[test]
fn a_newer_head_supersedes_a_pending_rollout_and_only_its_sls_count() {
    let mut r = followed(Duration::from_secs(3600));
    let mut out = Vec::new();
    r.head(facts("B", &["web"]), true, FLEET, Stamp(0), &mut out);
    let b = &r.open_rollouts("states")[0];
    assert!(b.covered_by(&Coverage::Sls(vec!["web".into()])));
    assert!(!b.covered_by(&Coverage::Sls(vec!["db".into()])));
    r.outcome("states", 0, &run("web1", true), FLEET, Stamp(S), &mut out);
    r.head(facts("C", &["web"]), true, FLEET, Stamp(2 * S), &mut out);
    let all = rollouts(&out);
    let superseded = all
        .iter()
        .find(|x| x.commit == "B" && x.status == RolloutStatus::Superseded)
        .expect("B superseded");
    assert_eq!((superseded.applied, superseded.pending), (1, 2));
    assert_eq!(superseded.superseded_by.as_deref(), Some("C"));
}

#[test]
fn no_progress_for_the_stall_time_is_stalled_and_it_may_still_complete() {
    let mut r = followed(Duration::from_secs(60));
    let mut out = Vec::new();
    r.head(facts("A", &[]), true, FLEET, Stamp(0), &mut out);
    r.outcome("states", 0, &run("web1", true), FLEET, Stamp(S), &mut out);
    assert_eq!(r.next_due(), Some(Stamp(61 * S)));
    r.advance(Stamp(61 * S), FLEET, &mut out);
    assert_eq!(rollouts(&out).pop().unwrap().status, RolloutStatus::Stalled);
    r.outcome(
        "states",
        0,
        &run("web2", true),
        FLEET,
        Stamp(70 * S),
        &mut out,
    );
    r.outcome(
        "states",
        0,
        &run("db1", true),
        FLEET,
        Stamp(71 * S),
        &mut out,
    );
    assert_eq!(
        rollouts(&out).pop().unwrap().status,
        RolloutStatus::Complete
    );
}

#[test]
fn a_minion_leaving_the_fleet_can_complete_a_rollout() {
    let mut r = followed(Duration::from_secs(60));
    let mut out = Vec::new();
    r.head(facts("A", &[]), true, FLEET, Stamp(0), &mut out);
    r.outcome("states", 0, &run("web1", true), FLEET, Stamp(S), &mut out);
    r.outcome("states", 0, &run("web2", true), FLEET, Stamp(S), &mut out);
    r.fleet_changed(&["web1", "web2"][..], Stamp(2 * S), &mut out);
    let last = rollouts(&out).pop().unwrap();
    assert_eq!((last.status, last.known), (RolloutStatus::Complete, 2));
}

/// A fleet that counts how often it is walked.
struct Walked<'a> {
    members: Vec<&'a str>,
    walks: std::cell::Cell<u32>,
}

impl Members for Walked<'_> {
    fn has(&self, minion: &str) -> bool {
        self.members.contains(&minion)
    }

    fn count(&self) -> usize {
        self.members.len()
    }

    fn listed(&self) -> Vec<&str> {
        self.walks.set(self.walks.get() + 1);
        self.members.clone()
    }

    fn joined(&self, since: usize) -> impl Iterator<Item = &str> {
        self.members.joined(since)
    }
}

#[test]
fn a_run_is_counted_as_it_comes_and_the_fleet_walked_only_to_emit() {
    let names: Vec<String> = (0..40).map(|i| format!("m{i:02}")).collect();
    let mut fleet = Walked {
        members: names.iter().map(String::as_str).collect(),
        walks: std::cell::Cell::new(0),
    };
    // Emitted at most once a minute (and at a change of status).
    let mut r = Rollouts::new(
        RecordFactory::new("m"),
        Duration::from_secs(60),
        Duration::from_secs(3600),
        4,
    );
    let mut out = Vec::new();
    r.head(facts("A", &[]), true, &fleet, Stamp(0), &mut out);
    fleet.walks.set(0);
    let counts = |r: &Rollouts| {
        let x = &r.open_rollouts("states")[0].record;
        (x.known, x.applied, x.failed, x.pending)
    };
    let mut at = 0;
    for (i, name) in names.iter().enumerate().take(30) {
        at += S;
        let ok = i % 3 != 0;
        r.outcome("states", 0, &run(name, ok), &fleet, Stamp(at), &mut out);
    }
    // A failed minion that then applies it, one that fails again, and
    // a minion outside the fleet.
    for (name, ok) in [("m00", true), ("m03", false), ("laptop9", true)] {
        at += S;
        r.outcome("states", 0, &run(name, ok), &fleet, Stamp(at), &mut out);
    }
    assert_eq!(counts(&r), (40, 21, 9, 10));
    assert_eq!(fleet.walks.get(), 0, "no walk of the fleet per run");
    let open = &r.open_rollouts("states")[0];
    let mut whole = open.record.clone();
    let _ = tally(
        &mut whole,
        &open.minions,
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
    );
    assert_eq!(
        (
            whole.known,
            whole.applied,
            whole.failed,
            whole.pending,
            whole.reached_50
        ),
        (40, 21, 9, 10, open.record.reached_50),
        "as counting the whole fleet says"
    );
    // Due: emitted with its samples, kept as the runs came.
    r.advance(Stamp(61 * S), &fleet, &mut out);
    assert_eq!(fleet.walks.get(), 0);
    let emitted = rollouts(&out).pop().unwrap();
    assert_eq!(
        (emitted.applied, emitted.failed, emitted.pending),
        (21, 9, 10)
    );
    assert_eq!(emitted.sample_pending[0], "m30");
    assert_eq!(emitted.sample_failed.len(), 9);
    assert_eq!(emitted.sample_failed[0].minion, "m03");
    // The fleet grew (minions seen on the bus, each before its run):
    // counted on, not again (a first run of a fleet whose keys cannot be
    // read grows it at every return: a walk each was quadratic).
    fleet.walks.set(0);
    fleet.members.extend(["m40", "m41"]);
    for name in ["m40", "m41"] {
        r.outcome(
            "states",
            0,
            &run(name, true),
            &fleet,
            Stamp(62 * S),
            &mut out,
        );
    }
    assert_eq!(counts(&r), (42, 23, 9, 10));
    // One joins with no run yet: pending, first of the samples.
    fleet.members.push("a00");
    r.advance(Stamp(200 * S), &fleet, &mut out);
    let emitted = rollouts(&out).pop().unwrap();
    assert_eq!((emitted.known, emitted.pending), (43, 11));
    assert_eq!(emitted.sample_pending[..2], ["a00", "m30"]);
    assert_eq!(fleet.walks.get(), 0, "no walk of the fleet as it grows");
    // It shrank: counted again, whole.
    fleet.members.retain(|m| *m != "m41");
    r.outcome(
        "states",
        0,
        &run("m39", true),
        &fleet,
        Stamp(201 * S),
        &mut out,
    );
    assert_eq!(counts(&r), (42, 23, 9, 10));
    assert_eq!(fleet.walks.get(), 1);
}

/// A job that closes sends its changed rollouts out at once (issue 68: a
/// rollout read right after the highstate that applied it said 0 applied
/// until the 30 s tick), at most once a second however many close.
#[test]
fn a_closed_jobs_runs_go_out_at_its_close_not_at_the_tick() {
    let mut r = Rollouts::new(
        RecordFactory::new("m"),
        Duration::from_secs(30),
        Duration::from_secs(3600),
        4,
    );
    let mut out = Vec::new();
    r.head(facts("A", &["web"]), true, FLEET, Stamp(10 * S), &mut out);
    out.clear();
    for minion in ["web1", "web2"] {
        r.outcome(
            "states",
            0,
            &run(minion, true),
            FLEET,
            Stamp(12 * S),
            &mut out,
        );
    }
    assert!(rollouts(&out).is_empty(), "counted, not yet sent");
    r.flush(Stamp(12 * S), FLEET, &mut out);
    let sent = rollouts(&out);
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].applied, sent[0].pending), (2, 1));

    // Two jobs closing within a second: the second's count waits for it.
    let mut out = Vec::new();
    r.head(facts("B", &["web"]), true, FLEET, Stamp(20 * S), &mut out);
    out.clear();
    r.outcome(
        "states",
        0,
        &run("web1", true),
        FLEET,
        Stamp(20 * S + 100_000),
        &mut out,
    );
    r.flush(Stamp(20 * S + 100_000), FLEET, &mut out);
    assert!(
        rollouts(&out).is_empty(),
        "opened 0.1 s ago: within a second"
    );
    assert_eq!(r.next_due(), Some(Stamp(21 * S)));
    r.advance(Stamp(21 * S), FLEET, &mut out);
    assert_eq!(rollouts(&out).len(), 1);
    assert_eq!(rollouts(&out)[0].applied, 1);
    assert_eq!(
        r.next_due(),
        Some(Stamp(3620 * S + 100_000)),
        "only its stall check: nothing changed since"
    );
}

/// A fleet of one member whose bound is two standings.
struct Bounded;

impl Members for Bounded {
    fn has(&self, minion: &str) -> bool {
        minion == "web1"
    }

    fn count(&self) -> usize {
        1
    }

    fn listed(&self) -> Vec<&str> {
        vec!["web1"]
    }

    fn joined(&self, since: usize) -> impl Iterator<Item = &str> {
        ["web1"][..].joined(since)
    }

    fn bound(&self) -> usize {
        2
    }
}

/// Runs of minions outside the fleet (a syndic's, a key not listed yet) are
/// remembered up to the fleet's bound, then refused (counted); a member's
/// run always counts.
#[test]
fn standings_outside_the_fleet_are_bounded_and_a_members_run_always_counts() {
    let mut r = followed(Duration::from_secs(3600));
    let mut out = Vec::new();
    r.head(facts("A", &[]), true, &Bounded, Stamp(0), &mut out);
    for (i, minion) in ["far1", "far2", "far3", "web1"].into_iter().enumerate() {
        let at = Stamp((i as i64 + 1) * S);
        r.outcome("states", 0, &run(minion, true), &Bounded, at, &mut out);
    }
    assert_eq!(r.refused, 1, "far3: two standings held");
    let last = rollouts(&out).pop().unwrap();
    assert_eq!(
        (last.known, last.applied, last.status),
        (1, 1, RolloutStatus::Complete)
    );
}

/// A fleet larger than the samples' candidates: the samples a revision
/// gives are those of a walk of the whole fleet at every step (the smallest
/// names first), the fleet walked only when too few candidates are left:
/// rarely with runs in no order, a few times with runs in the order of their
/// names (each run takes a sample out).
#[test]
fn samples_kept_as_runs_come_are_those_of_a_walk_and_walks_are_rare() {
    let names: Vec<String> = (0..2_000).map(|i| format!("m{i:04}")).collect();
    let in_order: Vec<usize> = (0..names.len()).collect();
    // A permutation: 7 is prime to 2,000.
    let no_order: Vec<usize> = (0..names.len()).map(|i| i * 7 % names.len()).collect();
    assert!(walks_to_apply(&names, &in_order) <= 4);
    assert_eq!(walks_to_apply(&names, &no_order), 1);
}

/// Every minion of `names` runs once, in `order`, a tenth failing, then the
/// failed again, applying it: each revision's samples and counts checked
/// against a walk; how many walks the rollout made.
fn walks_to_apply(names: &[String], order: &[usize]) -> u32 {
    let fleet = Walked {
        members: names.iter().map(String::as_str).collect(),
        walks: std::cell::Cell::new(0),
    };
    let mut r = followed(Duration::from_secs(3600));
    let mut out = Vec::new();
    r.head(facts("A", &[]), true, &fleet, Stamp(0), &mut out);
    fleet.walks.set(0);
    let runs = order
        .iter()
        .map(|&i| (&names[i], i % 10 != 3))
        .chain(names.iter().skip(3).step_by(10).map(|name| (name, true)));
    let mut emitted = 0;
    for (i, (name, ok)) in runs.enumerate() {
        let at = Stamp((i as i64 + 1) * S);
        out.clear();
        r.outcome("states", 0, &run(name, ok), &fleet, at, &mut out);
        let got = rollouts(&out).pop().expect("emitted at every run");
        emitted += 1;
        let Some(open) = r.open_rollouts("states").first() else {
            assert_eq!(got.status, RolloutStatus::Complete);
            continue;
        };
        let walks = fleet.walks.get();
        let mut whole = got.clone();
        let _ = tally(&mut whole, &open.minions, &fleet.listed(), None);
        fleet.walks.set(walks);
        assert_eq!(
            (&got.sample_pending, &got.sample_failed),
            (&whole.sample_pending, &whole.sample_failed),
            "after run {i}"
        );
        assert_eq!(
            (got.applied, got.failed, got.pending),
            (whole.applied, whole.failed, whole.pending)
        );
    }
    assert_eq!(emitted, 2_200);
    fleet.walks.get()
}
