//! A state run's failures, told apart: the root causes, and the states that failed
//! only because a requisite did ("One or more requisite failed: sls.id, ...").
//!
//! The return's states are walked raw, once for every stage ([`States`]): only a
//! failed state's fields are decoded, so a highstate of thousands of successful
//! states costs a scan.

use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

use compact_str::CompactString;

use super::category::{Capped, Classification};
use crate::event::states::{
    StateEntry, States, fields, msgpack_int, msgpack_number, short_text_of, state_hash, text_of,
};
use crate::fifo::FifoMap;

/// Salt's comment on a state that did not run because a requisite failed.
const FALLOUT_PREFIX: &str = "One or more requisite failed";

/// One failed state, decoded: what is the same on every minion that failed
/// the same way (shared: one decode, recalled for a job's other minions
/// without a copy), and this run's own fields. Reads of the shared fields go
/// through to them (`state.sls`).
#[derive(Debug, Clone, PartialEq)]
pub struct FailedState {
    pub shared: Arc<SharedState>,
    pub run_num: Option<u64>,
    pub duration_ms: Option<f64>,
    /// Inline up to 24 bytes (Salt's `HH:MM:SS.ffffff` is 15).
    pub start_time: Option<CompactString>,
}

/// What a failed state says that does not vary between minions.
#[derive(Debug)]
pub struct SharedState {
    /// The state key `mod_|-id_|-name_|-fun`.
    pub key: String,
    /// [`state_hash`] of `key`.
    pub key_hash: u64,
    pub sls: String,
    pub state_id: String,
    /// `module.function`, e.g. `file.managed`.
    pub function: String,
    pub name: String,
    /// The comment as text (a list of lines is joined with newlines).
    pub comment: String,
    /// `changes.retcode` of a state that ran a command.
    pub exit_code: Option<i64>,
    /// The end of `changes.stdout` of a state that ran a command (Salt's own
    /// "Timed out after N seconds" is only there).
    pub stdout: Option<String>,
    /// The end of `changes.stderr` of a state that ran a command.
    pub stderr: Option<String>,
    /// The requisites (`sls.id`) whose failure this state is fallout of, when it
    /// is fallout.
    pub failed_requisites: Option<Vec<String>>,
    /// What triage made of it, once (set by the first to judge it).
    pub judged: OnceLock<Arc<Judged>>,
}

/// Equal when they say the same: whether one was judged yet does not count.
impl PartialEq for SharedState {
    fn eq(&self, other: &Self) -> bool {
        // Every field named: a new one is compared or left out on purpose.
        let SharedState {
            key,
            key_hash,
            sls,
            state_id,
            function,
            name,
            comment,
            exit_code,
            stdout,
            stderr,
            failed_requisites,
            judged: _,
        } = self;
        (
            key, key_hash, sls, state_id, function, name, comment, exit_code,
        ) == (
            &other.key,
            &other.key_hash,
            &other.sls,
            &other.state_id,
            &other.function,
            &other.name,
            &other.comment,
            &other.exit_code,
        ) && (stdout, stderr, failed_requisites)
            == (&other.stdout, &other.stderr, &other.failed_requisites)
    }
}

/// What triage made of a failed state: the same on every minion that
/// failed the same way.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub comment: Capped,
    /// The comment as fingerprinted (what varies replaced).
    pub normalised: String,
    pub classification: Classification,
    /// Shared by the `state_failure` records of every minion that failed
    /// the same way (a clone copies no text).
    pub fingerprint: Arc<str>,
}

impl std::ops::Deref for FailedState {
    type Target = SharedState;

    fn deref(&self) -> &SharedState {
        &self.shared
    }
}

impl FailedState {
    pub fn is_fallout(&self) -> bool {
        self.failed_requisites.is_some()
    }
}

/// What one walk of a state-run return found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StateRun {
    pub states: u32,
    /// Failed states, in `__run_num__` order.
    pub failed: Vec<FailedState>,
    /// `result: null`: would change (`test=True`); not failures.
    pub would_change: u32,
    /// Failed states past [`MAX_DECODED_FAILURES`]: counted, not examined.
    pub not_examined: u32,
    /// Per state, a hash of (module, id, function) and whether it succeeded; only
    /// when asked for (the correlator's per-minion memory).
    pub outcomes: Vec<(u64, bool)>,
}

/// Failed states of one return examined at most (in the order the return lists
/// them): a return of a hundred thousand failures costs no more than this many.
pub const MAX_DECODED_FAILURES: usize = 10_000;

