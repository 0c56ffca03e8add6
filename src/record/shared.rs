//! A part of a record that many records hold the same: a job's failure
//! correlation is one for its 500 minions' `state_failure`s. It is made once
//! and each record holds a pointer to it (a clone copies no text), redaction
//! scrubs it once (`redact` remembers what it made of the last few), and the
//! JSON lines encode it once: its fields' JSON is kept with it the first time
//! and written as it is after ([`encoding_json_lines`]). On the wire it is
//! the part itself: serialised and read as `T`.

use std::cell::Cell;
use std::sync::{Arc, OnceLock};

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;

pub struct Shared<T>(Arc<Part<T>>);

/// The part, and its fields as JSON once a JSON line held it.
pub(crate) struct Part<T> {
    part: T,
    /// `None`: not a JSON object (written by `T` itself).
    json: OnceLock<Option<Fields>>,
}

/// An object's fields in order, each value as JSON text.
type Fields = Box<[(Box<str>, Box<RawValue>)]>;

impl<T> Shared<T> {
    pub fn new(part: T) -> Self {
        Self(Arc::new(Part {
            part,
            json: OnceLock::new(),
        }))
    }

    /// The pointer itself (what redaction remembers it by).
    pub(crate) fn arc(&self) -> &Arc<Part<T>> {
        &self.0
    }

    pub(crate) fn from_arc(part: Arc<Part<T>>) -> Self {
        Self(part)
    }
}

impl<T: Clone> Shared<T> {
    /// The part to change: copied first when other records hold it (and its
    /// JSON made anew).
    pub fn make_mut(&mut self) -> &mut T {
        let own = Arc::make_mut(&mut self.0);
        own.json = OnceLock::new();
        &mut own.part
    }
}

impl<T: Clone> Clone for Part<T> {
    fn clone(&self) -> Self {
        Self {
            part: self.part.clone(),
            json: OnceLock::new(),
        }
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> std::ops::Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0.part
    }
}

impl<T: Default> Default for Shared<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T> From<T> for Shared<T> {
    fn from(part: T) -> Self {
        Self::new(part)
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.part == other.0.part
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.part.fmt(f)
    }
}

thread_local! {
    static JSON_LINES: Cell<bool> = const { Cell::new(false) };
}

/// Runs `encode`, which writes records with serde_json into bytes: a shared
/// part writes the JSON it kept (made the first time), not its fields anew.
/// Any other serialiser (a JSON value, MessagePack) gets the part's own
/// fields, as always.
pub fn encoding_json_lines<R>(encode: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            JSON_LINES.with(|on| on.set(self.0));
        }
    }
    let _reset = Reset(JSON_LINES.with(|on| on.replace(true)));
    encode()
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if !JSON_LINES.with(Cell::get) {
            return self.0.part.serialize(serializer);
        }
        match self.0.json.get_or_init(|| fields_of(&self.0.part)) {
            Some(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, value) in fields.iter() {
                    map.serialize_entry(&**key, &**value)?;
                }
                map.end()
            }
            None => self.0.part.serialize(serializer),
        }
    }
}

/// `part`'s fields as JSON, in its order; `None` when it is not an object.
fn fields_of<T: Serialize>(part: &T) -> Option<Fields> {
    let text = serde_json::to_string(part).ok()?;
    serde_json::from_str::<Entries>(&text)
        .ok()
        .map(|e| e.0.into_boxed_slice())
}

/// A JSON object's fields, in order, values untouched.
struct Entries(Vec<(Box<str>, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Entries;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry::<Box<str>, Box<RawValue>>()? {
                    fields.push(entry);
                }
                Ok(Entries(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Self::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Part {
        commit: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        subject: Option<String>,
        count: u32,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Whole {
        minion: String,
        #[serde(flatten)]
        part: Shared<Part>,
        output: Shared<Part>,
        name: Shared<String>,
    }

    fn whole() -> Whole {
        let part = Shared::new(Part {
            commit: "abc".into(),
            subject: Some("fix: \"quotes\"\n".into()),
            count: 2,
        });
        Whole {
            minion: "web1".into(),
            part: part.clone(),
            output: part,
            name: "n".to_owned().into(),
        }
    }

    #[test]
    fn it_reads_and_writes_as_the_part_itself_kept_json_or_not() {
        let whole = whole();
        let plain = serde_json::to_string(&whole).unwrap();
        assert_eq!(
            plain,
            r#"{"minion":"web1","commit":"abc","subject":"fix: \"quotes\"\n","count":2,"output":{"commit":"abc","subject":"fix: \"quotes\"\n","count":2},"name":"n"}"#
        );
        let lines = || encoding_json_lines(|| serde_json::to_string(&whole).unwrap());
        assert_eq!(lines(), plain, "made and kept");
        assert!(whole.part.0.json.get().is_some_and(Option::is_some));
        assert_eq!(lines(), plain, "written as kept");
        assert_eq!(serde_json::from_str::<Whole>(&plain).unwrap(), whole);
        assert!(!JSON_LINES.with(Cell::get), "set back after");
        let value = serde_json::to_value(&whole).unwrap();
        assert_eq!(value["count"], 2);
    }

    #[test]
    fn a_change_copies_it_first_and_forgets_its_json() {
        let one = whole().part;
        encoding_json_lines(|| serde_json::to_string(&one).unwrap());
        let mut two = one.clone();
        assert!(Arc::ptr_eq(one.arc(), two.arc()));
        two.make_mut().commit = "def".into();
        assert_eq!(one.commit, "abc");
        let json = encoding_json_lines(|| serde_json::to_string(&two).unwrap());
        assert!(json.contains(r#""commit":"def""#), "{json}");
        let mut alone = Shared::new(Part {
            commit: "a".into(),
            subject: None,
            count: 0,
        });
        encoding_json_lines(|| serde_json::to_string(&alone).unwrap());
        alone.make_mut().count = 7;
        let json = encoding_json_lines(|| serde_json::to_string(&alone).unwrap());
        assert!(json.contains(r#""count":7"#), "{json}");
    }
}
