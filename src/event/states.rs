//! The raw walk of a state run's return (`{"mod_|-id_|-name_|-fun": {result,
//! changes, ...}}`) and of an orchestration's (`{"data": {<master id>: <states>}}`):
//! spans of the raw msgpack, nothing materialised. A return's states are walked
//! once ([`States`], kept on the decoded return): the tracker counts them,
//! triage decodes only the failed ones, drift reads only the changed ones.

use std::cell::OnceCell;
use std::sync::LazyLock;

use compact_str::CompactString;

use super::cursor::Cursor;
use super::json::{Limits, to_json_within};
use crate::record::{StateCounts, Trimmed, stable_hash};

/// What Salt puts in place of a value over its share of `max_event_size`.
const VALUE_TRIMMED: &[u8] = b"VALUE_TRIMMED";

/// Whether, and how deep, Salt trimmed a return (`salt.utils.event`'s
/// `trim_dict`: the whole value, or values of the top-level map and of maps
/// inside it, never inside lists). A return without the marker costs one
/// substring search.
pub fn trimmed(raw: &[u8]) -> Option<Trimmed> {
    /// Built once: `memmem::find` builds its searcher on every call, which
    /// cost as much as searching a 1 KB return.
    static FINDER: LazyLock<memchr::memmem::Finder<'static>> =
        LazyLock::new(|| memchr::memmem::Finder::new(VALUE_TRIMMED));
    FINDER.find(raw)?;
    let mut cursor = Cursor::new(raw);
    if let Some(text) = cursor.clone().read_str_or_bin() {
        return (text == VALUE_TRIMMED).then_some(Trimmed::Return);
    }
    let mut found = None;
    for _ in 0..cursor.read_map_len()? {
        cursor.take_raw().ok()?;
        let value = cursor.take_raw().ok()?;
        if Cursor::new(value).read_str_or_bin() == Some(VALUE_TRIMMED) {
            return Some(Trimmed::States);
        }
        if FINDER.find(value).is_some() {
            found = Some(Trimmed::Values);
        }
    }
    found
}

/// A hash of a state key's module, id and function (not its name, which may
/// hold a minion's paths). Stored (drift's and the correlator's memories), so
/// it never changes.
pub fn state_hash(key: &[u8]) -> u64 {
    let mut parts = key.split(|b| *b == b'|');
    let (module, id) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let fun = key.rsplit(|b| *b == b'-').next().unwrap_or_default();
    stable_hash([module, id, fun]) as u64
}

/// One state's entry in a state-run return.
#[derive(Debug, Clone, Copy)]
pub struct StateEntry<'a> {
    /// `mod_|-id_|-name_|-fun`.
    pub key: &'a [u8],
    /// `true`, `false`, or `None` (`null`: would change under `test=True`).
    pub result: Option<bool>,
    pub changed: bool,
    /// The state's whole result map, raw.
    pub raw: &'a [u8],
}

/// `{"data": {"<master id>": {<states>}}, ...}` → (master id, raw states).
pub fn orchestration_states(raw: &[u8]) -> Option<(String, &[u8])> {
    let mut cursor = Cursor::new(raw);
    for _ in 0..cursor.read_map_len()? {
        let key = cursor.read_str_or_bin()?;
        let value = cursor.take_raw().ok()?;
        if key == b"data" {
            let mut inner = Cursor::new(value);
            if inner.read_map_len()? == 0 {
                return None;
            }
            let id = String::from_utf8_lossy(inner.read_str_or_bin()?).into_owned();
            return Some((id, inner.take_raw().ok()?));
        }
    }
    None
}

/// `(result, changes non-empty, the map's length)` of the state result map
/// `rest` starts with: walking its fields is walking to its end.
fn state_outcome(rest: &[u8]) -> Option<(Option<bool>, bool, usize)> {
    let mut cursor = Cursor::new(rest);
    let fields = cursor.read_map_len()?;
    let (mut result, mut changed) = (None, false);
    for _ in 0..fields {
        let key = cursor.read_key().ok()?;
        let value = cursor.take_raw().ok()?;
        match key {
            Some(b"result") => {
                result = match value {
                    [0xc3] => Some(true),
                    [0xc2] => Some(false),
                    _ => None,
                }
            }
            // An empty map (0x80) or nil means no changes.
            Some(b"changes") => changed = !matches!(value, [0x80] | [0xc0]),
            _ => {}
        }
    }
    Some((result, changed, cursor.position()))
}