/// Walks a state-run return. `None` when it is not one.
pub fn walk(raw: &[u8], want_outcomes: bool) -> Option<StateRun> {
    let states = States::of(raw)?;
    Some(walk_with(
        &states,
        want_outcomes,
        &mut Decoded::default(),
        Spare::default(),
    ))
}

/// The vectors of a return's walk, kept emptied for the next: a vector kept
/// saves allocating one (of a few hundred bytes a failed state) per return.
#[derive(Debug, Default)]
pub struct Spare {
    pub failed: Vec<FailedState>,
    pub outcomes: Vec<(u64, bool)>,
}

/// Failed states (and root causes) whose room is kept from one return for
/// the next, at most (a few KiB; a return with more allocates its own).
pub const SPARE_FAILED_STATES: usize = 16;

/// States whose outcomes' room is kept from one return for the next, at
/// most (64 KiB).
pub const SPARE_OUTCOMES: usize = 4_096;

impl Spare {
    /// Keeps `failed`'s room, emptied, within [`SPARE_FAILED_STATES`].
    pub fn keep_failed(&mut self, mut failed: Vec<FailedState>) {
        if failed.capacity() <= SPARE_FAILED_STATES {
            failed.clear();
            self.failed = failed;
        }
    }

    /// Keeps `outcomes`' room, emptied, within [`SPARE_OUTCOMES`].
    pub fn keep_outcomes(&mut self, mut outcomes: Vec<(u64, bool)>) {
        if outcomes.capacity() <= SPARE_OUTCOMES {
            outcomes.clear();
            self.outcomes = outcomes;
        }
    }
}

/// [`walk`] over states already walked, a failed state already in `decoded`
/// read from it, the failed states and outcomes put in `spare`'s vectors
/// (emptied first).
pub fn walk_with(
    states: &States<'_>,
    want_outcomes: bool,
    decoded: &mut Decoded,
    spare: Spare,
) -> StateRun {
    let Spare {
        mut failed,
        mut outcomes,
    } = spare;
    failed.clear();
    outcomes.clear();
    let entries = states.entries();
    let mut run = StateRun {
        failed,
        outcomes,
        states: entries.len() as u32,
        ..StateRun::default()
    };
    if want_outcomes {
        run.outcomes.reserve_exact(entries.len());
    }
    for (index, state) in entries.iter().enumerate() {
        if want_outcomes {
            if let Some(result) = state.result {
                run.outcomes.push((states.key_hash(index), result));
            }
        }
        match state.result {
            Some(false) if run.failed.len() >= MAX_DECODED_FAILURES => run.not_examined += 1,
            Some(false) => {
                let place = run.failed.len();
                run.failed.push(decoded.decode(state, place));
            }
            None => run.would_change += 1,
            Some(true) => {}
        }
    }
    run.failed
        .sort_by(|a, b| a.run_num.cmp(&b.run_num).then_with(|| a.key.cmp(&b.key)));
    run
}

/// `mod_|-id_|-name_|-fun` → (mod, id, fun).
fn split_key(key: &str) -> (&str, &str, &str) {
    let mut parts = key.split("_|-");
    let module = parts.next().unwrap_or_default();
    let id = parts.next().unwrap_or_default();
    let fun = key.rsplit("_|-").next().unwrap_or_default();
    (module, id, fun)
}

/// Bytes of a failed state's comment kept to classify it.
const COMMENT_MAX: usize = 16 << 10;
/// Bytes of a command's stderr and stdout kept: their end, where the error is.
pub const OUTPUT_MAX: usize = 4 << 10;

/// The raw fields of a failed state triage uses; the rest of the state (its
/// `changes`, which may be megabytes) is never decoded.
struct Fields<'a> {
    key: &'a [u8],
    comment: Option<&'a [u8]>,
    sls: Option<&'a [u8]>,
    id: Option<&'a [u8]>,
    name: Option<&'a [u8]>,
    retcode: Option<&'a [u8]>,
    stderr: Option<&'a [u8]>,
    stdout: Option<&'a [u8]>,
    // Those above are the same on every minion that fails the same way; these
    // are the run's own.
    run_num: Option<&'a [u8]>,
    duration: Option<&'a [u8]>,
    start_time: Option<&'a [u8]>,
}

