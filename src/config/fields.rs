//! The keys a config section accepts, read from its serde struct (the field
//! list serde hands `deserialize_struct`), so that every unknown key of a
//! section is named at once, not only the first one serde stops at.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// The field names of the struct `T` deserializes as (empty for other shapes).
pub fn of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldsOf(&mut fields));
    fields
}

/// The keys of `table` that the struct `T` does not accept, in the table's order.
pub fn unknown<'de, T: Deserialize<'de>>(table: &toml::Table) -> Vec<String> {
    let known = of::<T>();
    table
        .keys()
        .filter(|key| !known.contains(&key.as_str()))
        .cloned()
        .collect()
}

struct FieldsOf<'a>(&'a mut &'static [&'static str]);

/// Stops every deserialization; the struct's field list is all it wanted.
#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names read")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Stop
    }
}

impl<'de> Deserializer<'de> for FieldsOf<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        *self.0 = fields;
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Section {
        path: Option<String>,
        #[serde(rename = "max_bytes")]
        max: Option<u64>,
    }

    #[test]
    fn a_struct_names_its_keys_and_every_unknown_one_is_found() {
        assert_eq!(of::<Section>(), ["path", "max_bytes"]);
        let table: toml::Table = toml::from_str("path = \"x\"\nurl = 1\nkeep = 2\n").unwrap();
        assert_eq!(unknown::<Section>(&table), ["keep", "url"]);
        assert!(of::<u64>().is_empty());
    }
}
