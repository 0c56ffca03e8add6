//! Tests of external incidents: the window, revisions, the two ways to close,
//! targets, bounds.
use super::*;
use crate::record::Category;

const S: i64 = 1_000_000;

fn cause(category: Category, host: Option<&str>, url: Option<&str>) -> Classification {
    Classification {
        category,
        rule: "test".into(),
        evidence: None,
        host: host.map(str::to_owned),
        url: url.map(str::to_owned),
        package: None,
    }
}

fn dns(host: &str) -> Classification {
    cause(Category::NetworkDns, Some(host), None)
}

fn fail(
    incidents: &mut Incidents,
    cause: &Classification,
    jid: &str,
    minion: &str,
    secs: i64,
    out: &mut Vec<Record>,
) -> Option<String> {
    incidents.on_failure(
        &Failure {
            jid,
            minion,
            sls: "repo",
            state_id: "mirror",
            state_hash: Some(7),
            cause,
        },
        Stamp(secs * S),
        out,
    )
}

fn incidents(out: &[Record]) -> Vec<ExternalIncident> {
    out.iter()
        .filter_map(|r| match &r.body {
            RecordBody::ExternalIncident(i) => Some(i.clone()),
            _ => None,
        })
        .collect()
}

fn stage() -> Incidents {
    Incidents::new(IncidentConfig::default(), RecordFactory::new("m"))
}

#[test]
fn three_minions_within_the_window_open_one_incident_that_grows() {
    let mut s = stage();
    let mut out = Vec::new();
    let mirror = dns("Mirror.Example.NET.");
    assert_eq!(fail(&mut s, &mirror, "j1", "a", 0, &mut out), None);
    assert_eq!(
        fail(&mut s, &mirror, "j1", "a", 1, &mut out),
        None,
        "the same minion again"
    );
    assert_eq!(fail(&mut s, &mirror, "j1", "b", 2, &mut out), None);
    let id = fail(&mut s, &mirror, "j2", "c", 3, &mut out).expect("opens at the third minion");
    let opened = incidents(&out);
    assert_eq!(opened.len(), 1);
    let first = &opened[0];
    assert_eq!(
        (
            first.target.as_str(),
            first.minions,
            first.jobs,
            first.revision,
            first.status
        ),
        ("mirror.example.net", 3, 2, 0, EpisodeStatus::Open)
    );
    assert_eq!(first.first_seen, Stamp(0));
    assert!(s.any_open());
    // The fourth minion is part of it; it doubles at the sixth: a revision.
    for (i, m) in ["d", "e", "f"].into_iter().enumerate() {
        assert_eq!(
            fail(&mut s, &mirror, "j3", m, 4 + i as i64, &mut out).as_deref(),
            Some(id.as_str())
        );
    }
    let all = incidents(&out);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!((all[1].revision, all[1].minions), (1, 6));
    assert_eq!(all[1].incident, id);
    assert_eq!(s.incident_of(&mirror).as_deref(), Some(id.as_str()));
}

#[test]
fn failures_further_apart_than_the_window_open_nothing() {
    let mut s = stage();
    let mut out = Vec::new();
    let mirror = dns("mirror.example.net");
    for (i, m) in ["a", "b", "c"].into_iter().enumerate() {
        fail(&mut s, &mirror, "j", m, i as i64 * 11 * 60, &mut out);
    }
    assert!(incidents(&out).is_empty());
}