/// A msgpack float or integer as f64 (as JSON's `as_f64` reads a number).
pub fn msgpack_number(raw: &[u8]) -> Option<f64> {
    match raw {
        [0xcb, rest @ ..] => Some(f64::from_be_bytes(rest.try_into().ok()?)),
        [0xca, rest @ ..] => Some(f64::from(f32::from_be_bytes(rest.try_into().ok()?))),
        // i128 holds every msgpack integer; as f64 it rounds as JSON's does.
        _ => msgpack_int(raw).map(|n| n as f64),
    }
}

/// A msgpack integer, whatever its width and sign (`None` for anything else).
pub fn msgpack_int(raw: &[u8]) -> Option<i128> {
    let be = |rest: &[u8]| -> Option<[u8; 8]> {
        // Right-aligned into 8 bytes; the caller says how to read the sign.
        let mut wide = [0; 8];
        wide.get_mut(8 - rest.len()..)?.copy_from_slice(rest);
        Some(wide)
    };
    let (tag, rest) = raw.split_first()?;
    let width = match tag {
        0x00..=0x7f => return (rest.is_empty()).then_some(i128::from(*tag)),
        0xe0..=0xff => return (rest.is_empty()).then_some(i128::from(*tag as i8)),
        0xcc | 0xd0 => 1,
        0xcd | 0xd1 => 2,
        0xce | 0xd2 => 4,
        0xcf | 0xd3 => 8,
        _ => return None,
    };
    if rest.len() != width {
        return None;
    }
    let unsigned = u64::from_be_bytes(be(rest)?);
    Some(if *tag >= 0xd0 {
        // Sign-extend from `width` bytes.
        let shift = 64 - 8 * width as u32;
        i128::from(((unsigned << shift) as i64) >> shift)
    } else {
        i128::from(unsigned)
    })
}

/// The raw values of the keys in `keys` of a msgpack map, in `keys`' order
/// (`None` for a key it lacks, or when `raw` is not a map).
pub fn fields<'a, const N: usize>(raw: &'a [u8], keys: [&[u8]; N]) -> [Option<&'a [u8]>; N] {
    let mut found = [None; N];
    let mut cursor = Cursor::new(raw);
    let Some(pairs) = cursor.read_map_len() else {
        return found;
    };
    for _ in 0..pairs {
        let Ok(key) = cursor.read_key() else {
            return found;
        };
        let Ok(value) = cursor.take_raw() else {
            return found;
        };
        if let Some(i) = key.and_then(|k| keys.iter().position(|w| *w == k)) {
            found[i] = Some(value);
        }
    }
    found
}

/// [`text_of`] (the head, at most `max` bytes) for a short text such as a
/// state's start time: held inline, not allocated, when it is a string of up
/// to 24 bytes.
pub fn short_text_of(raw: &[u8], max: usize) -> Option<CompactString> {
    match Cursor::new(raw).read_str_or_bin() {
        // `CompactString::from_utf8_lossy` pushes chunk by chunk (a thousand
        // instructions for a start time); valid text is copied in one go.
        Some(bytes) if bytes.len() <= max.min(24) => Some(match std::str::from_utf8(bytes) {
            Ok(text) => CompactString::new(text),
            Err(_) => CompactString::from_utf8_lossy(bytes),
        }),
        _ => text_of(raw, max, false).map(CompactString::from),
    }
}