impl<'a> Fields<'a> {
    fn of(state: &StateEntry<'a>) -> Self {
        let [
            comment,
            sls,
            id,
            name,
            run_num,
            duration,
            start_time,
            changes,
        ] = fields(
            state.raw,
            [
                b"comment".as_slice(),
                b"__sls__",
                b"__id__",
                b"name",
                b"__run_num__",
                b"duration",
                b"start_time",
                b"changes",
            ],
        );
        let [retcode, stderr, stdout] = changes.map_or([None; 3], |c| {
            fields(c, [b"retcode".as_slice(), b"stderr", b"stdout"])
        });
        Self {
            key: state.key,
            comment,
            sls,
            id,
            name,
            retcode,
            stderr,
            stdout,
            run_num,
            duration,
            start_time,
        }
    }

    /// The fields that do not vary between minions.
    fn shared(&self) -> [Option<&'a [u8]>; 8] {
        [
            Some(self.key),
            self.comment,
            self.sls,
            self.id,
            self.name,
            self.retcode,
            self.stderr,
            self.stdout,
        ]
    }

    /// [`Self::shared`], each behind its length (an absent one as
    /// `u32::MAX`), so two different states never write the same bytes.
    fn write_shared(&self, out: &mut Vec<u8>) {
        for field in self.shared() {
            match field {
                Some(bytes) => {
                    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                    out.extend_from_slice(bytes);
                }
                None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
            }
        }
    }

    /// Whether `written` is what [`Self::write_shared`] writes, read in
    /// place (nothing copied).
    fn wrote(&self, written: &[u8]) -> bool {
        let mut rest = written;
        for field in self.shared() {
            let Some((len, after)) = rest.split_first_chunk::<4>() else {
                return false;
            };
            let len = u32::from_le_bytes(*len);
            rest = after;
            match field {
                Some(bytes) if len as usize == bytes.len() => {
                    match rest.split_at_checked(len as usize) {
                        Some((held, after)) if held == bytes => rest = after,
                        _ => return false,
                    }
                }
                None if len == u32::MAX => {}
                _ => return false,
            }
        }
        rest.is_empty()
    }

    /// What the shared fields say, each read within its bound; the run's own
    /// fields left empty.
    fn decode_shared(&self) -> Arc<SharedState> {
        let key = String::from_utf8_lossy(self.key).into_owned();
        let (module, key_id, fun) = split_key(&key);
        let text = |raw: Option<&[u8]>, max: usize| raw.and_then(|r| text_of(r, max, false));
        let comment = text(self.comment, COMMENT_MAX).unwrap_or_default();
        let output = |raw: Option<&[u8]>| {
            raw.and_then(|r| text_of(r, OUTPUT_MAX, true))
                .filter(|s| !s.trim().is_empty())
        };
        let failed_requisites = comment.strip_prefix(FALLOUT_PREFIX).map(|rest| {
            rest.trim_start_matches(':')
                .split(',')
                .map(|r| r.trim().to_owned())
                .filter(|r| !r.is_empty())
                .collect()
        });
        Arc::new(SharedState {
            sls: text(self.sls, 1024)
                .or_else(|| sls_named_in(&comment))
                .unwrap_or_default(),
            state_id: text(self.id, 1024).unwrap_or_else(|| key_id.to_owned()),
            function: [module, ".", fun].concat(),
            name: text(self.name, 1024).unwrap_or_default(),
            comment,
            exit_code: self
                .retcode
                .and_then(msgpack_int)
                .and_then(|n| i64::try_from(n).ok()),
            stderr: output(self.stderr),
            stdout: output(self.stdout),
            failed_requisites,
            key_hash: state_hash(key.as_bytes()),
            key,
            judged: OnceLock::new(),
        })
    }

    /// The state: `shared` with this run's own fields.
    fn with_run(&self, shared: Arc<SharedState>) -> FailedState {
        FailedState {
            shared,
            run_num: self
                .run_num
                .and_then(msgpack_int)
                .and_then(|n| u64::try_from(n).ok()),
            duration_ms: self.duration.and_then(msgpack_number),
            start_time: self.start_time.and_then(|r| short_text_of(r, 64)),
        }
    }
}

/// Failed states remembered at most by [`Decoded`].
pub const DECODED_STATES: usize = 128;

/// A failed state's shared fields are remembered only up to this many bytes:
/// the memory stays within [`DECODED_STATES`] times a few of them.
pub const DECODED_STATE_MAX_BYTES: usize = 2 << 10;

