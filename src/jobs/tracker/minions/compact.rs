//! A job's minions in a checkpoint, as they are held.

use std::fmt;
use std::sync::Arc;

use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{JobMinions, pack, unpack};
use crate::jobs::verdict::MinionState;
use crate::names::NameList;
use crate::time::Stamp;

/// How a checkpoint holds a job's minions: `[names, lengths, states, asked]`,
/// the names one after another in the job's order, each name's length in bytes
/// (LEB128), one state byte each ([`pack`]), and `[position, stamp]` for the
/// minions a find_job asked about. Read back, everything is checked
/// ([`checked`]): a checkpoint that fails is set aside as damaged, never
/// trusted.
impl Serialize for JobMinions {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let (text, starts) = self.names.parts();
        let mut lengths = Vec::with_capacity(self.len() + self.len() / 8);
        for at in 0..self.len() {
            let mut len = starts[at + 1] - starts[at];
            while len >= 0x80 {
                lengths.push((len as u8 & 0x7f) | 0x80);
                len >>= 7;
            }
            lengths.push(len as u8);
        }
        let mut asked: Vec<(usize, Stamp)> = self.asked.iter().map(|(at, t)| (*at, *t)).collect();
        asked.sort_unstable();
        let mut tuple = serializer.serialize_tuple(4)?;
        tuple.serialize_element(text)?;
        tuple.serialize_element(&Bytes(&lengths))?;
        tuple.serialize_element(&Bytes(&self.states))?;
        tuple.serialize_element(&asked)?;
        tuple.end()
    }
}

/// Bytes written as MessagePack's `bin`, not as an array of numbers.
pub(super) struct Bytes<'a>(pub(super) &'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// Bytes read from a `bin` (or an array of numbers).
struct ByteBuf(Vec<u8>);

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BytesVisitor;

        impl<'de> Visitor<'de> for BytesVisitor {
            type Value = ByteBuf;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("bytes")
            }

            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<ByteBuf, E> {
                Ok(ByteBuf(bytes.to_vec()))
            }

            fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<ByteBuf, E> {
                Ok(ByteBuf(bytes))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ByteBuf, A::Error> {
                let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(byte) = seq.next_element()? {
                    bytes.push(byte);
                }
                Ok(ByteBuf(bytes))
            }
        }

        deserializer.deserialize_byte_buf(BytesVisitor)
    }
}

/// The minions of a checkpoint's compact form, checked: lengths that add up
/// to the text and cut it at characters, no name twice, one state
/// byte per name of a known form, find_job positions in range.
fn checked(
    text: String,
    lengths: &[u8],
    states: Vec<u8>,
    asked: Vec<(usize, Stamp)>,
) -> Result<JobMinions, String> {
    let mut starts = Vec::with_capacity(states.len() + 1);
    let (mut at, mut len, mut shift) = (0usize, 0usize, 0u32);
    starts.push(0);
    for &byte in lengths {
        if shift > 28 {
            return Err("a name's length does not fit".into());
        }
        len |= usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            at = at
                .checked_add(len)
                .filter(|end| *end <= text.len() && text.is_char_boundary(*end))
                .ok_or("the names' lengths do not cut their text")?;
            starts.push(at);
            (len, shift) = (0, 0);
        }
    }
    if shift != 0 || at != text.len() {
        return Err("the names' lengths do not add up to their text".into());
    }
    let names = NameList::from_parts(text, starts).map_err(|error| error.to_string())?;
    if states.len() != names.len() {
        return Err(format!("{} states for {} names", states.len(), names.len()));
    }
    if let Some(byte) = states.iter().find(|b| pack(unpack(**b, None)).0 != **b) {
        return Err(format!("a state byte of no known form ({byte:#04x})"));
    }
    if let Some((at, _)) = asked.iter().find(|(at, _)| *at >= names.len()) {
        return Err(format!(
            "a find_job time for minion {at} of {}",
            names.len()
        ));
    }
    Ok(JobMinions {
        names: Arc::new(names),
        states,
        asked: asked.into_iter().collect(),
    })
}

impl<'de> Deserialize<'de> for JobMinions {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MinionsVisitor;

        impl<'de> Visitor<'de> for MinionsVisitor {
            type Value = JobMinions;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a job's minions: [names, lengths, states, asked], or a map of names to states",
                )
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JobMinions, A::Error> {
                use serde::de::Error;
                let missing =
                    |what| A::Error::custom(format!("a job's minions without their {what}"));
                let text: String = seq.next_element()?.ok_or_else(|| missing("names"))?;
                let lengths: ByteBuf = seq.next_element()?.ok_or_else(|| missing("lengths"))?;
                let states: ByteBuf = seq.next_element()?.ok_or_else(|| missing("states"))?;
                let asked: Vec<(usize, Stamp)> = seq
                    .next_element()?
                    .ok_or_else(|| missing("find_job times"))?;
                checked(text, &lengths.0, states.0, asked).map_err(A::Error::custom)
            }

            /// Checkpoints of format 1: a map of names to states.
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JobMinions, A::Error> {
                let mut entries: Vec<(Box<str>, MinionState)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                let mut minions = JobMinions::pending(entries.iter().map(|(name, _)| &**name));
                for (name, state) in &entries {
                    if let Some(at) = minions.position(name) {
                        minions.set(at, *state);
                    }
                }
                Ok(minions)
            }
        }

        deserializer.deserialize_any(MinionsVisitor)
    }
}