#[test]
fn an_incident_closes_when_quiet_or_when_its_state_succeeds() {
    let mut s = stage();
    let mut out = Vec::new();
    let a = dns("a.example.net");
    let b = cause(
        Category::NetworkConnect,
        None,
        Some("http://127.0.0.1:8099/repo/dists/x:"),
    );
    for m in ["x", "y", "z"] {
        fail(&mut s, &a, "j", m, 0, &mut out);
        fail(&mut s, &b, "j", m, 0, &mut out);
    }
    assert_eq!(s.stats.open.get(), 2);
    assert!(s.incident_of(&b).is_some());
    // b's state succeeds: recovered.
    s.on_outcomes(&[(7, true)], Stamp(60 * S), &mut out);
    let closed: Vec<_> = incidents(&out)
        .into_iter()
        .filter(|i| i.status == EpisodeStatus::Closed)
        .collect();
    assert_eq!(closed.len(), 2, "both failed in state hash 7: {closed:?}");
    assert!(closed.iter().all(|i| i.end == Some(IncidentEnd::Recovered)));
    assert!(closed.iter().any(|i| i.target == "127.0.0.1:8099"));

    // Another opens, and closes quiet 15 minutes after its last failure.
    let c = dns("c.example.net");
    for m in ["x", "y", "z"] {
        fail(&mut s, &c, "j", m, 100, &mut out);
    }
    out.clear();
    s.advance(Stamp((100 + 14 * 60) * S), &mut out);
    assert!(
        incidents(&out)
            .iter()
            .all(|i| i.status == EpisodeStatus::Open)
    );
    s.advance(Stamp((100 + 15 * 60) * S), &mut out);
    let last = incidents(&out).pop().expect("closed");
    assert_eq!(
        (last.status, last.end),
        (EpisodeStatus::Closed, Some(IncidentEnd::Quiet))
    );
    assert!(!s.any_open());
}

#[test]
fn only_external_causes_with_a_host_are_targets() {
    assert_eq!(target_of(&cause(Category::Command, Some("h"), None)), None);
    let package_only = Classification {
        package: Some("nginx".into()),
        ..cause(Category::DependencyPackage, None, None)
    };
    assert_eq!(target_of(&package_only), None);
    assert_eq!(
        target_of(&cause(
            Category::DependencyPackage,
            None,
            Some("https://user@deb.Example.org/debian/dists/x")
        ))
        .as_deref(),
        Some("deb.example.org")
    );
    let both =
        |host: &str, url: &str| target_of(&cause(Category::NetworkConnect, Some(host), Some(url)));
    assert_eq!(
        both("127.0.0.1", "http://127.0.0.1:8099/app.txt").as_deref(),
        Some("127.0.0.1:8099"),
        "the port of the URL naming the same host"
    );
    assert_eq!(
        both("mirror.example.net", "http://other.example.net:81/").as_deref(),
        Some("mirror.example.net")
    );
}

#[test]
fn targets_past_the_bound_are_forgotten_oldest_first_closing_their_incident() {
    let mut s = Incidents::new(
        IncidentConfig {
            max_targets: 2,
            ..IncidentConfig::default()
        },
        RecordFactory::new("m"),
    );
    let mut out = Vec::new();
    let a = dns("a.example.net");
    for m in ["x", "y", "z"] {
        fail(&mut s, &a, "j", m, 0, &mut out);
    }
    fail(&mut s, &dns("b.example.net"), "j", "x", 1, &mut out);
    fail(&mut s, &dns("c.example.net"), "j", "x", 2, &mut out);
    assert_eq!(s.stats.targets_forgotten.get(), 1);
    let last = incidents(&out).pop().expect("a's incident closed");
    assert_eq!(
        (last.target.as_str(), last.end),
        ("a.example.net", Some(IncidentEnd::Evicted))
    );
    assert!(!s.any_open());
}

#[test]
fn a_saved_stage_reads_back_and_reannounces_what_is_open() {
    let mut s = stage();
    let mut out = Vec::new();
    let a = dns("a.example.net");
    for m in ["x", "y", "z"] {
        fail(&mut s, &a, "j", m, 0, &mut out);
    }
    let bytes = rmp_serde::to_vec_named(&s.snapshot()).expect("save");
    let mut back = stage();
    back.restore(rmp_serde::from_slice(&bytes).expect("read"));
    assert!(back.any_open());
    out.clear();
    back.reannounce(Stamp(10 * S), &mut out);
    let again = incidents(&out);
    assert_eq!(
        (again.len(), again[0].revision, again[0].minions),
        (1, 1, 3)
    );
}
