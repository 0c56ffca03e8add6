//! Rollout metrics, from `rollout` records: the release delay (commit to 95%
//! and to all of the fleet) per state tree, where the current commit stands,
//! since when minions have been pending, and whether it is stalled. The `repo`
//! label takes the configured checkouts' names only (records name no other).

use foldhash::{HashMap, HashMapExt};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::record::{Rollout, RolloutStatus};
use crate::time::Stamp;

/// Release delays from minutes to days.
const DELAY_BUCKETS: [f64; 12] = [
    60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 43200.0, 86400.0, 172_800.0,
    604_800.0,
];
/// Commits whose delays are remembered as observed (each is observed once).
const MAX_OBSERVED: usize = 4096;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RepoReach {
    repo: String,
    reach: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RepoStanding {
    repo: String,
    standing: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RepoLabel {
    repo: String,
}

#[derive(Debug)]
pub struct RolloutMetrics {
    delay: Family<RepoReach, Histogram>,
    minions: Family<RepoStanding, Gauge>,
    pending_since: Family<RepoLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    stalled: Family<RepoLabel, Gauge>,
    /// Per repo, the newest commit's `seen_at`: only it sets the gauges.
    current: HashMap<String, Stamp>,
    /// (repo, commit) → reached 95, reached 100 already observed.
    observed: HashMap<(String, String), (bool, bool)>,
}

impl RolloutMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let delay =
            Family::<RepoReach, Histogram>::new_with_constructor(|| Histogram::new(DELAY_BUCKETS));
        registry.register(
            "saltsight_release_delay_seconds",
            "Release delay: from a commit's time to 95% (reach=\"95\") and to all (reach=\"100\") of the fleet having applied it, per state tree",
            delay.clone(),
        );
        let minions = Family::<RepoStanding, Gauge>::default();
        registry.register(
            "saltsight_rollout_minions",
            "Minions of the fleet by where they stand on the newest commit of a state tree (applied, failed, pending)",
            minions.clone(),
        );
        let pending_since = Family::default();
        registry.register(
            "saltsight_rollout_pending_since_timestamp_seconds",
            "When the newest commit of a state tree began to roll out, while minions are pending (0 once none is): time() minus it is the oldest pending rollout's age",
            pending_since.clone(),
        );
        let stalled = Family::<RepoLabel, Gauge>::default();
        registry.register(
            "saltsight_rollout_stalled",
            "1 while the newest commit of a state tree is stalled: minions pending, no progress for rollouts.stall_after",
            stalled.clone(),
        );
        Self {
            delay,
            minions,
            pending_since,
            stalled,
            current: HashMap::new(),
            observed: HashMap::new(),
        }
    }

    /// Series at 0 for each watched state tree, so rules see them before its
    /// first rollout.
    pub fn expect(&self, repos: &[String]) {
        for repo in repos {
            for standing in ["applied", "failed", "pending"] {
                let _ = self.minions.get_or_create(&RepoStanding {
                    repo: repo.clone(),
                    standing,
                });
            }
            let label = RepoLabel { repo: repo.clone() };
            let _ = self.pending_since.get_or_create(&label);
            let _ = self.stalled.get_or_create(&label);
        }
    }

    pub fn record(&mut self, r: &Rollout) {
        let key = (r.repo.clone(), r.commit.clone());
        if !self.observed.contains_key(&key) && self.observed.len() >= MAX_OBSERVED {
            self.observed.clear();
        }
        let seen = self.observed.entry(key).or_default();
        for (done, delay, reach) in [
            (&mut seen.0, r.delay_from_commit.p95_s, "95"),
            (&mut seen.1, r.delay_from_commit.p100_s, "100"),
        ] {
            if let (false, Some(secs)) = (*done, delay) {
                *done = true;
                self.delay
                    .get_or_create(&RepoReach {
                        repo: r.repo.clone(),
                        reach,
                    })
                    .observe(secs);
            }
        }
        let newest = self.current.get(&r.repo).is_none_or(|s| r.seen_at >= *s);
        if !newest {
            return;
        }
        self.current.insert(r.repo.clone(), r.seen_at);
        for (standing, n) in [
            ("applied", r.applied),
            ("failed", r.failed),
            ("pending", r.pending),
        ] {
            self.minions
                .get_or_create(&RepoStanding {
                    repo: r.repo.clone(),
                    standing,
                })
                .set(i64::from(n));
        }
        let repo = RepoLabel {
            repo: r.repo.clone(),
        };
        let since = if r.pending > 0 && r.status != RolloutStatus::Superseded {
            r.seen_at.0 as f64 / 1e6
        } else {
            0.0
        };
        self.pending_since.get_or_create(&repo).set(since);
        self.stalled
            .get_or_create(&repo)
            .set(i64::from(r.status == RolloutStatus::Stalled));
    }
}
