//! The answers the query commands give, read from the history: a job's recap,
//! jobs in a time range, failures across jobs, one minion's story. Each is a
//! plain serialisable value (the `--json` form); `cli` draws the tables.
//!
//! Records are read back as their JSON; a record kind's revisions (a job
//! amended by late returns, a group re-emitted) are collapsed to the latest.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rusqlite::params_from_iter;
use serde::Serialize;
use serde_json::Value;

use super::{HistoryError, Store};
use crate::time::Stamp;

/// Jobs a `jobs` listing shows at most.
pub const MAX_JOBS: usize = 10_000;
/// Records one query reads at most (a job of 100,000 minions has as many).
pub const MAX_ROWS: usize = 2_000_000;

impl Store {
    /// `(kind, record)` of the rows `sql` selects (its first two columns).
    fn rows(
        &self,
        sql: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<(String, Value)>, HistoryError> {
        let sql_error = |source| HistoryError::Sql {
            path: self.path.clone(),
            source,
        };
        let mut statement = self.conn().prepare(sql).map_err(sql_error)?;
        let rows = statement
            .query_map(params_from_iter(args.iter()), |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(sql_error)?;
        let mut out = Vec::new();
        for row in rows.take(MAX_ROWS) {
            let (kind, text) = row.map_err(sql_error)?;
            if let Ok(value) = serde_json::from_str(&text) {
                out.push((kind, value));
            }
        }
        Ok(out)
    }
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

fn number(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

fn revision(v: &Value) -> u64 {
    number(v, "revision")
}

/// One minion that did not return, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missing {
    pub minion: String,
    pub reason: String,
    pub evidence: String,
    /// When presence saw it go (or first saw it not connected).
    pub disconnected_at: Option<String>,
    /// Where its connection came from, when it was connected and silent.
    pub address: Option<String>,
    pub streak: u64,
    /// When its streak began (a streak of 2 or more).
    pub missing_since: Option<String>,
}

/// A root cause across the job's minions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub fingerprint: String,
    pub count: u64,
    pub minions: Vec<String>,
    pub sls: String,
    pub state_id: String,
    pub function: String,
    pub category: String,
    pub comment: String,
    /// `id subject` of the commit that introduced it, when known.
    pub introduced_by: Option<String>,
    pub incident: Option<String>,
    /// The last line of the first minion's stderr, when the state ran a command.
    pub stderr: Option<String>,
}

/// A render failure on one minion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Render {
    pub minion: String,
    pub sls: String,
    pub line: Option<u64>,
    pub message: String,
}

/// Everything the history holds of one job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRecap {
    pub jid: String,
    pub fun: String,
    /// Its positional arguments, as published.
    pub args: Vec<String>,
    pub target: String,
    pub user: String,
    pub run_kind: String,
    pub test: bool,
    pub metadata: Option<Value>,
    pub commits: BTreeMap<String, String>,
    pub published_at: Option<String>,
    pub duration_ms: Option<u64>,
    pub expected: u64,
    /// Still open (no `job_completed` yet).
    pub open: bool,
    pub succeeded: Vec<String>,
    pub failed: Vec<String>,
    pub missing: Vec<Missing>,
    pub groups: Vec<Group>,
    pub renders: Vec<Render>,
    /// The external incidents its failures are part of (their last revision).
    pub incidents: Vec<Value>,
    /// The master pressure episode it overlapped (its last revision).
    pub pressure: Option<Value>,
}

/// One line of `saltsight jobs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobLine {
    pub jid: String,
    pub at: String,
    pub fun: String,
    pub user: String,
    pub target: String,
    pub expected: u64,
    pub returned: u64,
    pub failed: u64,
    pub missing: u64,
    pub open: bool,
}

/// One fingerprint across jobs (`saltsight failures`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailureLine {
    pub fingerprint: String,
    pub category: String,
    pub sls: String,
    pub state_id: String,
    pub function: String,
    pub comment: String,
    pub minions: u64,
    pub jobs: u64,
    pub first_seen: String,
    pub last_seen: String,
    pub introduced_by: Option<String>,
}

