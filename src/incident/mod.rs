//! External incidents: root causes outside the state tree (a mirror, a DNS
//! name, a URL's host) grouped by their target across minions and jobs. One
//! `state_failure` names a host; the same host failing on N minions within
//! `window` is one cause, an `external_incident`: opened at the N-th distinct
//! minion, re-emitted with a new revision as it grows (at most every
//! `update_every`, and whenever its minions double), closed when no failure
//! against it came for `quiet` or as soon as a state that had failed against it
//! succeeds. Its failures carry its id.
//!
//! The target is the host a failure names (`name`, or `name:port` when a port
//! is given), lowercased; a package name alone is not a target. Bounded: at
//! most `max_targets` targets are followed (the one seen longest ago is
//! forgotten first, its incident closed as `evicted`), each with at most
//! `max_samples` minions, jobs and states listed and at most
//! [`MAX_MEMBERS`] minions and jobs counted exactly.

pub mod saved;

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

pub use crate::config::incidents::IncidentConfig;
use crate::record::{
    Classification, EpisodeStatus, ExternalIncident, IncidentEnd, Record, RecordBody,
    RecordFactory, stable_hash,
};
use crate::time::Stamp;

/// Minions and jobs of one incident counted one by one; past it they are
/// counted as failures only (`members_capped` on the stage's counts).
pub const MAX_MEMBERS: usize = 100_000;

crate::counts! {
    /// The incident stage's own counts, read at scrape.
    pub struct IncidentStats {
        counter targets_forgotten = "saltsight_incident_targets_forgotten",
            "Targets forgotten to respect incidents.max_targets (an open incident among them closes as evicted)";
        counter members_capped = "saltsight_incident_members_capped",
            "Failures whose minion or job was not counted one by one: the incident already counted 100,000";
        gauge open = "saltsight_external_incidents_open_now",
            "External incidents open now (all categories)";
    }
}

/// One failure against a target, as the stage needs it.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a> {
    pub jid: &'a str,
    pub minion: &'a str,
    pub sls: &'a str,
    pub state_id: &'a str,
    /// Triage's hash of the state's key: its success later closes the incident.
    pub state_hash: Option<u64>,
    pub cause: &'a Classification,
}

/// A failure remembered before its target's incident opens.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Seen {
    at: Stamp,
    minion: Box<str>,
    jid: Box<str>,
    state_hash: Option<u64>,
    /// `sls:id`.
    state: Box<str>,
}

/// A target and what is known of it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Target {
    /// Recent failures within `window`, before it opens (a few per minion).
    recent: VecDeque<Seen>,
    last_seen: Stamp,
    open: Option<Open>,
}

/// An open incident.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Open {
    record: ExternalIncident,
    minions: HashSet<Box<str>>,
    jobs: HashSet<Box<str>>,
    state_hashes: HashSet<u64>,
    /// Revisions emitted so far, and when and at how many minions the last.
    emissions: u32,
    emitted_at: Stamp,
    emitted_minions: u32,
    /// It grew since its last revision.
    dirty: bool,
}

pub struct Incidents {
    config: IncidentConfig,
    records: RecordFactory,
    targets: HashMap<Box<str>, Target>,
    pub stats: std::sync::Arc<IncidentStats>,
}

/// The target a cause names: its host, else its URL's host (lowercased, with
/// an explicit port, trailing dots and punctuation trimmed). `None` when it
/// names neither, or is not external.
pub fn target_of(cause: &Classification) -> Option<String> {
    if !cause.category.is_external() {
        return None;
    }
    let authority = cause.url.as_deref().and_then(host_of_url);
    let raw = match (&cause.host, authority) {
        // The URL's `host:port` when it is the same host: a port tells two
        // services of one host apart.
        (Some(host), Some(authority))
            if authority
                .rsplit_once(':')
                .map_or(authority, |(h, _)| h)
                .eq_ignore_ascii_case(host) =>
        {
            authority
        }
        (Some(host), _) => host.as_str(),
        (None, Some(authority)) => authority,
        (None, None) => return None,
    };
    let trimmed = raw
        .trim_matches(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '[' | ']')))
        .trim_end_matches('.');
    (!trimmed.is_empty()).then(|| trimmed.to_ascii_lowercase())
}

/// `scheme://[user@]host[:port]/...` → `host[:port]`.
fn host_of_url(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    (!host.is_empty()).then_some(host)
}

impl Incidents {
    pub fn new(config: IncidentConfig, records: RecordFactory) -> Self {
        Self {
            config,
            records,
            targets: HashMap::new(),
            stats: std::sync::Arc::default(),
        }
    }

