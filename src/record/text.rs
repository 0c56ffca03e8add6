//! One readable line per record, for `saltsight run` on a terminal: the time,
//! the kind, and what a person acts on (who, what, why), never the whole
//! record. The JSON line stays the contract; this is its face. Records get
//! here redacted, like every output's.

use std::fmt::Write as _;

use super::{Record, RecordBody};

/// Longest comment or message shown on a line.
const MAX_TEXT: usize = 160;
/// Most names listed on a line before "+N".
const MAX_NAMES: usize = 5;

/// `record` as one line (no newline).
pub fn line(record: &Record) -> String {
    let at = record.at.to_string();
    let clock = at.get(11..23).unwrap_or(&at);
    let mut out = format!("{clock} {:<17} ", record.kind.as_str());
    describe(&record.body, &mut out);
    out
}

fn describe(body: &RecordBody, out: &mut String) {
    // `write!` to a String cannot fail.
    let _ = match body {
        RecordBody::JobPublished(j) => write!(
            out,
            "{} {} on {} ({} expected){}{}",
            j.jid,
            j.fun,
            crate::plain::names(&j.tgt, MAX_NAMES),
            j.expected_count,
            j.user
                .as_deref()
                .map(|u| format!(" by {u}"))
                .unwrap_or_default(),
            test_flag(j.context.test),
        ),
        RecordBody::MinionReturn(r) | RecordBody::LateReturn(r) => write!(
            out,
            "{} {} {} {}{}{}",
            r.jid,
            r.minion,
            r.fun.as_deref().unwrap_or("?"),
            if r.succeeded { "ok" } else { "FAILED" },
            r.retcode
                .map(|c| format!(" retcode={c}"))
                .unwrap_or_default(),
            r.states
                .as_ref()
                .map(|s| format!(
                    " states ok={} changed={} failed={}",
                    s.ok, s.changed, s.failed
                ))
                .unwrap_or_default(),
        ),
        RecordBody::MinionMissing(m) => write!(
            out,
            "{} {} {} did not return: {}{}{}",
            m.jid,
            m.minion,
            m.fun,
            m.reason.as_str(),
            match (m.streak, m.missing_since) {
                (0 | 1, _) => String::new(),
                (n, Some(since)) => format!(" ({n} jobs in a row, since {since})"),
                (n, None) => format!(" ({n} jobs in a row)"),
            },
            m.during_master_pressure
                .as_deref()
                .map(|p| format!(" during master pressure {p}"))
                .unwrap_or_default(),
        ),
        RecordBody::JobCompleted(j) => {
            let missing: u32 = j.missing.values().sum();
            write!(
                out,
                "{} {} {}/{} returned, {} succeeded, {} failed, {} missing in {}",
                j.jid,
                j.fun,
                j.returned,
                j.expected,
                j.succeeded,
                j.failed,
                missing,
                crate::plain::duration_ms(j.duration_ms),
            )
        }
        RecordBody::BusGap(g) => write!(
            out,
            "events may be missing for {} ({}, {} frames dropped)",
            crate::plain::duration_ms(g.duration_ms),
            g.reason,
            g.dropped_frames
        ),
        RecordBody::StateFailure(f) => write!(
            out,
            "{} {} {}:{} [{}] {}{}",
            f.jid,
            f.minion,
            f.state.sls,
            f.state.state_id,
            f.cause.category.as_str(),
            crate::plain::cut(&f.state.comment, MAX_TEXT),
            introduced(&f.correlation),
        ),
        RecordBody::RenderFailure(f) => write!(
            out,
            "{} {} {}{} {}{}",
            f.jid,
            f.minion,
            f.sls.as_deref().unwrap_or("?"),
            f.line.map(|l| format!(" line {l}")).unwrap_or_default(),
            crate::plain::cut(&f.message, MAX_TEXT),
            introduced(&f.correlation),
        ),
        RecordBody::FailureGroup(g) => write!(
            out,
            "{} {} on {} minion(s) {}: {}:{} [{}] {}",
            g.jid,
            g.fingerprint,
            g.count,
            crate::plain::names(&g.minions, MAX_NAMES),
            g.sls.as_deref().unwrap_or("?"),
            g.state_id.as_deref().unwrap_or("?"),
            g.cause.category.as_str(),
            crate::plain::cut(&g.comment, MAX_TEXT),
        ),
        RecordBody::ConfigChange(c) => write!(
            out,
            "{} {} → {} ({} commit(s))",
            c.repo,
            short(c.old.as_deref()),
            short(c.new.as_deref()),
            c.commits.len()
        ),
        RecordBody::ExternalIncident(i) => write!(
            out,
            "{} {} {} [{}]: {} minion(s), {} job(s), {} failure(s)",
            i.incident,
            i.status.as_str(),
            i.target,
            i.category.as_str(),
            i.minions,
            i.jobs,
            i.failures
        ),
        RecordBody::MasterPressure(p) => write!(
            out,
            "{} {}: {}{}",
            p.pressure,
            p.status.as_str(),
            p.signals
                .iter()
                .map(|s| format!(
                    "{}={:.2} (over {:.2})",
                    s.signal.as_str(),
                    s.value,
                    s.threshold
                ))
                .collect::<Vec<_>>()
                .join(", "),
            if p.missing_verdicts > 0 {
                format!("; {} missing verdict(s) during it", p.missing_verdicts)
            } else {
                String::new()
            }
        ),
        RecordBody::Drift(d) => write!(
            out,
            "{} {} {}{}: {} drifted state(s) under {} {}{}",
            d.jid,
            d.minion,
            d.change.as_str(),
            test_flag(d.context.test),
            d.states.len() as u32 + d.states_not_listed,
            d.repo,
            short(Some(&d.commit)),
            d.states
                .first()
                .map(|s| format!(
                    ", first {}:{} ({}) {}",
                    s.sls,
                    s.state_id,
                    s.function,
                    crate::plain::cut(s.summary.lines().next().unwrap_or_default(), MAX_TEXT)
                ))
                .unwrap_or_default()
        ),
        RecordBody::NonIdempotent(n) => write!(
            out,
            "{}:{} ({}) {}: changed in {} runs in a row on {} under {} {}; {}",
            n.sls,
            n.state_id,
            n.function,
            n.status.as_str(),
            n.changed_runs,
            n.minion,
            n.repo,
            short(Some(&n.commit)),
            n.hint
        ),
        RecordBody::Rollout(r) => write!(
            out,
            "{} {} {} \"{}\": {}/{} applied, {} failed, {} pending",
            r.repo,
            short(Some(&r.commit)),
            r.status.as_str(),
            crate::plain::cut(&r.subject, MAX_TEXT),
            r.applied,
            r.known,
            r.failed,
            r.pending
        ),
    };
}

fn test_flag(test: bool) -> &'static str {
    if test { " test=True" } else { "" }
}

fn short(commit: Option<&str>) -> &str {
    commit.map_or("-", |c| c.get(..10).unwrap_or(c))
}

fn introduced(correlation: &super::Correlation) -> String {
    correlation
        .introduced_by
        .as_ref()
        .map(|i| {
            format!(
                " (since {} \"{}\")",
                short(Some(&i.commit.id)),
                crate::plain::cut(&i.commit.subject, MAX_TEXT)
            )
        })
        .unwrap_or_default()
}
