//! A part of a record that many records hold the same: a job's failure
//! correlation is one for its 500 minions' `state_failure`s. It is made once
//! and each record holds a pointer to it (a clone copies no text), and
//! redaction scrubs it once (`redact` remembers what it made of the last few).
//! On the wire it is the part itself: serialised and read as `T`.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Default)]
pub struct Shared<T>(Arc<T>);

impl<T> Shared<T> {
    pub fn new(part: T) -> Self {
        Self(Arc::new(part))
    }

    /// The pointer itself (what redaction remembers it by).
    pub(crate) fn arc(&self) -> &Arc<T> {
        &self.0
    }

    pub(crate) fn from_arc(part: Arc<T>) -> Self {
        Self(part)
    }
}

impl<T: Clone> Shared<T> {
    /// The part to change: copied first when other records hold it.
    pub fn make_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
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
        &self.0
    }
}

impl<T> From<T> for Shared<T> {
    fn from(part: T) -> Self {
        Self::new(part)
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
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

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Part {
        commit: String,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Whole {
        minion: String,
        #[serde(flatten)]
        part: Shared<Part>,
    }

    #[test]
    fn flattened_it_reads_and_writes_as_the_part_itself() {
        let whole = Whole {
            minion: "web1".into(),
            part: Part {
                commit: "abc".into(),
            }
            .into(),
        };
        let json = serde_json::to_string(&whole).unwrap();
        assert_eq!(json, r#"{"minion":"web1","commit":"abc"}"#);
        assert_eq!(serde_json::from_str::<Whole>(&json).unwrap(), whole);
    }

    #[test]
    fn a_clone_is_the_same_part_and_a_change_copies_it_first() {
        let one = Shared::new(Part {
            commit: "abc".into(),
        });
        let mut two = one.clone();
        assert!(Arc::ptr_eq(one.arc(), two.arc()));
        two.make_mut().commit = "def".into();
        assert_eq!(one.commit, "abc");
        assert_eq!(two.commit, "def");
    }
}