    /// Whether any incident is open (triage then reports states' outcomes, so
    /// a success can close one).
    pub fn any_open(&self) -> bool {
        self.stats.open.get() > 0
    }

    /// A root-cause failure at `at`: its incident's id when it is part of an
    /// open one (opened by it, perhaps); revisions into `out`.
    pub fn on_failure(
        &mut self,
        f: &Failure<'_>,
        at: Stamp,
        out: &mut Vec<Record>,
    ) -> Option<String> {
        let target = target_of(f.cause)?;
        if !self.targets.contains_key(target.as_str()) {
            self.make_room(at, out);
        }
        let window = self.config.window;
        let min_minions = self.config.min_minions;
        let entry = self
            .targets
            .entry(target.as_str().into())
            .or_insert(Target {
                recent: VecDeque::new(),
                last_seen: at,
                open: None,
            });
        entry.last_seen = entry.last_seen.max(at);
        let seen = Seen {
            at,
            minion: f.minion.into(),
            jid: f.jid.into(),
            state_hash: f.state_hash,
            state: format!("{}:{}", f.sls, f.state_id).into(),
        };
        if entry.open.is_none() {
            entry.recent.push_back(seen);
            while entry.recent.front().is_some_and(|s| s.at.plus(window) < at) {
                entry.recent.pop_front();
            }
            let distinct: HashSet<&str> = entry.recent.iter().map(|s| &*s.minion).collect();
            if distinct.len() < min_minions.max(1) {
                // Bounded: only the last few matter to reach the threshold.
                while entry.recent.len() > min_minions.max(1) * 4 {
                    entry.recent.pop_front();
                }
                return None;
            }
            let first_seen = entry.recent.front().map_or(at, |s| s.at);
            let before = std::mem::take(&mut entry.recent);
            let id = format!(
                "{:016x}",
                stable_hash([target.as_bytes(), first_seen.0.to_le_bytes().as_slice()]) as u64
            );
            entry.open = Some(Open {
                record: ExternalIncident {
                    incident: id,
                    target: target.clone(),
                    category: f.cause.category,
                    status: EpisodeStatus::Open,
                    revision: 0,
                    minions: 0,
                    jobs: 0,
                    failures: 0,
                    sample_minions: Vec::new(),
                    sample_jobs: Vec::new(),
                    states: Vec::new(),
                    first_seen,
                    last_seen: at,
                    opened_at: at,
                    closed_at: None,
                    end: None,
                },
                minions: HashSet::new(),
                jobs: HashSet::new(),
                state_hashes: HashSet::new(),
                emissions: 0,
                emitted_at: at,
                emitted_minions: 0,
                dirty: true,
            });
            let open = entry.open.as_mut()?;
            for seen in &before {
                add_member(open, seen, self.config.max_samples, &self.stats);
            }
        } else if let Some(open) = entry.open.as_mut() {
            add_member(open, &seen, self.config.max_samples, &self.stats);
        }
        let open = entry.open.as_mut()?;
        let opening = open.emissions == 0;
        let id = open.record.incident.clone();
        let due = opening
            || open.record.minions >= open.emitted_minions.saturating_mul(2)
            || at >= open.emitted_at.plus(self.config.update_every);
        if due {
            let record = emit(&self.records, open, at);
            out.push(record);
        }
        self.count_open();
        Some(id)
    }

    /// The open incident whose target `cause` names, if any.
    pub fn incident_of(&self, cause: &Classification) -> Option<String> {
        let target = target_of(cause)?;
        let open = self.targets.get(target.as_str())?.open.as_ref()?;
        Some(open.record.incident.clone())
    }

