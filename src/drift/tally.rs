//! A job's tally: per state, how many of its minions ran it and how many
//! changed it again (drift candidates), for the share that tells a state that
//! never settles from drift when the job closes.
//!
//! Most of a job's minions run the same states (a highstate's 300 on every
//! one), so a run's states are counted as a shape: the sorted state keys, kept
//! once for every job that runs them ([`Shapes`]), and per job how many runs
//! had each shape. A run adds one to a count, not one to each of its states, and
//! an open job holds a few counts, not a map of its states (the load test's
//! highstate mix: about 490 jobs open at once, 8.7 KB each in a `BTreeMap` of
//! 301 states). Candidates, few, are counted per state. A job past
//! [`MAX_JOB_SHAPES`] shapes, or [`MAX_JOB_STATES`] states in them, counts its
//! further runs per state, as a checkpoint written before shapes (its `tally`
//! only) is read. Every bound is in state keys or counts.

use std::collections::BTreeMap;
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};

use super::OpenJob;

/// States one job tallies one by one (candidates, and runs past its shapes).
pub const MAX_JOB_STATES: usize = 10_000;
/// Distinct shapes one job counts, and the states they hold in all; a run of
/// another shape, or one past that, is counted per state.
pub const MAX_JOB_SHAPES: usize = 16;
/// State keys the shapes kept to share between jobs hold in all (2 MiB); past
/// it the table starts again (jobs keep their own).
const MAX_SHARED_STATES: usize = 262_144;

/// A run's states as a set, told apart by their count, sum and mixed xor: the
/// state keys are already hashes, so a collision (two sets counted as one)
/// needs three 64-bit coincidences.
type ShapeKey = (u64, u64, u64);

fn shape_key(states: &[u64]) -> ShapeKey {
    let (sum, mixed) = states.iter().fold((0u64, 0u64), |(sum, mixed), s| {
        (
            sum.wrapping_add(*s),
            mixed ^ s.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29),
        )
    });
    (states.len() as u64, sum, mixed)
}

/// Runs of one shape in a job.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ShapeRuns {
    /// The state keys, sorted.
    states: Arc<[u64]>,
    runs: u32,
    #[serde(skip)]
    key: Option<ShapeKey>,
}

impl ShapeRuns {
    fn key(&mut self) -> ShapeKey {
        *self.key.get_or_insert_with(|| shape_key(&self.states))
    }
}

/// The shapes jobs share.
#[derive(Debug, Default)]
pub struct Shapes {
    known: HashMap<ShapeKey, Arc<[u64]>>,
    /// The state keys `known` holds.
    states: usize,
}

impl Shapes {
    fn get(&mut self, key: ShapeKey, states: &[u64]) -> Arc<[u64]> {
        if let Some(known) = self.known.get(&key) {
            return known.clone();
        }
        let mut sorted = states.to_vec();
        sorted.sort_unstable();
        let shape: Arc<[u64]> = sorted.into();
        self.keep(key, &shape);
        shape
    }

    fn keep(&mut self, key: ShapeKey, shape: &Arc<[u64]>) {
        if self.states + shape.len() > MAX_SHARED_STATES {
            self.known = HashMap::new();
            self.states = 0;
        }
        if shape.len() <= MAX_SHARED_STATES {
            self.states += shape.len();
            self.known.insert(key, shape.clone());
        }
    }

    /// A job read back from a checkpoint shares the shapes known.
    pub fn adopt(&mut self, job: &mut OpenJob) {
        for shape in &mut job.shapes {
            let key = shape.key();
            match self.known.get(&key) {
                Some(known) => shape.states = known.clone(),
                None => self.keep(key, &shape.states),
            }
        }
    }
}

impl OpenJob {
    /// Counts one run: `ran` its states (keys), `candidates` those changed
    /// again. Returns the states not tallied (past [`MAX_JOB_STATES`]).
    pub(super) fn count_run(
        &mut self,
        ran: &[u64],
        candidates: &[u64],
        shapes: &mut Shapes,
    ) -> u64 {
        let mut refused = 0;
        let key = shape_key(ran);
        if let Some(i) = self.shapes.iter_mut().position(|s| s.key() == key) {
            self.shapes[i].runs += 1;
        } else if self.shapes.len() < MAX_JOB_SHAPES
            && self.shapes.iter().map(|s| s.states.len()).sum::<usize>() + ran.len()
                <= MAX_JOB_STATES
        {
            self.shapes.push(ShapeRuns {
                states: shapes.get(key, ran),
                runs: 1,
                key: Some(key),
            });
        } else {
            for state in ran {
                refused += tally(&mut self.tally, *state, |(ran, _)| *ran += 1);
            }
        }
        for state in candidates {
            refused += tally(&mut self.tally, *state, |(_, candidates)| *candidates += 1);
        }
        refused
    }

    /// (minions that ran `state`, minions for which it was a candidate); `None`
    /// when it was not tallied.
    pub(super) fn tally_of(&self, state: u64) -> Option<(u32, u32)> {
        let tallied = self.tally.get(&state).copied();
        let (mut ran, candidates) = tallied.unwrap_or_default();
        let mut seen = tallied.is_some();
        for shape in &self.shapes {
            if shape.states.binary_search(&state).is_ok() {
                ran += shape.runs;
                seen = true;
            }
        }
        seen.then_some((ran, candidates))
    }
}

