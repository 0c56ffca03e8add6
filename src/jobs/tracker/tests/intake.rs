//! Tests of a big job's names taken a slice at a time.
use super::*;
use crate::jobs::tracker::intake::{FIRST_SLICE, INTAKE_SLICE};

/// `count` names in no order (a permutation, as Salt lists a big target).
fn names(count: usize) -> Vec<String> {
    (0..count)
        .map(|m| format!("web{:06}", m * 7_919 % count))
        .collect()
}

/// Every slice left, a step each, then every batch of verdicts: the slices
/// taken.
fn drain(lab: &mut Lab) -> usize {
    let mut slices = 0;
    while lab.tracker.taking() {
        lab.tracker.take_more_names(&mut lab.out);
        slices += 1;
    }
    while lab.tracker.has_more() {
        lab.tracker.more(&mut lab.out);
    }
    slices
}

/// `event` alone (`Lab::feed` advances the clock first).
fn event_alone(lab: &mut Lab, tag: &str, data: serde_json::Value, at: i64) {
    let frame = salt_frame(tag, &data, false);
    let event = decode(&frame).expect("decode");
    lab.tracker.on_event(&event, Stamp(at * S), &mut lab.out);
}

fn ret_alone(lab: &mut Lab, jid: &str, minion: &str, retcode: i64, at: i64) {
    event_alone(
        lab,
        &format!("salt/job/{jid}/ret/{minion}"),
        json!({"jid": jid, "id": minion, "fun": "state.apply", "return": {},
        "retcode": retcode, "_stamp": Stamp(at * S).to_string()}),
        at,
    );
}

/// A job of more than a slice: published with its first slice, each next
/// slice one step, presence's verdicts given as their names are taken, the
/// master's `missing` once all are; every minion judged at the deadline in
/// the order Salt listed them, as a whole job's are.
#[test]
fn a_big_jobs_names_are_taken_a_slice_at_a_time_and_judged_as_a_whole() {
    let mut config = short("state.apply", 60);
    config.max_expected = 100_000;
    let mut lab = Lab::new(config);
    // Read at publication, then two slices, the second short.
    let names = names(FIRST_SLICE + 2 * INTAKE_SLICE - 50);
    let minions: Vec<&str> = names.iter().map(String::as_str).collect();
    let (early, late) = (minions[10], minions[FIRST_SLICE + INTAKE_SLICE + 5]);
    lab.feed(1, "salt/presence/present", json!({"present": minions}));
    lab.feed(
        2,
        "salt/presence/change",
        json!({"new": [], "lost": [early, late]}),
    );
    lab.out.clear();
    let listed_missing = minions[FIRST_SLICE + 1];
    lab.feed(
        5,
        "salt/job/1/new",
        json!({"jid": "1", "fun": "state.apply", "arg": [], "tgt": "*",
        "minions": minions, "missing": ["ghost", listed_missing]}),
    );
    assert!(lab.tracker.taking(), "taken in slices");
    let judged = |lab: &Lab| -> Vec<String> {
        lab.missing()
            .into_iter()
            .map(|(_, minion, _)| minion)
            .collect()
    };
    assert_eq!(judged(&lab), [early], "the first slice's only");
    assert_eq!(drain(&mut lab), 2, "one step a slice");
    assert_eq!(judged(&lab), [early, late, "ghost"]);
    assert!(
        lab.missing()
            .iter()
            .all(|(_, _, r)| *r == MissingReason::NotConnected)
    );
    assert_eq!(lab.tracker.expected_outstanding(), minions.len() - 2);

    // Every minion but one returns; the rest judged in Salt's order.
    for &minion in &minions[1..] {
        lab.ret(10, "1", minion, "state.apply", json!({}));
    }
    assert_eq!(lab.tracker.stats.unplaced_returns.get(), 0);
    assert_eq!(lab.tracker.stats.returns.get(), (minions.len() - 1) as u64);
    lab.out.clear();
    lab.tracker.advance(Stamp(70 * S), &mut lab.out);
    drain(&mut lab);
    assert_eq!(
        lab.missing(),
        [("1".into(), minions[0].into(), MissingReason::NoResponse)]
    );
    assert!(matches!(
        lab.out.last().map(|r| &r.body),
        Some(RecordBody::JobCompleted(c)) if c.returned == (minions.len() - 1) as u32
    ));
}

