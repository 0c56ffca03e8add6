//! Tests of a big job's names taken a slice at a time.
use super::*;
use crate::jobs::tracker::intake::{FIRST_SLICE, INTAKE_SLICE};

/// `count` names in no order (a permutation, as Salt lists a big target).
fn names(count: usize) -> Vec<String> {
    (0..count)
        .map(|m| format!("web{:06}", m * 7_919 % count))
        .collect()
}

fn drain(lab: &mut Lab) -> usize {
    let mut steps = 0;
    while lab.tracker.has_more() {
        lab.tracker.more(&mut lab.out);
        steps += 1;
    }
    steps
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
    assert!(lab.tracker.has_more(), "taken in slices");
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

/// Whatever comes before the driver took every slice (a return of a minion
/// listed last, the deadline) takes the rest first: nothing sees a job part
/// taken; a job all of whose minions are not connected closes once taken.
#[test]
fn anything_before_the_last_slice_takes_the_rest_first() {
    let mut lab = Lab::new(short("state.apply", 60));
    let names = names(FIRST_SLICE + 10);
    let minions: Vec<&str> = names.iter().map(String::as_str).collect();
    lab.new_job(5, "1", "state.apply", json!([]), &minions);
    assert!(lab.tracker.has_more());
    let last = minions[minions.len() - 1];
    // The event alone (`Lab::feed` advances the clock first).
    let frame = salt_frame(
        &format!("salt/job/1/ret/{last}"),
        &json!({"jid": "1", "id": last,
        "fun": "state.apply", "return": {}, "retcode": 0, "_stamp": Stamp(6 * S).to_string()}),
        false,
    );
    let event = decode(&frame).expect("decode");
    lab.tracker.on_event(&event, Stamp(6 * S), &mut lab.out);
    assert!(!lab.tracker.has_more());
    assert_eq!(
        lab.tracker.stats.unplaced_returns.get(),
        0,
        "{last} was listed"
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