/// Adds to `state`'s count; 1 when refused (the tally is full and it is new).
fn tally(
    map: &mut BTreeMap<u64, (u32, u32)>,
    state: u64,
    add: impl FnOnce(&mut (u32, u32)),
) -> u64 {
    if map.len() >= MAX_JOB_STATES && !map.contains_key(&state) {
        return 1;
    }
    add(map.entry(state).or_default());
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_one_shape_are_one_count_and_share_their_states() {
        let mut shapes = Shapes::default();
        let mut a = OpenJob::default();
        let mut b = OpenJob::default();
        for _ in 0..3 {
            assert_eq!(a.count_run(&[30, 10, 20], &[], &mut shapes), 0);
        }
        // The same states in another order are the same shape.
        assert_eq!(a.count_run(&[20, 30, 10], &[20], &mut shapes), 0);
        assert_eq!(b.count_run(&[10, 20, 30], &[], &mut shapes), 0);
        assert_eq!(a.shapes.len(), 1);
        assert!(Arc::ptr_eq(&a.shapes[0].states, &b.shapes[0].states));
        assert_eq!(a.tally_of(20), Some((4, 1)));
        assert_eq!(a.tally_of(10), Some((4, 0)));
        assert_eq!(b.tally_of(30), Some((1, 0)));
        assert_eq!(a.tally_of(40), None);
    }

    #[test]
    fn runs_of_other_shapes_add_up_per_state() {
        let mut shapes = Shapes::default();
        let mut job = OpenJob::default();
        job.count_run(&[1, 2, 3], &[2], &mut shapes);
        job.count_run(&[2, 3], &[2], &mut shapes);
        job.count_run(&[3], &[], &mut shapes);
        assert_eq!(job.shapes.len(), 3);
        assert_eq!(job.tally_of(1), Some((1, 0)));
        assert_eq!(job.tally_of(2), Some((2, 2)));
        assert_eq!(job.tally_of(3), Some((3, 0)));
    }

    #[test]
    fn past_its_shapes_a_job_counts_per_state_and_past_its_states_refuses() {
        let mut shapes = Shapes::default();
        let mut job = OpenJob::default();
        for n in 0..MAX_JOB_SHAPES as u64 {
            job.count_run(&[1, 100 + n], &[], &mut shapes);
        }
        assert_eq!(job.count_run(&[1, 7], &[7], &mut shapes), 0);
        assert_eq!(job.shapes.len(), MAX_JOB_SHAPES);
        assert_eq!(job.tally_of(1), Some((MAX_JOB_SHAPES as u32 + 1, 0)));
        assert_eq!(job.tally_of(7), Some((1, 1)));
        let many: Vec<u64> = (1_000..1_000 + MAX_JOB_STATES as u64).collect();
        assert_eq!(job.count_run(&many, &[], &mut shapes), 2);
    }

    #[test]
    fn shapes_hold_at_most_their_bounds_in_states() {
        let mut shapes = Shapes::default();
        // A job's shapes hold at most MAX_JOB_STATES states: the rest per state.
        let mut job = OpenJob::default();
        let half: Vec<u64> = (0..MAX_JOB_STATES as u64 / 2 + 1).collect();
        job.count_run(&half, &[], &mut shapes);
        let other: Vec<u64> = (1..MAX_JOB_STATES as u64 / 2 + 2).collect();
        job.count_run(&other, &[], &mut shapes);
        assert_eq!((job.shapes.len(), job.tally.len()), (1, other.len()));
        assert_eq!(job.tally_of(1), Some((2, 0)));
        // The shared table holds at most MAX_SHARED_STATES, then starts again.
        let mut shapes = Shapes::default();
        let per_shape = 8_192;
        let fit = (MAX_SHARED_STATES / per_shape) as u64;
        for n in 0..=fit {
            let states: Vec<u64> = (0..per_shape as u64).map(|s| s * 8 + n).collect();
            OpenJob::default().count_run(&states, &[], &mut shapes);
            assert!(shapes.states <= MAX_SHARED_STATES);
        }
        assert_eq!(shapes.states, per_shape);
    }

    #[test]
    fn a_checkpointed_job_reads_back_with_the_same_counts() {
        let mut shapes = Shapes::default();
        let mut job = OpenJob::default();
        job.count_run(&[5, 6], &[6], &mut shapes);
        job.count_run(&[5, 6], &[6], &mut shapes);
        let bytes = rmp_serde::to_vec_named(&job).expect("encode");
        let mut back: OpenJob = rmp_serde::from_slice(&bytes).expect("decode");
        let mut fresh = Shapes::default();
        fresh.adopt(&mut back);
        assert_eq!(back.tally_of(6), Some((2, 2)));
        back.count_run(&[6, 5], &[], &mut fresh);
        assert_eq!((back.shapes.len(), back.tally_of(5)), (1, Some((3, 0))));
    }

    #[test]
    fn a_job_checkpointed_before_shapes_reads_back_its_tally() {
        #[derive(serde::Serialize)]
        struct Before {
            runs: Vec<u8>,
            tally: BTreeMap<u64, (u32, u32)>,
        }
        let before = Before {
            runs: Vec::new(),
            tally: BTreeMap::from([(6, (3, 2)), (5, (3, 0))]),
        };
        let bytes = rmp_serde::to_vec_named(&before).expect("encode");
        let mut back: OpenJob = rmp_serde::from_slice(&bytes).expect("decode");
        Shapes::default().adopt(&mut back);
        assert_eq!(back.tally_of(6), Some((3, 2)));
        back.count_run(&[5, 6], &[6], &mut Shapes::default());
        assert_eq!(
            (back.tally_of(5), back.tally_of(6)),
            (Some((4, 0)), Some((4, 3)))
        );
    }
}