/// Returns while a job's names are taken are counted at once, each placed
/// as its name is taken: a duplicate is one, a minion the job never lists
/// is not targeted after all; the job closes only once every name is taken.
#[test]
fn returns_before_their_names_are_counted_and_placed_as_they_are_taken() {
    let mut lab = Lab::new(short("state.apply", 60));
    let names = names(FIRST_SLICE + INTAKE_SLICE + 10);
    let minions: Vec<&str> = names.iter().map(String::as_str).collect();
    lab.new_job(5, "1", "state.apply", json!([]), &minions);
    let last = minions[minions.len() - 1];
    // The job's `publish` (3007+) comes next: it reads no names.
    event_alone(
        &mut lab,
        "salt/job/1/publish",
        json!({"jid": "1", "fun": "state.apply", "arg": [], "tgt": "*"}),
        5,
    );
    ret_alone(&mut lab, "1", last, 0, 6);
    ret_alone(&mut lab, "1", last, 0, 6);
    ret_alone(&mut lab, "1", "elsewhere", 2, 6);
    ret_alone(&mut lab, "1", minions[0], 2, 6);
    assert!(
        lab.tracker.taking(),
        "a publish or a return waits for no slice"
    );
    assert_eq!(lab.tracker.stats.duplicate_returns.get(), 1);
    assert_eq!(lab.tracker.stats.unplaced_returns.get(), 0, "not known yet");
    assert_eq!(lab.tracker.expected_outstanding(), minions.len() - 3);
    lab.tracker.take_more_names(&mut lab.out);
    assert!(lab.tracker.taking());
    ret_alone(&mut lab, "1", minions[FIRST_SLICE + 1], 0, 7);
    assert_eq!(drain(&mut lab), 1);
    assert_eq!(lab.tracker.stats.unplaced_returns.get(), 1, "elsewhere");
    assert_eq!(lab.tracker.stats.returns.get(), 5);
    assert_eq!(lab.tracker.expected_outstanding(), minions.len() - 3);
    ret_alone(&mut lab, "1", last, 0, 8);
    assert_eq!(lab.tracker.stats.duplicate_returns.get(), 2, "placed");

    lab.out.clear();
    lab.tracker.advance(Stamp(70 * S), &mut lab.out);
    drain(&mut lab);
    let judged: Vec<String> = lab.missing().into_iter().map(|(_, m, _)| m).collect();
    assert_eq!(judged.len(), minions.len() - 3);
    for returned in [last, minions[0], minions[FIRST_SLICE + 1], "elsewhere"] {
        assert!(!judged.iter().any(|m| m == returned), "{returned}");
    }
    assert!(matches!(
        lab.out.last().map(|r| &r.body),
        Some(RecordBody::JobCompleted(c))
            if c.returned == 3 && c.failed == 1 && c.expected as usize == minions.len()
    ));
}

