//! Borrowed, selective payload structs, one per tag class, and the lenient field
//! types they are made of.
//!
//! The top-level `data` map is walked once with the scanner in `bus::msgpack`: keys
//! that are not strings are passed over, values of keys nobody wants are skipped by
//! their headers (no UTF-8 check, unlike serde's `IgnoredAny`), and each wanted value
//! is decoded on its own with `rmp_serde::from_slice` into a borrowed type. A value of
//! an unexpected type leaves that one field empty and is reported in
//! [`Fields::malformed`]; it never fails the event. `arg`, `fun_args` and `metadata`
//! stay raw msgpack for later stages to walk; so does `return`, whose states,
//! when it is a state run, are read in the same walk ([`States::read`]).

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::cursor::Cursor;
use super::states::States;
use super::text::text_from_bytes;
pub use super::text::{Text, TextList};

/// An integer that may arrive as a string of digits or a bool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Int(pub i64);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct IntVisitor;
        impl Visitor<'_> for IntVisitor {
            type Value = Int;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Int, E> {
                Ok(Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Int, E> {
                i64::try_from(v)
                    .map(Int)
                    .map_err(|_| E::custom("integer out of range"))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Int, E> {
                Ok(Int(i64::from(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Int, E> {
                v.trim()
                    .parse()
                    .map(Int)
                    .map_err(|_| E::custom("not an integer"))
            }
        }
        d.deserialize_any(IntVisitor)
    }
}

/// One msgpack value kept as its raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw<'a>(pub &'a [u8]);

impl<'a> Raw<'a> {
    /// Whether the value is msgpack nil.
    pub fn is_nil(&self) -> bool {
        self.0 == [0xc0]
    }
}

/// The wanted fields of one `data` map: each is `None` when absent or malformed.
#[derive(Debug, Default, Clone)]
pub struct Fields<'a> {
    pub jid: Option<Text<'a>>,
    pub id: Option<Text<'a>>,
    pub fun: Option<Text<'a>>,
    pub arg: Option<Raw<'a>>,
    pub fun_args: Option<Raw<'a>>,
    pub tgt: Option<TextList<'a>>,
    pub tgt_type: Option<Text<'a>>,
    pub user: Option<Text<'a>>,
    pub minions: Option<TextList<'a>>,
    pub missing: Option<TextList<'a>>,
    pub retcode: Option<Int>,
    pub success: Option<bool>,
    pub schedule: Option<Text<'a>>,
    pub metadata: Option<Raw<'a>>,
    /// W3C trace context Salt's tracing adds to the events it fires (3008+).
    pub traceparent: Option<Text<'a>>,
    pub ret: Option<Raw<'a>>,
    /// `ret`'s states when it is a state run, read as its bytes were passed.
    pub states: Option<States<'a>>,
    pub out: Option<Text<'a>>,
    pub stamp: Option<Text<'a>>,
    pub act: Option<Text<'a>>,
    pub result: Option<bool>,
    pub present: Option<TextList<'a>>,
    pub new: Option<TextList<'a>>,
    pub lost: Option<TextList<'a>>,
    /// The nested `data` of minion events (`prog`, `minion_start`).
    pub inner_data: Option<Raw<'a>>,
    /// A batch event's `state` (`salt/batch/...`), read by `batch`.
    pub batch_state: Option<Raw<'a>>,
    /// A batch the master runs (`salt --async -b`): its size, how many it
    /// runs on, why it halted and whom it never sent to.
    pub batch_size: Option<Int>,
    pub total_minions: Option<Int>,
    pub reason: Option<Text<'a>>,
    pub abandoned_pending: Option<TextList<'a>>,
    /// The first field whose value had an unexpected type, if any.
    pub malformed: Option<&'static str>,
    /// How many map keys were not strings (skipped).
    pub non_string_keys: u32,
}

/// The top-level `data` is not a msgpack map, or is cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAMap;

impl<'a> Fields<'a> {
    /// Walks `data` (a msgpack map) once and keeps the wanted fields.
    pub fn scan(data: &'a [u8]) -> Result<Fields<'a>, NotAMap> {
        let mut cursor = Cursor::new(data);
        let pairs = cursor.read_map_len().ok_or(NotAMap)?;
        let mut f = Fields::default();
        for _ in 0..pairs {
            let key = cursor.read_key().map_err(|_| NotAMap)?;
            if key == Some(b"return") {
                // A state run is walked once: its states are read as its
                // bytes are passed over.
                if let Some((states, len)) = States::read(cursor.rest()) {
                    f.ret = cursor.take_bytes(len).map(Raw);
                    f.states = Some(states);
                    continue;
                }
            }
            let value = cursor.take_raw().map_err(|_| NotAMap)?;
            // A wanted key is matched as bytes (each is ASCII); only a key
            // kept by no field is read as text, to count it when it is none.
            match key {
                Some(key) if f.keep(key, value) => {}
                Some(key) if std::str::from_utf8(key).is_ok() => {}
                _ => f.non_string_keys += 1,
            }
        }
        Ok(f)
    }

    /// Keeps `raw` in the field named `key`; `false` when no field is.
    fn keep(&mut self, key: &[u8], raw: &'a [u8]) -> bool {
        let m = &mut self.malformed;
        match key {
            b"jid" => self.jid = typed(raw, "jid", m),
            b"id" => self.id = typed(raw, "id", m),
            b"fun" => self.fun = typed(raw, "fun", m),
            b"arg" => self.arg = Some(Raw(raw)),
            b"fun_args" => self.fun_args = Some(Raw(raw)),
            b"tgt" => self.tgt = typed(raw, "tgt", m),
            b"tgt_type" => self.tgt_type = typed(raw, "tgt_type", m),
            b"user" => self.user = typed(raw, "user", m),
            b"minions" => self.minions = typed(raw, "minions", m),
            b"missing" => self.missing = typed(raw, "missing", m),
            b"retcode" => self.retcode = typed(raw, "retcode", m),
            b"success" => self.success = typed(raw, "success", m),
            b"schedule" => self.schedule = typed(raw, "schedule", m),
            b"metadata" => self.metadata = Some(Raw(raw)),
            b"traceparent" => self.traceparent = typed(raw, "traceparent", m),
            b"return" => (self.ret, self.states) = (Some(Raw(raw)), None),
            b"out" => self.out = typed(raw, "out", m),
            b"_stamp" => self.stamp = typed(raw, "_stamp", m),
            b"act" => self.act = typed(raw, "act", m),
            b"result" => self.result = typed(raw, "result", m),
            b"present" => self.present = typed(raw, "present", m),
            b"new" => self.new = typed(raw, "new", m),
            b"lost" => self.lost = typed(raw, "lost", m),
            b"data" => self.inner_data = Some(Raw(raw)),
            b"state" => self.batch_state = Some(Raw(raw)),
            b"batch_size" => self.batch_size = typed(raw, "batch_size", m),
            b"total_minions" => self.total_minions = typed(raw, "total_minions", m),
            b"reason" => self.reason = typed(raw, "reason", m),
            b"abandoned_pending" => self.abandoned_pending = typed(raw, "abandoned_pending", m),
            _ => return false,
        }
        true
    }
}

/// A field type with a direct read for its common wire shape, tried before serde.
/// Profiling small returns showed a `rmp_serde::from_slice` per scalar field to be
/// most of the decode time; the fallback keeps every lenient shape.
pub trait FastField<'a>: Sized + Deserialize<'a> {
    fn fast(_raw: &'a [u8]) -> Option<Self> {
        None
    }
}

impl<'a> FastField<'a> for Text<'a> {
    fn fast(raw: &'a [u8]) -> Option<Self> {
        let mut cursor = Cursor::new(raw);
        let bytes = cursor.read_str_or_bin()?;
        cursor.is_at_end().then(|| text_from_bytes(bytes))
    }
}

impl<'a> FastField<'a> for bool {
    fn fast(raw: &'a [u8]) -> Option<Self> {
        match raw {
            [0xc2] => Some(false),
            [0xc3] => Some(true),
            _ => None,
        }
    }
}

impl<'a> FastField<'a> for Int {
    fn fast(raw: &'a [u8]) -> Option<Self> {
        match *raw {
            [b @ (0x00..=0x7f | 0xe0..=0xff)] => Some(Int(i64::from(b as i8))),
            [0xcc, b] => Some(Int(i64::from(b))),
            [0xd0, b] => Some(Int(i64::from(b as i8))),
            _ => None,
        }
    }
}

impl<'a> FastField<'a> for TextList<'a> {
    /// An array of strings, kept packed (see `text`); anything else (an
    /// item of another kind, a lone string) through serde.
    fn fast(raw: &'a [u8]) -> Option<Self> {
        TextList::packed(raw)
    }
}

/// Decodes one field; nil is "absent", a type mismatch is noted and left absent.
pub(super) fn typed<'a, T: FastField<'a>>(
    raw: &'a [u8],
    name: &'static str,
    malformed: &mut Option<&'static str>,
) -> Option<T> {
    if raw == [0xc0] {
        return None;
    }
    if let Some(value) = T::fast(raw) {
        return Some(value);
    }
    match rmp_serde::from_slice(raw) {
        Ok(v) => Some(v),
        Err(_) => {
            malformed.get_or_insert(name);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_wanted_fields_and_skips_the_rest() {
        let data = rmp_serde::to_vec_named(&serde_json::json!({
            "jid": "20261121193259031759", "id": "web2", "fun": "test.ping", "retcode": 0,
            "success": true, "return": {"a": [1, 2]}, "noise": {"deep": ["x", "x", "x"]},
            "tgt": "*", "minions": ["db1", "web1"], "_stamp": "2026-11-21T19:32:59.118891+00:00",
        }))
        .unwrap();
        let f = Fields::scan(&data).unwrap();
        assert_eq!(
            f.jid.as_ref().map(Text::as_str),
            Some("20261121193259031759")
        );
        assert_eq!(f.id.as_ref().map(Text::as_str), Some("web2"));
        assert_eq!(f.retcode, Some(Int(0)));
        assert_eq!(f.success, Some(true));
        assert_eq!(f.tgt.unwrap().iter().collect::<Vec<_>>(), ["*"]);
        assert_eq!(f.minions.unwrap().len(), 2);
        let ret: serde_json::Value = rmp_serde::from_slice(f.ret.unwrap().0).unwrap();
        assert_eq!(ret, serde_json::json!({"a": [1, 2]}));
        assert!(
            matches!(f.jid.unwrap().0, std::borrow::Cow::Borrowed(_)),
            "strings are borrowed"
        );
        assert_eq!(f.malformed, None);
    }

    fn bin(bytes: &[u8]) -> Vec<u8> {
        let mut raw = vec![0x92, 0xa1, b'a', 0xc4, bytes.len() as u8];
        raw.extend_from_slice(bytes);
        raw
    }

    /// A list read directly is the list serde reads, whatever its items.
    #[test]
    fn a_list_is_read_alike_directly_and_through_serde() {
        let cases = [
            rmp_serde::to_vec(&serde_json::json!(["web1", "", "é-minion"])).unwrap(),
            rmp_serde::to_vec(&serde_json::json!([])).unwrap(),
            rmp_serde::to_vec(&serde_json::json!(["web1", 7])).unwrap(),
            rmp_serde::to_vec(&serde_json::json!("web1")).unwrap(),
            bin(b"db1"),
            bin(&[0xff, b'x']),
        ];
        for raw in &cases {
            let read: Option<TextList<'_>> = typed(raw, "minions", &mut None);
            let serde: TextList<'_> = rmp_serde::from_slice(raw).unwrap();
            assert_eq!(read, Some(serde.clone()), "{raw:?}");
            let texts: Vec<&str> = read.as_ref().unwrap().iter().collect();
            let by_serde: Vec<&str> = serde.iter().collect();
            assert_eq!(texts, by_serde, "{raw:?}");
            assert_eq!(read.unwrap().len(), by_serde.len());
        }
        let direct = TextList::fast(&cases[0]).expect("strings are read directly");
        assert!(direct.is_packed(), "kept packed");
        assert_eq!(direct.iter().collect::<Vec<_>>(), ["web1", "", "é-minion"]);
        assert!(
            TextList::fast(&cases[2]).is_none(),
            "an integer goes to serde"
        );
        assert!(
            TextList::fast(&cases[5]).is_none(),
            "text that is not UTF-8 goes to serde, which replaces it"
        );
        // A header asking for more items than there are is no list.
        assert_eq!(TextList::fast(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0xa0]), None);
    }

    #[test]
    fn integer_jid_bin_strings_and_int_keys_are_handled() {
        // {1: "x", "jid": 12261121193259031759 (u64; 20-digit jids from 2026 overflow u64, so Salt sends them as str), bin "id": bin "web1", "retcode": "2"}
        let mut data = vec![0x84, 0x01, 0xa1, b'x', 0xa3, b'j', b'i', b'd', 0xcf];
        data.extend_from_slice(&12261121193259031759u64.to_be_bytes());
        data.extend_from_slice(&[0xc4, 2, b'i', b'd', 0xc4, 4, b'w', b'e', b'b', b'1']);
        data.extend_from_slice(&[0xa7]);
        data.extend_from_slice(b"retcode");
        data.extend_from_slice(&[0xa1, b'2']);
        let f = Fields::scan(&data).unwrap();
        assert_eq!(f.jid.unwrap().as_str(), "12261121193259031759");
        assert_eq!(f.id.unwrap().as_str(), "web1");
        assert_eq!(f.retcode, Some(Int(2)));
        assert_eq!(f.non_string_keys, 1);
    }

    #[test]
    fn a_key_that_is_no_text_is_counted_and_one_no_field_wants_is_not() {
        // {"cmd": "_return", b"\xff\xfe": 1, "jid": "1", "id": "web1"}
        let mut data = vec![0x84, 0xa3, b'c', b'm', b'd', 0xa7];
        data.extend_from_slice(b"_return");
        data.extend_from_slice(&[0xa2, 0xff, 0xfe, 0x01]);
        data.extend_from_slice(&[0xa3, b'j', b'i', b'd', 0xa1, b'1']);
        data.extend_from_slice(&[0xa2, b'i', b'd', 0xa4, b'w', b'e', b'b', b'1']);
        let f = Fields::scan(&data).unwrap();
        assert_eq!(f.non_string_keys, 1);
        assert_eq!(f.jid.unwrap().as_str(), "1");
        assert_eq!(f.id.unwrap().as_str(), "web1");
    }

    #[test]
    fn fast_paths_agree_with_serde() {
        // Values with a fast path (fixint, uint8, int8) and some without.
        for v in [
            0i64, 1, 2, 127, -1, -32, 200, 255, -100, -128, 70000, -70000,
        ] {
            let raw = rmp_serde::to_vec(&v).unwrap();
            let via_serde: Int = rmp_serde::from_slice(&raw).unwrap();
            assert_eq!(via_serde, Int(v));
            assert_eq!(typed::<Int>(&raw, "n", &mut None), Some(via_serde), "{v}");
        }
        for b in [true, false] {
            let raw = rmp_serde::to_vec(&b).unwrap();
            let via_serde: bool = rmp_serde::from_slice(&raw).unwrap();
            assert_eq!(typed::<bool>(&raw, "b", &mut None), Some(via_serde));
        }
        // str, bin, and bin that is not UTF-8.
        for raw in [
            rmp_serde::to_vec("web1").unwrap(),
            vec![0xc4, 4, b'w', b'e', b'b', b'1'],
            vec![0xc4, 2, 0xff, 0x41],
        ] {
            let via_serde: Text<'_> = rmp_serde::from_slice(&raw).unwrap();
            assert!(
                <Text<'_> as FastField<'_>>::fast(&raw).is_some(),
                "{raw:?} has a fast path"
            );
            assert_eq!(
                typed::<Text<'_>>(&raw, "t", &mut None),
                Some(via_serde),
                "{raw:?}"
            );
        }
    }

    #[test]
    fn a_field_of_the_wrong_type_is_dropped_not_fatal() {
        let data =
            rmp_serde::to_vec_named(&serde_json::json!({"success": {"odd": 1}, "id": "web1"}))
                .unwrap();
        let f = Fields::scan(&data).unwrap();
        assert_eq!(f.success, None);
        assert_eq!(f.malformed, Some("success"));
        assert_eq!(f.id.unwrap().as_str(), "web1");
    }

    #[test]
    fn not_a_map_or_truncated_is_an_error() {
        assert_eq!(Fields::scan(&[0x91, 0x01]).unwrap_err(), NotAMap);
        let data = rmp_serde::to_vec_named(&serde_json::json!({"id": "web1", "fun": "x"})).unwrap();
        assert_eq!(Fields::scan(&data[..data.len() - 1]).unwrap_err(), NotAMap);
    }
}
