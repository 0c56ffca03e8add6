//! A part of a record that many records hold the same: a job's failure
//! correlation is one for its 500 minions' `state_failure`s. It is made once
//! and each record holds a pointer to it (a clone copies no text), redaction
//! scrubs it once (`redact` remembers what it made of the last few), and the
//! JSON lines encode it once: its fields' JSON is kept with it the first time
//! and written as it is after ([`json::line`], [`json::record`]). On the
//! wire it is the part itself: serialised and read as `T`.

use std::sync::{Arc, OnceLock};

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, Serializer};

use super::json;

pub struct Shared<T>(Arc<Part<T>>);

/// The part, and its fields as JSON once a JSON line held it.
pub(crate) struct Part<T> {
    part: T,
    /// Its fields' JSON (`"a":1,"b":2`); `None`: not a JSON object (written
    /// by `T` itself).
    json: OnceLock<Option<Box<str>>>,
}

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

impl<T: Serialize> Shared<T> {
    /// Its fields' JSON, kept (made the first time): `None` when it is not
    /// written as an object.
    pub(crate) fn kept_fields(&self) -> Option<&str> {
        self.0
            .json
            .get_or_init(|| json::fields(&self.0.part))
            .as_deref()
    }
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if !json::writing() {
            return self.0.part.serialize(serializer);
        }
        match self.kept_fields() {
            Some(fields) => json::serialize_kept(fields, serializer),
            None => self.0.part.serialize(serializer),
        }
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

    fn line<T: Serialize>(value: &T) -> String {
        let mut out = Vec::new();
        json::line(value, &mut out).unwrap();
        String::from_utf8(out).unwrap()
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
        let lines = || line(&whole);
        assert_eq!(lines(), plain, "made and kept");
        assert!(whole.part.0.json.get().is_some_and(Option::is_some));
        assert_eq!(lines(), plain, "written as kept");
        assert_eq!(serde_json::from_str::<Whole>(&plain).unwrap(), whole);
        assert!(!json::writing(), "set back after");
        let value = serde_json::to_value(&whole).unwrap();
        assert_eq!(value["count"], 2);
    }

    #[test]
    fn a_change_copies_it_first_and_forgets_its_json() {
        let one = whole().part;
        line(&one);
        let mut two = one.clone();
        assert!(Arc::ptr_eq(one.arc(), two.arc()));
        two.make_mut().commit = "def".into();
        assert_eq!(one.commit, "abc");
        let json = line(&two);
        assert!(json.contains(r#""commit":"def""#), "{json}");
        let mut alone = Shared::new(Part {
            commit: "a".into(),
            subject: None,
            count: 0,
        });
        line(&alone);
        alone.make_mut().count = 7;
        let json = line(&alone);
        assert!(json.contains(r#""count":7"#), "{json}");
    }
}