/// What failed states decoded to lately, by the bytes of the fields that do
/// not vary between minions (key, comment, SLS, id, name, and a command's exit
/// code, stderr and stdout): a state that fails the same way on 500 minions is
/// decoded once, and each minion's copy takes its own run number, duration
/// and start. Keyed by a hash, the bytes kept to rule out a collision; the
/// oldest forgotten first (counted).
#[derive(Debug)]
pub struct Decoded {
    known: FifoMap<(Box<[u8]>, Arc<SharedState>), u64>,
    /// The key in `known` of the last return's failed states, by their place
    /// among its failures (at most [`LAST_PLACES`]): a job's minions fail the
    /// same states in the same order, so a state is first compared, in
    /// place, with the one the last return failed at its place: no copy, no
    /// hash.
    last: Vec<u64>,
    /// The shared bytes of the state being decoded.
    scratch: Vec<u8>,
    pub recalled: u64,
    pub forgotten: u64,
}

impl Default for Decoded {
    fn default() -> Self {
        Self {
            known: FifoMap::new(DECODED_STATES),
            last: Vec::new(),
            scratch: Vec::new(),
            recalled: 0,
            forgotten: 0,
        }
    }
}

/// Failed states' places in a return [`Decoded`] remembers the last of.
const LAST_PLACES: usize = 16;

impl Decoded {
    /// The failed state `state`, the `place`th failure of its return.
    fn decode(&mut self, state: &StateEntry<'_>, place: usize) -> FailedState {
        let fields = Fields::of(state);
        let last = self.last.get(place).and_then(|key| self.known.get(key));
        if let Some((_, known)) = last.filter(|(written, _)| fields.wrote(written)) {
            self.recalled += 1;
            return fields.with_run(Arc::clone(known));
        }
        self.scratch.clear();
        fields.write_shared(&mut self.scratch);
        if self.scratch.len() > DECODED_STATE_MAX_BYTES {
            return fields.with_run(fields.decode_shared());
        }
        // In-process only: a fixed seed is enough (a hit is checked). SipHash
        // here was 1% of the failing mix's CPU (perf), on up to 2 KiB a state.
        let hash = foldhash::fast::FixedState::default().hash_one(self.scratch.as_slice());
        if let Some((shared, known)) = self.known.get(&hash) {
            if **shared == *self.scratch {
                self.recalled += 1;
                let known = Arc::clone(known);
                self.remember_place(place, hash);
                return fields.with_run(known);
            }
        }
        let decoded = fields.decode_shared();
        self.forgotten += self.known.insert(
            &hash,
            (self.scratch.as_slice().into(), Arc::clone(&decoded)),
        );
        self.remember_place(place, hash);
        fields.with_run(decoded)
    }

    /// `hash` is the key of the state failed at `place` (within
    /// [`LAST_PLACES`]).
    fn remember_place(&mut self, place: usize, hash: u64) {
        if let Some(key) = self.last.get_mut(place) {
            *key = hash;
        } else if place == self.last.len() && place < LAST_PLACES {
            self.last.push(hash);
        }
    }
}

/// Salt leaves `__sls__` out of a state whose module is not loaded; its comment
/// names the SLS ("State 'x.y' was not found in SLS 'web'").
fn sls_named_in(comment: &str) -> Option<String> {
    let rest = comment.strip_prefix("State '")?;
    let (_, rest) = rest.split_once("' was not found in SLS '")?;
    let (sls, _) = rest.split_once('\'')?;
    (!sls.is_empty()).then(|| sls.to_owned())
}

/// A root cause and how many failed states are its fallout.
#[derive(Debug, Clone, PartialEq)]
pub struct RootCause {
    pub state: FailedState,
    pub fallout: u32,
}

impl RootScratch {
    /// Keeps the room of [`root_causes`]'s vector, emptied, for the next
    /// return (within [`SPARE_FAILED_STATES`]).
    pub fn keep(&mut self, mut causes: Vec<RootCause>) {
        if causes.capacity() <= SPARE_FAILED_STATES {
            causes.clear();
            self.causes = causes;
        }
    }
}

/// What [`root_causes`] works in, kept from return to return: the room of
/// its vectors (a failing return made five of them).
#[derive(Debug, Default)]
pub struct RootScratch {
    /// The vector of root causes, given back emptied ([`RootScratch::keep`]).
    causes: Vec<RootCause>,
    labels: Labels,
    fallout_of_root: Vec<u32>,
    seen: Vec<bool>,
    /// Requisites still to follow: (a failed state, the index of one of its
    /// failed requisites).
    stack: Vec<(usize, usize)>,
}

