//! A job's recap as a person reads it: `saltsight job`, the demo's last
//! answer and `top`'s drill-down all show it this one way.

use std::io::Write;

use super::present::{Style, Table, Tone, cut, names, when};
use crate::history::query::JobRecap;
use crate::plain::duration_ms;

/// The recap as `job` and `wait` answer: JSON, or as a person reads it.
pub fn answer(r: &JobRecap, json: bool, out: &mut dyn Write) -> Result<(), super::Failure> {
    let written = if json {
        super::present::print_json(r, out)
    } else {
        show(r, Style::for_stdout(), out)
    };
    written.map_err(|e| super::Failure::runtime(format!("writing the answer: {e}")))
}

/// A batch as one line: its size, sub-batches, how it ended.
fn batch_line(b: &crate::record::BatchInfo, open: bool) -> String {
    let size = b
        .size
        .map_or_else(String::new, |s| format!(" of {s} at a time"));
    let subs = format!(
        "{} sub-batch{}",
        b.sub_batches,
        if b.sub_batches == 1 { "" } else { "es" }
    );
    let end = match (b.ended, open) {
        (Some(crate::record::BatchEnd::Halted), _) => format!(
            ", halted ({})",
            b.halted_reason.as_deref().unwrap_or("no reason given")
        ),
        (Some(crate::record::BatchEnd::Deadline), _) => ", stopped sending before its end".into(),
        (Some(crate::record::BatchEnd::Complete), _) => ", complete".into(),
        (None, true) => ", running".into(),
        (None, false) => String::new(),
    };
    let unsent = match (b.unsent, open) {
        (0, _) => String::new(),
        (n, true) => format!(", {n} not sent yet"),
        (n, false) => format!(", {n} never sent"),
    };
    format!("batch{size}: {subs}{end}{unsent}")
}

/// Who an open job still waits for: the first names and how many.
pub fn outstanding(r: &JobRecap) -> String {
    let shown: Vec<&str> = r.outstanding.iter().take(20).map(String::as_str).collect();
    let more = r.outstanding_count.saturating_sub(shown.len() as u64);
    match (shown.is_empty(), more) {
        (_, 0) => shown.join(", "),
        (true, more) => format!("{more} minions"),
        (false, more) => format!("{} and {more} more", shown.join(", ")),
    }
}