/// One minion's recent story (`saltsight minion`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinionView {
    pub minion: String,
    /// Its recent jobs, newest first: jid, function, outcome, when.
    pub jobs: Vec<MinionJob>,
    /// Per function, its last successful return.
    pub last_success: BTreeMap<String, String>,
    /// Its latest missing streak (and since when) and the reasons of its
    /// recent misses.
    pub streak: u64,
    pub missing_since: Option<String>,
    pub missing_reasons: BTreeMap<String, u64>,
    /// Its recent root causes: fingerprint → (sls:id, category, count).
    pub failures: Vec<MinionFailure>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinionJob {
    pub jid: String,
    pub fun: String,
    /// `succeeded`, `failed`, or the missing reason.
    pub outcome: String,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinionFailure {
    pub fingerprint: String,
    pub state: String,
    pub category: String,
    pub times: u64,
    pub last: String,
}

fn introduced(v: &Value) -> Option<String> {
    let i = &v["introduced_by"];
    i["id"]
        .as_str()
        .map(|id| format!("{} {}", &id[..id.len().min(10)], text(i, "subject")))
}

/// The latest revision of each record `key` names.
fn latest_by<'a>(
    records: impl Iterator<Item = &'a Value>,
    key: impl Fn(&Value) -> String,
) -> Vec<&'a Value> {
    let mut latest: BTreeMap<String, &Value> = BTreeMap::new();
    for r in records {
        let k = key(r);
        if latest
            .get(&k)
            .is_none_or(|old| revision(r) >= revision(old))
        {
            latest.insert(k, r);
        }
    }
    latest.into_values().collect()
}