/// The root causes of a run's failures, in run order, each with the number of
/// states that failed because of it (directly or through other fallout), and the
/// fallout no root cause explains (its requisite failed outside this return).
/// `failed` is left empty, its room kept.
pub fn root_causes(
    failed: &mut Vec<FailedState>,
    scratch: &mut RootScratch,
) -> (Vec<RootCause>, u32) {
    // Sized exactly: a vector grown push by push takes room for four, and
    // room for four root causes is a large allocation (over 1 KiB) for the
    // allocator, which then consolidates its free lists (perf: with the
    // failed states' and the findings' vectors, 2.2% of the agent's CPU on
    // failing returns).
    let roots = failed.iter().filter(|s| !s.is_fallout()).count();
    let mut causes = std::mem::take(&mut scratch.causes);
    causes.clear();
    causes.reserve_exact(roots);
    if roots == failed.len() {
        causes.extend(
            failed
                .drain(..)
                .map(|state| RootCause { state, fallout: 0 }),
        );
        return (causes, 0);
    }
    scratch.labels.refill(failed);
    // For each fallout state, the roots it leads back to.
    scratch.fallout_of_root.clear();
    scratch.fallout_of_root.resize(failed.len(), 0);
    let mut unexplained = 0;
    for (i, state) in failed.iter().enumerate() {
        if state.is_fallout() && count_roots(i, failed, scratch) == 0 {
            unexplained += 1;
        }
    }
    causes.extend(
        failed
            .drain(..)
            .zip(scratch.fallout_of_root.iter())
            .filter(|(s, _)| !s.is_fallout())
            .map(|(state, &fallout)| RootCause { state, fallout }),
    );
    (causes, unexplained)
}

/// A hash of `parts` written one after the other: the same as of their
/// concatenation, which is never built. FNV-1a (64-bit): a label is a few
/// dozen bytes, hashed a byte at a time with no set-up.
fn hash_parts(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    // Plain loops: a flattened iterator checks its state at every byte.
    for part in parts {
        for &byte in *part {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The failed states by their label `sls.id` (what a requisite names), keyed
/// by a hash of it so no label is built; a lookup checks the label itself.
/// Sorted by hash then place (a return has a few failed states, at most
/// [`MAX_DECODED_FAILURES`]: one allocation, no hash table).
#[derive(Debug, Default)]
struct Labels(Vec<(u64, usize)>);

impl Labels {
    /// The labels of `failed`, in place of those held.
    fn refill(&mut self, failed: &[FailedState]) {
        self.0.clear();
        self.0.extend(failed.iter().enumerate().map(|(i, s)| {
            (
                hash_parts(&[s.sls.as_bytes(), b".", s.state_id.as_bytes()]),
                i,
            )
        }));
        self.0.sort_unstable();
    }

    fn get(&self, label: &str, failed: &[FailedState]) -> Option<usize> {
        let hash = hash_parts(&[label.as_bytes()]);
        // Two states of one label: the last is taken.
        let end = self.0.partition_point(|(h, _)| *h <= hash);
        let (h, i) = *self.0.get(end.checked_sub(1)?)?;
        if h != hash {
            return None;
        }
        let s = &failed[i];
        let named = label.len() == s.sls.len() + 1 + s.state_id.len()
            && label.starts_with(s.sls.as_str())
            && label[s.sls.len()..].starts_with('.')
            && label.ends_with(s.state_id.as_str());
        named.then_some(i)
    }
}

/// Counts fallout state `state` (of `failed`) in `fallout_of_root` of each
/// non-fallout state it leads back to, following fallout chains (a cycle or
/// an unknown requisite ends a branch); returns how many it led back to.
fn count_roots(state: usize, failed: &[FailedState], scratch: &mut RootScratch) -> usize {
    let RootScratch {
        causes: _,
        labels,
        fallout_of_root,
        seen,
        stack,
    } = scratch;
    seen.clear();
    seen.resize(failed.len(), false);
    stack.clear();
    let requisites_of = |i: usize| failed[i].failed_requisites.as_deref().unwrap_or_default();
    stack.extend((0..requisites_of(state).len()).map(|r| (state, r)));
    let mut roots = 0;
    while let Some((of, r)) = stack.pop() {
        let Some(i) = labels.get(&requisites_of(of)[r], failed) else {
            continue;
        };
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        match &failed[i].failed_requisites {
            Some(next) => stack.extend((0..next.len()).map(|r| (i, r))),
            None => {
                fallout_of_root[i] += 1;
                roots += 1;
            }
        }
    }
    roots
}

#[cfg(test)]
mod tests;