    /// States that succeeded (triage's outcomes: state hash, passed): an
    /// incident one of them had failed in closes, recovered.
    pub fn on_outcomes(&mut self, outcomes: &[(u64, bool)], at: Stamp, out: &mut Vec<Record>) {
        if !self.any_open() {
            return;
        }
        let passed: HashSet<u64> = outcomes
            .iter()
            .filter(|(_, ok)| *ok)
            .map(|(h, _)| *h)
            .collect();
        if passed.is_empty() {
            return;
        }
        let recovered: Vec<Box<str>> = self
            .targets
            .iter()
            .filter(|(_, t)| {
                t.open
                    .as_ref()
                    .is_some_and(|o| o.state_hashes.iter().any(|h| passed.contains(h)))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for target in recovered {
            self.close(&target, at, IncidentEnd::Recovered, out);
        }
    }

    /// Time moved to `now`: quiet incidents close, grown ones get their
    /// revision, targets with nothing recent are forgotten.
    pub fn advance(&mut self, now: Stamp, out: &mut Vec<Record>) {
        let quiet = self.config.quiet;
        let mut closing = Vec::new();
        let mut stale = Vec::new();
        for (target, t) in &mut self.targets {
            match &mut t.open {
                Some(open) if open.record.last_seen.plus(quiet) <= now => {
                    closing.push(target.clone())
                }
                Some(open)
                    if open.dirty && now >= open.emitted_at.plus(self.config.update_every) =>
                {
                    out.push(emit(&self.records, open, now));
                }
                Some(_) => {}
                None if t.last_seen.plus(self.config.window) < now => stale.push(target.clone()),
                None => {}
            }
        }
        for target in closing {
            self.close(&target, now, IncidentEnd::Quiet, out);
        }
        for target in stale {
            self.targets.remove(&target);
        }
    }

    /// When [`Incidents::advance`] next has something to do.
    pub fn next_due(&self) -> Option<Stamp> {
        self.targets
            .values()
            .filter_map(|t| t.open.as_ref())
            .map(|o| {
                let quiet = o.record.last_seen.plus(self.config.quiet);
                if o.dirty {
                    quiet.min(o.emitted_at.plus(self.config.update_every))
                } else {
                    quiet
                }
            })
            .min()
    }

    fn close(&mut self, target: &str, at: Stamp, end: IncidentEnd, out: &mut Vec<Record>) {
        let Some(t) = self.targets.get_mut(target) else {
            return;
        };
        if let Some(mut open) = t.open.take() {
            open.record.status = EpisodeStatus::Closed;
            open.record.closed_at = Some(at);
            open.record.end = Some(end);
            out.push(emit(&self.records, &mut open, at));
        }
        self.count_open();
    }

    /// Forgets the target seen longest ago when the bound is reached.
    fn make_room(&mut self, at: Stamp, out: &mut Vec<Record>) {
        while self.targets.len() >= self.config.max_targets.max(1) {
            let Some(oldest) = self
                .targets
                .iter()
                .min_by_key(|(_, t)| t.last_seen)
                .map(|(k, _)| k.clone())
            else {
                return;
            };
            self.close(&oldest, at, IncidentEnd::Evicted, out);
            self.targets.remove(&oldest);
            self.stats.targets_forgotten.inc();
        }
    }

    fn count_open(&self) {
        let open = self.targets.values().filter(|t| t.open.is_some()).count();
        self.stats.open.set(open as u64);
    }

    /// Every open incident again as a new revision (after a restart: what was
    /// open is said to be open still).
    pub fn reannounce(&mut self, at: Stamp, out: &mut Vec<Record>) {
        for t in self.targets.values_mut() {
            if let Some(open) = &mut t.open {
                out.push(emit(&self.records, open, at));
            }
        }
        self.count_open();
    }
}

fn add_member(open: &mut Open, f: &Seen, max_samples: usize, stats: &IncidentStats) {
    let record = &mut open.record;
    record.failures += 1;
    record.last_seen = record.last_seen.max(f.at);
    open.dirty = true;
    if let Some(hash) = f.state_hash {
        if open.state_hashes.len() < MAX_MEMBERS {
            open.state_hashes.insert(hash);
        }
    }
    for (set, name) in [(&mut open.minions, &*f.minion), (&mut open.jobs, &*f.jid)] {
        if !set.contains(name) {
            if set.len() < MAX_MEMBERS {
                set.insert(name.into());
            } else {
                stats.members_capped.inc();
            }
        }
    }
    record.minions = u32::try_from(open.minions.len()).unwrap_or(u32::MAX);
    record.jobs = u32::try_from(open.jobs.len()).unwrap_or(u32::MAX);
    let sample = |list: &mut Vec<String>, value: String| {
        if list.len() < max_samples && !list.contains(&value) {
            list.push(value);
        }
    };
    sample(&mut record.sample_minions, f.minion.to_string());
    sample(&mut record.sample_jobs, f.jid.to_string());
    sample(&mut record.states, f.state.to_string());
}

/// The incident's next revision (0 when it opens).
fn emit(records: &RecordFactory, open: &mut Open, at: Stamp) -> Record {
    open.record.revision = open.emissions;
    open.emissions += 1;
    open.emitted_at = at;
    open.emitted_minions = open.record.minions.max(1);
    open.dirty = false;
    let revision = open.record.revision.to_string();
    records.make(
        at,
        &[&open.record.incident, &revision],
        RecordBody::ExternalIncident(open.record.clone()),
    )
}

#[cfg(test)]
mod tests;