fn target_of(published: Option<&Value>) -> String {
    published
        .map(|p| {
            let tgt: Vec<&str> = p["tgt"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            tgt.join(",")
        })
        .unwrap_or_default()
}

/// The job `jid` as the history has it (`None`: nothing of it).
pub fn job(store: &Store, jid: &str) -> Result<Option<JobRecap>, HistoryError> {
    let records = store.rows(
        "SELECT kind, record FROM records WHERE jid = ?1 ORDER BY at, rowid",
        &[&jid],
    )?;
    if records.is_empty() {
        return Ok(None);
    }
    let of = |kind: &'static str| {
        records
            .iter()
            .filter(move |(k, _)| k == kind)
            .map(|(_, v)| v)
    };
    let published = of("job_published").next();
    let completed = latest_by(of("job_completed"), |_| String::new()).pop();
    let mut succeeded = BTreeSet::new();
    let mut failed = BTreeSet::new();
    for r in of("minion_return").chain(of("late_return")) {
        let minion = text(r, "minion");
        if r["succeeded"] == true {
            failed.remove(&minion);
            succeeded.insert(minion);
        } else {
            failed.insert(minion);
        }
    }
    let missing: Vec<Missing> = of("minion_missing")
        .filter(|m| !succeeded.contains(&text(m, "minion")) && !failed.contains(&text(m, "minion")))
        .map(|m| Missing {
            minion: text(m, "minion"),
            reason: text(m, "reason"),
            evidence: text(m, "evidence"),
            disconnected_at: m["disconnected_at"].as_str().map(str::to_owned),
            address: m["address"].as_str().map(str::to_owned),
            streak: number(m, "streak"),
            missing_since: m["missing_since"].as_str().map(str::to_owned),
        })
        .collect();
    let groups: Vec<Group> = latest_by(of("failure_group"), |g| text(g, "fingerprint"))
        .into_iter()
        .filter(|g| g["state_id"].is_string())
        .map(|g| Group {
            fingerprint: text(g, "fingerprint"),
            count: number(g, "count"),
            minions: g["minions"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|m| m.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            sls: text(g, "sls"),
            state_id: text(g, "state_id"),
            function: text(g, "function"),
            category: text(g, "category"),
            comment: text(g, "comment"),
            introduced_by: introduced(g),
            incident: g["incident"].as_str().map(str::to_owned),
            stderr: g["output"]["stderr"]
                .as_str()
                .and_then(|e| e.lines().rev().find(|l| !l.trim().is_empty()))
                .map(str::to_owned),
        })
        .collect();
    let renders: Vec<Render> = of("render_failure")
        .map(|r| Render {
            minion: text(r, "minion"),
            sls: text(r, "sls"),
            line: r["line"].as_u64(),
            message: text(r, "message"),
        })
        .collect();
    let incident_ids: BTreeSet<String> = groups
        .iter()
        .filter_map(|g| g.incident.clone())
        .chain(of("state_failure").filter_map(|f| f["incident"].as_str().map(str::to_owned)))
        .collect();
    let incidents = episodes(store, "external_incident", &incident_ids)?;
    let pressure_id = completed
        .and_then(|c| c["during_master_pressure"].as_str())
        .map(str::to_owned);
    let pressure = episodes(store, "master_pressure", &pressure_id.into_iter().collect())?.pop();
    let mut recap = JobRecap {
        jid: jid.to_owned(),
        fun: published
            .or(completed)
            .map(|p| text(p, "fun"))
            .unwrap_or_default(),
        args: published
            .and_then(|p| p["arg"].as_array())
            .map(|a| {
                a.iter()
                    .filter(|v| !v.is_object())
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        target: target_of(published),
        user: published.map(|p| text(p, "user")).unwrap_or_default(),
        run_kind: published
            .or(completed)
            .map(|p| text(p, "run_kind"))
            .unwrap_or_default(),
        test: published.or(completed).is_some_and(|p| p["test"] == true),
        metadata: completed
            .and_then(|c| c.get("metadata").cloned())
            .or_else(|| published.and_then(|p| p.get("metadata").cloned())),
        commits: published
            .and_then(|p| p["commits"].as_object())
            .map(|c| {
                c.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
        published_at: published.map(|p| text(p, "at")),
        duration_ms: completed.and_then(|c| c["duration_ms"].as_u64()),
        expected: completed
            .map(|c| number(c, "expected"))
            .or_else(|| published.map(|p| number(p, "expected_count")))
            .unwrap_or(0),
        open: completed.is_none(),
        succeeded: succeeded.into_iter().collect(),
        failed: failed.into_iter().collect(),
        missing,
        groups,
        renders,
        incidents,
        pressure,
    };
    recap.groups.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.fingerprint.cmp(&b.fingerprint))
    });
    Ok(Some(recap))
}

/// The last revision of each episode (`kind`, by id) of `ids`.
fn episodes(store: &Store, kind: &str, ids: &BTreeSet<String>) -> Result<Vec<Value>, HistoryError> {
    let mut out = Vec::new();
    for id in ids {
        let revisions = store.rows(
            "SELECT kind, record FROM records WHERE kind = ?1 AND fingerprint = ?2",
            &[&kind, id],
        )?;
        if let Some(last) = latest_by(revisions.iter().map(|(_, v)| v), |_| String::new()).pop() {
            out.push(last.clone());
        }
    }
    Ok(out)
}

/// What `saltsight jobs` filters on.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub since: Option<Stamp>,
    pub failed_only: bool,
    pub fun: Option<crate::config::glob::Glob>,
    pub user: Option<String>,
}

/// Jobs published or completed since `filter.since`, newest first.
pub fn jobs(store: &Store, filter: &JobFilter) -> Result<Vec<JobLine>, HistoryError> {
    let since = filter.since.map_or(i64::MIN, |s| s.0);
    let records = store.rows(
        "SELECT kind, record FROM records WHERE kind IN ('job_published', 'job_completed') AND at >= ?1 ORDER BY at, rowid",
        &[&since],
    )?;
    let mut published: HashMap<String, &Value> = HashMap::new();
    let mut completed: HashMap<String, &Value> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for (kind, r) in &records {
        let jid = text(r, "jid");
        let first = !published.contains_key(&jid) && !completed.contains_key(&jid);
        if first {
            order.push(jid.clone());
        }
        match kind.as_str() {
            "job_published" => {
                published.insert(jid, r);
            }
            _ => {
                if completed
                    .get(&jid)
                    .is_none_or(|c| revision(r) >= revision(c))
                {
                    completed.insert(jid, r);
                }
            }
        }
    }
    let mut lines = Vec::new();
    for jid in order.iter().rev() {
        let (p, c) = (published.get(jid).copied(), completed.get(jid).copied());
        let any = p.or(c).expect("every listed jid has a record");
        let missing: u64 = c
            .and_then(|c| c["missing"].as_object())
            .map(|m| m.values().filter_map(Value::as_u64).sum())
            .unwrap_or(0);
        let line = JobLine {
            jid: jid.clone(),
            at: p.map_or_else(|| text(any, "published_at"), |p| text(p, "at")),
            fun: text(any, "fun"),
            user: p.map(|p| text(p, "user")).unwrap_or_default(),
            target: target_of(p),
            expected: c
                .map(|c| number(c, "expected"))
                .or_else(|| p.map(|p| number(p, "expected_count")))
                .unwrap_or(0),
            returned: c.map(|c| number(c, "returned")).unwrap_or(0),
            failed: c.map(|c| number(c, "failed")).unwrap_or(0),
            missing,
            open: c.is_none(),
        };
        let keep = (!filter.failed_only || line.failed > 0 || line.missing > 0)
            && filter.fun.as_ref().is_none_or(|g| g.matches(&line.fun))
            && filter.user.as_ref().is_none_or(|u| *u == line.user);
        if keep {
            lines.push(line);
            if lines.len() >= MAX_JOBS {
                break;
            }
        }
    }
    Ok(lines)
}

/// Failure groups since `since`, by fingerprint, most minions first.
pub fn failures(store: &Store, since: Option<Stamp>) -> Result<Vec<FailureLine>, HistoryError> {
    let since = since.map_or(i64::MIN, |s| s.0);
    let records = store.rows(
        "SELECT kind, record FROM records WHERE kind = 'failure_group' AND at >= ?1 ORDER BY at, rowid",
        &[&since],
    )?;
    let latest = latest_by(records.iter().map(|(_, v)| v), |g| {
        format!("{} {}", text(g, "jid"), text(g, "fingerprint"))
    });
    let mut by_fingerprint: BTreeMap<String, FailureLine> = BTreeMap::new();
    let mut jobs: HashMap<String, BTreeSet<String>> = HashMap::new();
    for g in latest {
        let fingerprint = text(g, "fingerprint");
        let at = text(g, "at");
        let line = by_fingerprint
            .entry(fingerprint.clone())
            .or_insert_with(|| FailureLine {
                fingerprint: fingerprint.clone(),
                category: text(g, "category"),
                sls: text(g, "sls"),
                state_id: text(g, "state_id"),
                function: text(g, "function"),
                comment: text(g, "comment"),
                minions: 0,
                jobs: 0,
                first_seen: at.clone(),
                last_seen: at.clone(),
                introduced_by: None,
            });
        line.minions += number(g, "count");
        line.first_seen = line.first_seen.clone().min(at.clone());
        line.last_seen = line.last_seen.clone().max(at);
        if let Some(i) = introduced(g) {
            line.introduced_by = Some(i);
        }
        jobs.entry(fingerprint).or_default().insert(text(g, "jid"));
    }
    let mut lines: Vec<FailureLine> = by_fingerprint
        .into_values()
        .map(|mut l| {
            l.jobs = jobs.get(&l.fingerprint).map_or(0, |j| j.len() as u64);
            l
        })
        .collect();
    lines.sort_by(|a, b| {
        b.minions
            .cmp(&a.minions)
            .then(b.last_seen.cmp(&a.last_seen))
    });
    Ok(lines)
}

/// `minion`'s recent jobs (at most `limit`), its last successes and misses.
pub fn minion(
    store: &Store,
    minion: &str,
    limit: usize,
) -> Result<Option<MinionView>, HistoryError> {
    let records = store.rows(
        "SELECT kind, record FROM records WHERE minion = ?1 ORDER BY at DESC, rowid DESC",
        &[&minion],
    )?;
    if records.is_empty() {
        return Ok(None);
    }
    let mut view = MinionView {
        minion: minion.to_owned(),
        jobs: Vec::new(),
        last_success: BTreeMap::new(),
        streak: 0,
        missing_since: None,
        missing_reasons: BTreeMap::new(),
        failures: Vec::new(),
    };
    let mut seen_jobs = BTreeSet::new();
    let mut streak_known = false;
    let mut failures: BTreeMap<String, MinionFailure> = BTreeMap::new();
    for (kind, r) in &records {
        let (jid, fun, at) = (text(r, "jid"), text(r, "fun"), text(r, "at"));
        match kind.as_str() {
            "minion_return" | "late_return" => {
                let ok = r["succeeded"] == true;
                if ok {
                    view.last_success.entry(fun.clone()).or_insert(at.clone());
                }
                streak_known = true;
                if view.jobs.len() < limit && seen_jobs.insert(jid.clone()) {
                    let outcome = if ok { "succeeded" } else { "failed" };
                    view.jobs.push(MinionJob {
                        jid,
                        fun,
                        outcome: outcome.into(),
                        at,
                    });
                }
            }
            "minion_missing" => {
                let reason = text(r, "reason");
                *view.missing_reasons.entry(reason.clone()).or_default() += 1;
                if !streak_known {
                    view.streak = number(r, "streak");
                    view.missing_since = r["missing_since"].as_str().map(str::to_owned);
                    streak_known = true;
                }
                if view.jobs.len() < limit && seen_jobs.insert(jid.clone()) {
                    view.jobs.push(MinionJob {
                        jid,
                        fun,
                        outcome: reason,
                        at,
                    });
                }
            }
            "state_failure" => {
                let f = failures
                    .entry(text(r, "fingerprint"))
                    .or_insert_with(|| MinionFailure {
                        fingerprint: text(r, "fingerprint"),
                        state: format!("{}:{}", text(r, "sls"), text(r, "state_id")),
                        category: text(r, "category"),
                        times: 0,
                        last: at.clone(),
                    });
                f.times += 1;
            }
            _ => {}
        }
    }
    view.failures = failures.into_values().collect();
    view.failures.sort_by(|a, b| b.last.cmp(&a.last));
    Ok(Some(view))
}