/// The recap as a person reads it.
pub fn show(r: &JobRecap, style: Style, out: &mut dyn Write) -> std::io::Result<()> {
    let b = |t: &str| style.paint(Tone::Bold, t);
    let by = if r.user.is_empty() {
        String::new()
    } else {
        format!(", by {}", r.user)
    };
    let call = std::iter::once(r.fun.as_str())
        .chain(r.args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    writeln!(
        out,
        "{} {} {}  ({}{by})",
        b("Job"),
        b(&r.jid),
        b(&cut(&call, 80)),
        r.run_kind
    )?;
    let mut facts = Vec::new();
    if !r.target.is_empty() {
        facts.push(format!("target {}", r.target));
    }
    if let Some(at) = &r.published_at {
        facts.push(format!("published {}", when(at)));
    }
    match (r.open, r.duration_ms) {
        (true, _) => facts.push(style.paint(Tone::Warn, "still running")),
        (false, Some(ms)) => facts.push(format!("took {}", duration_ms(ms))),
        _ => {}
    }
    for (repo, commit) in &r.commits {
        facts.push(format!("{repo} {}", &commit[..commit.len().min(10)]));
    }
    if r.test {
        facts.push("test=True".into());
    }
    if let Some(meta) = &r.metadata {
        facts.push(format!("metadata {meta}"));
    }
    writeln!(out, "  {}", facts.join("   "))?;
    let (ok, bad, gone) = (r.succeeded.len(), r.failed.len(), r.missing.len());
    writeln!(
        out,
        "  {} expected: {}, {}, {}",
        r.expected,
        style.paint(Tone::Good, &format!("{ok} succeeded")),
        style.paint(
            if bad > 0 { Tone::Bad } else { Tone::Dim },
            &format!("{bad} failed")
        ),
        style.paint(
            if gone > 0 { Tone::Warn } else { Tone::Dim },
            &format!("{gone} missing")
        ),
    )?;
    if let Some(batch) = &r.batch {
        writeln!(out, "  {}", batch_line(batch, r.open))?;
    }
    if r.open && r.outstanding_count > 0 {
        writeln!(
            out,
            "  {} {}",
            style.paint(Tone::Warn, &format!("waiting on {}:", r.outstanding_count)),
            outstanding(r)
        )?;
    }
    if r.incomplete > 0 {
        let lacks = format!(
            "incomplete: the history lacks {} of this job's records (its writer was behind; the outputs have them)",
            r.incomplete
        );
        writeln!(out, "  {}", style.paint(Tone::Warn, &lacks))?;
    }
    if !r.failed.is_empty() {
        writeln!(
            out,
            "  {}     {}",
            style.paint(Tone::Bad, "failed"),
            names(&r.failed, 20)
        )?;
    }
    if !r.missing.is_empty() {
        let mut t = Table::new(&["  missing", "reason", "evidence", "in a row"]);
        for m in &r.missing {
            t.row(vec![
                format!("  {}", style.paint(Tone::Warn, &m.minion)),
                m.reason.clone(),
                super::present::missing_evidence(
                    &m.evidence,
                    m.disconnected_at.as_deref(),
                    m.address.as_deref(),
                ),
                super::present::streak(m.streak, m.missing_since.as_deref()),
            ]);
        }
        t.write(style, out)?;
    }
    if !r.groups.is_empty() {
        writeln!(out, "{}", b("Root causes"))?;
        for g in &r.groups {
            writeln!(
                out,
                "  {}  {}:{}  {}  {}",
                style.paint(
                    Tone::Bad,
                    &format!("{} minion{}", g.count, if g.count == 1 { "" } else { "s" })
                ),
                g.sls,
                g.state_id,
                g.function,
                style.paint(Tone::Bold, &g.category)
            )?;
            writeln!(out, "      {}", cut(&g.comment, 160))?;
            if let Some(stderr) = &g.stderr {
                writeln!(out, "      stderr: {}", cut(stderr, 150))?;
            }
            if let Some(commit) = &g.introduced_by {
                writeln!(out, "      introduced by {commit}")?;
            }
            if let Some(incident) = &g.incident {
                writeln!(out, "      part of external incident {incident}")?;
            }
            writeln!(out, "      on {}", names(&g.minions, 10))?;
        }
    }
    if !r.renders.is_empty() {
        writeln!(out, "{}", b("Render failures"))?;
        for f in &r.renders {
            let line = f.line.map_or_else(String::new, |l| format!(" line {l}"));
            writeln!(
                out,
                "  {}  {}{line}: {}",
                f.minion,
                f.sls,
                cut(&f.message, 140)
            )?;
        }
    }
    if r.changed_states > 0 || !r.drift.is_empty() {
        let (verb, drift) = if r.test {
            ("would change", "drift seen")
        } else {
            ("changed", "drift put back")
        };
        let others = r.changed_states.saturating_sub(r.drift.len() as u64);
        writeln!(
            out,
            "{}  {} states {verb}: {others} by a commit (or not settled yet), {}",
            b("Changes"),
            r.changed_states,
            style.paint(
                if r.drift.is_empty() {
                    Tone::Dim
                } else {
                    Tone::Warn
                },
                &format!("{} {drift}", r.drift.len())
            ),
        )?;
        for d in &r.drift {
            writeln!(
                out,
                "  {}  {}:{}  {}  {}  {}",
                style.paint(Tone::Warn, &d.minion),
                d.sls,
                d.state_id,
                d.function,
                d.change,
                cut(super::drift::summary_line(&d.summary, &d.name), 100)
            )?;
        }
    }
    for i in r.incidents.iter().map(|i| &i.body) {
        writeln!(
            out,
            "{} {} ({}): {} minions, {} jobs, {} since {}",
            b("External incident"),
            i.target,
            i.category,
            i.minions,
            i.jobs,
            i.status,
            when(&i.first_seen.to_string()),
        )?;
    }
    if let Some(p) = r.pressure.as_ref().map(|p| &p.body) {
        let signals: Vec<String> = p
            .signals
            .iter()
            .map(|f| format!("{} {:.2} (over {:?})", f.signal, f.value, f.threshold))
            .collect();
        writeln!(
            out,
            "{} {} from {}: {}",
            b("The master was saturated"),
            p.pressure,
            when(&p.opened_at.to_string()),
            signals.join(", ")
        )?;
    }
    Ok(())
}