/// Any event but a return before the driver took every slice (a
/// presence change, another job, the deadline) takes the rest first:
/// nothing else sees a job part taken; a job all of whose minions are not
/// connected closes once taken.
#[test]
fn anything_but_a_return_before_the_last_slice_takes_the_rest_first() {
    let mut lab = Lab::new(short("state.apply", 60));
    let names = names(FIRST_SLICE + 10);
    let minions: Vec<&str> = names.iter().map(String::as_str).collect();
    lab.new_job(5, "1", "state.apply", json!([]), &minions);
    assert!(lab.tracker.taking());
    event_alone(
        &mut lab,
        "salt/presence/change",
        json!({"new": [], "lost": []}),
        6,
    );
    assert!(!lab.tracker.taking());
    ret_alone(&mut lab, "1", minions[minions.len() - 1], 0, 6);
    assert_eq!(
        lab.tracker.stats.unplaced_returns.get(),
        0,
        "the last was listed"
    );
    assert_eq!(lab.tracker.expected_outstanding(), minions.len() - 1);

    lab.new_job(7, "2", "state.apply", json!([]), &minions);
    lab.tracker.advance(Stamp(100 * S), &mut lab.out);
    drain(&mut lab);
    let judged = lab.missing().iter().filter(|(jid, ..)| jid == "2").count();
    assert_eq!(judged, minions.len(), "every minion of the job part taken");

    lab.feed(101, "salt/presence/present", json!({"present": minions}));
    lab.feed(102, "salt/presence/present", json!({"present": []}));
    lab.out.clear();
    lab.new_job(103, "3", "state.apply", json!([]), &minions);
    drain(&mut lab);
    assert_eq!(lab.missing().len(), minions.len());
    assert!(matches!(
        lab.out.last().map(|r| &r.body),
        Some(RecordBody::JobCompleted(c)) if c.jid == "3"
    ));
    assert_eq!(lab.tracker.open_jobs(), 0);
    assert_eq!(lab.tracker.expected_outstanding(), 0);
}

/// Big jobs expecting the same minions, in another order, hold one list
/// once taken, each with its own states; a list with one minion more is
/// its own.
#[test]
fn big_jobs_expecting_the_same_minions_share_their_names() {
    let mut config = short("state.apply", 60);
    config.max_expected = 100_000;
    let mut lab = Lab::new(config);
    let names = names(FIRST_SLICE + 100);
    let minions: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut reversed = minions.clone();
    reversed.reverse();
    lab.feed(0, "salt/presence/present", json!({"present": minions}));
    lab.new_job(1, "1", "state.apply", json!([]), &minions);
    drain(&mut lab);
    // Judged not connected while its job is taken: its state moves with it.
    let lost = reversed[20];
    lab.feed(
        2,
        "salt/presence/change",
        json!({"new": [], "lost": [lost]}),
    );
    lab.new_job(2, "2", "state.apply", json!([]), &reversed);
    drain(&mut lab);
    let mut other = reversed.clone();
    other[5] = "elsewhere";
    lab.new_job(3, "3", "state.apply", json!([]), &other);
    drain(&mut lab);
    let held = |jid: &str| &lab.tracker.open[jid].minions;
    assert!(held("2").shares_names_with(held("1")));
    assert!(!held("3").shares_names_with(held("1")));

    // Each job's states are its own, each at its minion's place.
    for &minion in &reversed[..10] {
        lab.ret(5, "2", minion, "state.apply", json!({}));
    }
    lab.ret(5, "1", minions[0], "state.apply", json!({}));
    assert_eq!(lab.tracker.stats.unplaced_returns.get(), 0);
    lab.tracker.advance(Stamp(70 * S), &mut lab.out);
    drain(&mut lab);
    let missing = |jid: &str| lab.missing().iter().filter(|(j, ..)| j == jid).count();
    assert_eq!(missing("1"), minions.len() - 1);
    assert_eq!(missing("2"), minions.len() - 10);
    let judged_2: Vec<String> = lab
        .missing()
        .into_iter()
        .filter(|(jid, ..)| jid == "2")
        .map(|(_, minion, _)| minion)
        .collect();
    assert!(
        reversed[..10]
            .iter()
            .all(|m| !judged_2.iter().any(|j| j == m))
    );
    for minion in [lost, minions[20]] {
        let times = judged_2.iter().filter(|j| *j == minion).count();
        assert_eq!(times, 1, "{minion} judged once");
    }
}