/// A field's value as text, at most `max` bytes of it (the head, or with
/// `tail` the end: a command's last lines say why it failed); a list of lines
/// is joined with newlines; anything else as JSON. Nothing larger than `max`
/// is built.
pub fn text_of(raw: &[u8], max: usize, tail: bool) -> Option<String> {
    if let Some(bytes) = Cursor::new(raw).read_str_or_bin() {
        let cut = if bytes.len() <= max {
            bytes
        } else if tail {
            let mut start = bytes.len() - max;
            while start < bytes.len() && (bytes[start] & 0xc0) == 0x80 {
                start += 1;
            }
            &bytes[start..]
        } else {
            let mut end = max;
            while end > 0 && (bytes[end] & 0xc0) == 0x80 {
                end -= 1;
            }
            &bytes[..end]
        };
        return Some(String::from_utf8_lossy(cut).into_owned());
    }
    let limits = Limits {
        max_text: max,
        max_values: 10_000,
        max_text_total: max.saturating_mul(4),
    };
    match to_json_within(raw, limits).ok()? {
        serde_json::Value::Null => None,
        serde_json::Value::Array(lines) => {
            let joined = lines
                .iter()
                .map(|l| l.as_str().map_or_else(|| l.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join("\n");
            Some(crate::plain::within(&joined, max).to_owned())
        }
        other => Some(other.to_string()),
    }
}

/// States reserved up front at most; a longer run grows as it goes (a map's
/// length is a claim of the input, not yet proof).
const MAX_RESERVED_STATES: usize = 4096;

/// The last state run's keys with their [`state_hash`]es, per thread: a
/// job's minions run the same states in the same order, so a run's keys are
/// mostly the last run's, compared (a `memcmp`) instead of hashed again (FNV
/// over every byte, the agent's most expensive hash per state).
#[derive(Default)]
struct LastKeys {
    keys: Vec<(Box<[u8]>, u64)>,
    /// Bytes of `keys`, at most [`LAST_KEYS_BYTES`].
    bytes: usize,
}

/// Key bytes [`LastKeys`] holds at most: a highstate's first ~1,000 states.
const LAST_KEYS_BYTES: usize = 64 * 1024;

thread_local! {
    static LAST_KEYS: std::cell::RefCell<LastKeys> = std::cell::RefCell::default();
}

impl LastKeys {
    /// Each entry's [`state_hash`], the last run's where its key is the same.
    fn hashes(entries: &[StateEntry<'_>]) -> Vec<u64> {
        LAST_KEYS.with(|last| match last.try_borrow_mut() {
            Ok(mut last) => entries
                .iter()
                .enumerate()
                .map(|(index, entry)| last.hash(index, entry.key))
                .collect(),
            Err(_) => entries.iter().map(|e| state_hash(e.key)).collect(),
        })
    }

    fn hash(&mut self, index: usize, key: &[u8]) -> u64 {
        if let Some((known, hash)) = self.keys.get(index) {
            if **known == *key {
                return *hash;
            }
        }
        let hash = state_hash(key);
        let held = self.keys.get(index).map_or(0, |(known, _)| known.len());
        if index <= self.keys.len() && self.bytes - held + key.len() <= LAST_KEYS_BYTES {
            let kept = (Box::from(key), hash);
            match self.keys.get_mut(index) {
                Some(slot) => *slot = kept,
                None => self.keys.push(kept),
            }
            self.bytes = self.bytes - held + key.len();
        }
        hash
    }
}

/// A state-run return's states, walked once: every stage that reads a return's
/// states (the tracker's counts, triage, drift, the salt-exporter metrics)
/// reads them from here, not from the bytes again.
#[derive(Debug, Clone, Default)]
pub struct States<'a> {
    entries: Vec<StateEntry<'a>>,
    /// Each entry's [`state_hash`], made the first time one is asked for
    /// (triage's outcomes and drift both want every one).
    key_hashes: OnceCell<Vec<u64>>,
}

impl<'a> States<'a> {
    /// The states of `raw`, in wire order; `None` when it is not a state run
    /// (a render error is a list of strings; other functions return anything).
    pub fn of(raw: &'a [u8]) -> Option<Self> {
        Self::read(raw).map(|(states, _)| states)
    }

    /// [`Self::of`] the state run at the head of `raw`, and how many bytes
    /// its map took: the decode reads a return's states as it passes over
    /// its bytes, in one walk.
    pub fn read(raw: &'a [u8]) -> Option<(Self, usize)> {
        let mut cursor = Cursor::new(raw);
        let claimed = cursor.read_map_len()?;
        let mut entries = Vec::with_capacity((claimed as usize).min(MAX_RESERVED_STATES));
        for _ in 0..claimed {
            let key = cursor.read_str_or_bin()?;
            // State keys are `mod_|-id_|-name_|-fun`; anything else is not a state run.
            if !key.windows(3).any(|w| w == b"_|-") {
                return None;
            }
            let (result, changed, len) = state_outcome(cursor.rest())?;
            let value = cursor.take_bytes(len)?;
            entries.push(StateEntry {
                key,
                result,
                changed,
                raw: value,
            });
        }
        let states = Self {
            entries,
            key_hashes: OnceCell::new(),
        };
        Some((states, cursor.position()))
    }

    /// [`state_hash`] of entry `index`'s key.
    ///
    /// # Panics
    /// When `index` is not an entry's.
    pub fn key_hash(&self, index: usize) -> u64 {
        self.key_hashes
            .get_or_init(|| LastKeys::hashes(&self.entries))[index]
    }

    /// Every state, in wire order.
    pub fn entries(&self) -> &[StateEntry<'a>] {
        &self.entries
    }

    /// The sum of every state's `duration` (Salt's milliseconds); `None` unless
    /// every state has a numeric one (a state never ran). salt-exporter's
    /// `salt_job_duration_seconds`.
    pub fn summed_duration_ms(&self) -> Option<f64> {
        let mut total = 0.0;
        for state in &self.entries {
            let [duration] = fields(state.raw, [b"duration"]);
            total += duration.and_then(msgpack_number)?;
        }
        Some(total)
    }

    /// The states by outcome.
    pub fn counts(&self) -> StateCounts {
        let mut counts = StateCounts {
            ok: 0,
            changed: 0,
            failed: 0,
            would_change: 0,
        };
        for state in &self.entries {
            match state.result {
                Some(false) => counts.failed += 1,
                None => counts.would_change += 1,
                Some(true) if state.changed => counts.changed += 1,
                Some(true) => counts.ok += 1,
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{StateCounts, Trimmed};
    use serde_json::json;

    /// `state_hash` of `file_|-conf_|-/etc/app.conf_|-managed`, worked out
    /// apart from this code (FNV-1a 128 and the final mix, written again in
    /// Python).
    const STATE_HASH_OF_CONF: u64 = 0x9de3_98f3_bf14_39df;

    /// A short text reads as `text_of` reads it (cut at `max`, invalid bytes
    /// replaced, a list joined), and one of up to 24 bytes is held inline.
    #[test]
    fn a_short_text_reads_as_text_of_reads_it_and_is_inline() {
        let packed = |v: serde_json::Value| rmp_serde::to_vec(&v).unwrap();
        // A msgpack str of 15 bytes, one of them no UTF-8.
        let mut invalid = vec![0xa0 | 15];
        invalid.extend_from_slice(b"03:12:\xff1.506143");
        let cases = [
            (packed(json!("03:12:51.506143")), 64, true),
            (packed(json!("03:12:51.506143")), 5, true),
            (
                packed(json!("a start time of more than twenty-four bytes")),
                64,
                false,
            ),
            (packed(json!(["03:12", "51"])), 64, true),
            (invalid, 64, true),
        ];
        for (raw, max, inline) in cases {
            let short = short_text_of(&raw, max).unwrap();
            assert_eq!(Some(short.as_str()), text_of(&raw, max, false).as_deref());
            assert_eq!(!short.is_heap_allocated(), inline, "{short:?}");
        }
        assert_eq!(short_text_of(&packed(json!(null)), 64), None);
    }

    /// A state's map is walked once: its fields give its outcome and its
    /// end. A key that is no text is passed whole, not read as the value.
    #[test]
    fn a_states_map_ends_where_its_fields_end_whatever_its_keys() {
        let first: &[u8] = &[
            0x82, // {1: "result", "result": false}
            0x01, 0xa6, b'r', b'e', b's', b'u', b'l', b't', //
            0xa6, b'r', b'e', b's', b'u', b'l', b't', 0xc2,
        ];
        let mut raw = vec![0x82, 0xa9];
        raw.extend_from_slice(b"a_|-b_|-c");
        raw.extend_from_slice(first);
        raw.push(0xa9);
        raw.extend_from_slice(b"d_|-e_|-f");
        raw.extend_from_slice(&[0x81, 0xa6, b'r', b'e', b's', b'u', b'l', b't', 0xc3]);
        let states = States::of(&raw).expect("a state run");
        let [one, two] = states.entries() else {
            panic!("two states")
        };
        assert_eq!((one.result, one.raw), (Some(false), first));
        assert_eq!((two.key, two.result), (&b"d_|-e_|-f"[..], Some(true)));
        assert!(States::of(&raw[..raw.len() - 1]).is_none(), "cut short");
        // {1: "x", "y": 5}
        let map = [0x82, 0x01, 0xa1, b'x', 0xa1, b'y', 0x05];
        assert_eq!(fields(&map, [b"y"]), [Some(&[0x05][..])]);
    }

    #[test]
    fn a_runs_keys_are_hashed_again_only_where_they_differ_from_the_last_runs() {
        let mut last = LastKeys::default();
        let keys: [&[u8]; 3] = [b"a_|-b_|-c_|-d", b"e_|-f_|-g_|-h", b"i_|-j_|-k_|-l"];
        for (index, key) in keys.iter().enumerate() {
            assert_eq!(last.hash(index, key), state_hash(key));
        }
        // The next run: its second state is another.
        let other: &[u8] = b"x_|-y_|-z_|-w";
        for (index, key) in [keys[0], other, keys[2]].iter().enumerate() {
            assert_eq!(last.hash(index, key), state_hash(key));
        }
        assert_eq!(&*last.keys[1].0, other);
        assert_eq!(last.bytes, 3 * 13);
        // A key past the bound is hashed, not kept.
        let huge = vec![b'm'; LAST_KEYS_BYTES];
        assert_eq!(last.hash(3, &huge), state_hash(&huge));
        assert_eq!((last.keys.len(), last.bytes), (3, 39));
    }

    #[test]
    fn a_runs_key_hashes_are_made_once_when_first_asked_for() {
        let raw = rmp_serde::to_vec_named(&json!({
            "file_|-conf_|-/etc/app.conf_|-managed": {"result": true, "changes": {}},
            "cmd_|-migrate_|-/opt/migrate_|-run": {"result": false, "changes": {}},
        }))
        .unwrap();
        let states = States::of(&raw).expect("a state run");
        assert!(
            states.key_hashes.get().is_none(),
            "none before one is asked for"
        );
        for (index, entry) in states.entries().iter().enumerate() {
            assert_eq!(states.key_hash(index), state_hash(entry.key));
        }
        assert_eq!(
            states.key_hashes.get().map(Vec::len),
            Some(2),
            "made once, kept"
        );
        // Stored in checkpoints (drift's and the correlator's memories): the
        // value of a key never changes.
        assert_eq!(
            state_hash(b"file_|-conf_|-/etc/app.conf_|-managed"),
            STATE_HASH_OF_CONF
        );
    }

    /// Every width and sign msgpack writes an integer in reads back as written,
    /// as does a float; anything else is not a number.
    #[test]
    fn numbers_read_back_at_every_width() {
        let ints: [i128; 22] = [
            0,
            1,
            127,
            128,
            255,
            256,
            65_535,
            65_536,
            4_294_967_295,
            4_294_967_296,
            i64::MAX as i128,
            u64::MAX as i128,
            -1,
            -32,
            -33,
            -128,
            -129,
            -32_768,
            -32_769,
            i32::MIN as i128,
            i32::MIN as i128 - 1,
            i64::MIN as i128,
        ];
        for n in ints {
            let raw = if n > i64::MAX as i128 {
                rmp_serde::to_vec(&(n as u64)).unwrap()
            } else {
                rmp_serde::to_vec(&(n as i64)).unwrap()
            };
            assert_eq!(msgpack_int(&raw), Some(n), "{n} as {raw:x?}");
            assert_eq!(msgpack_number(&raw), Some(n as f64));
        }
        for x in [0.5_f64, -2.25, 1e300] {
            assert_eq!(msgpack_number(&rmp_serde::to_vec(&x).unwrap()), Some(x));
            assert_eq!(msgpack_int(&rmp_serde::to_vec(&x).unwrap()), None);
        }
        assert_eq!(
            msgpack_number(&rmp_serde::to_vec(&1.5_f32).unwrap()),
            Some(1.5)
        );
        for other in [
            &b"\xa1x"[..],
            &[0xc0],
            &[0xc3],
            &[0xcd, 0x01],
            &[0x05, 0x00],
            &[],
        ] {
            assert_eq!(msgpack_int(other), None, "{other:x?}");
            assert_eq!(msgpack_number(other), None, "{other:x?}");
        }
    }

    /// Salt's three shapes of a trimmed return, and a return without the mark.
    #[test]
    fn trimmed_returns_are_told_by_depth() {
        let pack = |v: serde_json::Value| rmp_serde::to_vec_named(&v).unwrap();
        assert_eq!(
            trimmed(&pack(json!("VALUE_TRIMMED"))),
            Some(Trimmed::Return)
        );
        let by_state = json!({
            "file_|-a_|-/etc/a_|-managed": "VALUE_TRIMMED",
            "cmd_|-b_|-true_|-run": {"result": true, "changes": {}},
        });
        assert_eq!(trimmed(&pack(by_state)), Some(Trimmed::States));
        let deep = json!({"file_|-a_|-/etc/a_|-managed": {"result": true, "changes": {"diff": "VALUE_TRIMMED"}}});
        assert_eq!(trimmed(&pack(deep)), Some(Trimmed::Values));
        assert_eq!(trimmed(&pack(json!({"a": {"result": true}}))), None);
        assert_eq!(trimmed(&pack(json!("just text"))), None);
    }

    #[test]
    fn counts_ok_changed_failed_and_test_mode() {
        let ret = json!({
            "test_|-a_|-a_|-succeed_without_changes": {"result": true, "changes": {}},
            "cmd_|-b_|-x_|-run": {"result": false, "changes": {"retcode": 1}},
            "cmd_|-c_|-y_|-run": {"result": false, "changes": {}, "comment": "One or more requisite failed"},
            "file_|-d_|-z_|-managed": {"result": true, "changes": {"diff": "..."}},
            "pkg_|-e_|-p_|-installed": {"result": null, "changes": {}},
        });
        let counts = States::of(&rmp_serde::to_vec_named(&ret).unwrap())
            .unwrap()
            .counts();
        assert_eq!(
            counts,
            StateCounts {
                ok: 1,
                changed: 1,
                failed: 2,
                would_change: 1
            }
        );
    }

    #[test]
    fn other_returns_are_not_state_runs() {
        for v in [
            json!(true),
            json!("hello"),
            json!(["Rendering SLS 'base:x' failed"]),
            json!({"pid": 5}),
        ] {
            assert!(
                States::of(&rmp_serde::to_vec_named(&v).unwrap()).is_none(),
                "{v}"
            );
        }
    }

    /// salt-exporter's `salt_job_duration_seconds` sums the states' durations,
    /// only when every state has one.
    #[test]
    fn durations_are_summed_only_when_every_state_has_one() {
        let pack = |v: serde_json::Value| rmp_serde::to_vec_named(&v).unwrap();
        let summed_duration_ms =
            |raw: &[u8]| States::of(raw).and_then(|states| states.summed_duration_ms());
        let ran = json!({
            "test_|-a_|-a_|-succeed_with_changes": {"result": true, "changes": {"x": 1}, "duration": 1.5},
            "cmd_|-b_|-x_|-run": {"result": false, "changes": {}, "duration": 12},
        });
        assert_eq!(summed_duration_ms(&pack(ran)), Some(13.5));
        let one_missing = json!({
            "test_|-a_|-a_|-nop": {"result": true, "changes": {}, "duration": 1.5},
            "cmd_|-b_|-x_|-run": {"result": false, "changes": {}, "comment": "requisite failed"},
        });
        assert_eq!(summed_duration_ms(&pack(one_missing)), None);
        assert_eq!(summed_duration_ms(&pack(json!(true))), None);
        assert_eq!(summed_duration_ms(&pack(json!({}))), Some(0.0));
    }
}
