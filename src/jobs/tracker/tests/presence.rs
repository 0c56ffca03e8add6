//! Tests of presence in verdicts: from the master's events and from its
//! connections to the publish port.
use super::*;

/// Presence separates down from hung: a minion lost before the publish or
/// during the job is not_connected; one connected and silent is no_response
/// (connected_silent); one presence never saw connected is plain no_response.
#[test]
fn presence_tells_a_disconnected_minion_from_a_silent_one() {
    let mut lab = Lab::new(short("test.ping", 10));
    lab.feed(
        1,
        "salt/presence/present",
        json!({"present": ["a", "b", "c"]}),
    );
    lab.feed(2, "salt/presence/change", json!({"new": [], "lost": ["a"]}));
    lab.new_job(5, "1", "test.ping", json!([]), &["a", "b", "c", "nat"]);
    lab.feed(7, "salt/presence/change", json!({"new": [], "lost": ["b"]}));
    lab.tracker.advance(Stamp(16 * S), &mut lab.out);
    let verdicts: Vec<(String, MissingReason, MissingEvidence, Option<Stamp>)> = lab
        .out
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::MinionMissing(m) => {
                Some((m.minion.clone(), m.reason, m.evidence, m.disconnected_at))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            (
                "a".into(),
                MissingReason::NotConnected,
                MissingEvidence::PresenceAbsent,
                Some(Stamp(2 * S))
            ),
            (
                "b".into(),
                MissingReason::NotConnected,
                MissingEvidence::PresenceLost,
                Some(Stamp(7 * S))
            ),
            (
                "c".into(),
                MissingReason::NoResponse,
                MissingEvidence::ConnectedSilent,
                None
            ),
            (
                "nat".into(),
                MissingReason::NoResponse,
                MissingEvidence::Nothing,
                None
            ),
        ]
    );
}

/// The master's connections (issue 28): a minion with no connection at publish
/// is judged `not_connected` at once, in the publish's record time, and is
/// not waited for; one whose connection goes during the job is
/// `presence_lost`; one connected and silent is `connected_silent` with its
/// address; one behind a shared address is plain `no_response`. A minion
/// judged at publish that answers after all is a late return.
#[test]
fn connections_judge_an_absent_minion_at_publish_and_a_hung_one_at_the_deadline() {
    use crate::master_connections::{ConnectionView, Seen};
    let addr = |s: &str| -> std::net::IpAddr { s.parse().unwrap() };
    let view = |seen: &[(&str, Seen)]| ConnectionView {
        seen: seen.iter().map(|(m, s)| (Box::from(*m), *s)).collect(),
        ..ConnectionView::default()
    };
    let mut lab = Lab::new(short("test.ping", 10));
    lab.tracker.on_connections(
        &view(&[
            (
                "up",
                Seen::Connected {
                    from: addr("127.0.0.2"),
                },
            ),
            (
                "hung",
                Seen::Connected {
                    from: addr("127.0.0.3"),
                },
            ),
            ("down", Seen::NotConnected),
            (
                "goes",
                Seen::Connected {
                    from: addr("127.0.0.5"),
                },
            ),
            ("nat", Seen::Unclear),
        ]),
        Stamp(S),
    );
    lab.new_job(
        5,
        "1",
        "test.ping",
        json!([]),
        &["up", "hung", "down", "goes", "nat"],
    );
    let at_publish: Vec<_> = lab
        .out
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::MinionMissing(m) => {
                Some((m.minion.clone(), m.evidence, m.disconnected_at, r.at))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        at_publish,
        [(
            "down".to_string(),
            MissingEvidence::PresenceAbsent,
            None,
            Stamp(5 * S)
        )],
        "judged at once"
    );
    lab.ret(6, "1", "up", "test.ping", json!(true));
    lab.tracker
        .on_connections(&view(&[("goes", Seen::NotConnected)]), Stamp(8 * S));
    lab.tracker.advance(Stamp(16 * S), &mut lab.out);
    let verdicts: Vec<_> = lab
        .out
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::MinionMissing(m) => {
                Some((m.minion.clone(), m.reason, m.evidence, m.address.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            (
                "down".into(),
                MissingReason::NotConnected,
                MissingEvidence::PresenceAbsent,
                None
            ),
            (
                "hung".into(),
                MissingReason::NoResponse,
                MissingEvidence::ConnectedSilent,
                Some("127.0.0.3".into())
            ),
            (
                "goes".into(),
                MissingReason::NotConnected,
                MissingEvidence::PresenceLost,
                None
            ),
            (
                "nat".into(),
                MissingReason::NoResponse,
                MissingEvidence::Nothing,
                None
            ),
        ]
    );
    let completed = lab
        .out
        .iter()
        .rev()
        .find_map(|r| match &r.body {
            RecordBody::JobCompleted(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(completed.missing[&MissingReason::NotConnected], 2);
    assert_eq!(completed.missing[&MissingReason::NoResponse], 2);
    assert_eq!(lab.tracker.expected_outstanding(), 0);
    // "down" answers after the verdict: a late return, and the job amended.
    lab.ret(20, "1", "down", "test.ping", json!(true));
    assert!(matches!(
        lab.out[lab.out.len() - 2].body,
        RecordBody::LateReturn(_)
    ));
}

/// A minion judged `not_connected` at publish that answers while the job is
/// still open: a late return, its reason count taken back.
#[test]
fn a_minion_judged_absent_at_publish_that_answers_before_the_deadline_is_late() {
    use crate::master_connections::{ConnectionView, Seen};
    let mut lab = Lab::new(short("test.ping", 10));
    lab.tracker.on_connections(
        &ConnectionView {
            seen: vec![("a".into(), Seen::NotConnected)],
            ..ConnectionView::default()
        },
        Stamp(S),
    );
    lab.new_job(2, "1", "test.ping", json!([]), &["a", "b"]);
    lab.ret(3, "1", "a", "test.ping", json!(true));
    lab.ret(4, "1", "b", "test.ping", json!(true));
    let kinds: Vec<&str> = lab.out.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "job_published",
            "minion_missing",
            "late_return",
            "minion_return",
            "job_completed"
        ]
    );
    let RecordBody::JobCompleted(c) = &lab.out[4].body else {
        panic!("not a job_completed");
    };
    assert!(c.missing.is_empty(), "{:?}", c.missing);
    assert_eq!((c.returned, c.succeeded), (2, 2));
}
