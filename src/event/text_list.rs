//! A list of strings as Salt sends it (a job's minions, a target, presence's
//! lists). An array of str (or bin) items that are all UTF-8 is checked once
//! and kept as Salt packed it, each item read again as the list is walked: a
//! big job's 200,000 names are never read into a vector of their own. Any
//! other shape (an item of another kind, text that is not UTF-8, a lone
//! string) goes through serde into texts. [`PackedTexts`] holds such items
//! past the event, by reference to its frame, for a big job's names not
//! taken yet.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use serde::Deserialize;
use serde::de::{Deserializer, SeqAccess, Visitor};

use super::cursor::Cursor;
use super::payload::{FastField, Text, text_from_bytes};

/// A list of strings; a lone string is taken as a list of one (Salt's `tgt` is a
/// string for globs and a list for `tgt_type: list`).
#[derive(Debug, Clone)]
pub struct TextList<'a>(Items<'a>);

#[derive(Debug, Clone)]
enum Items<'a> {
    /// An array's items, each a str or bin holding UTF-8, one after another.
    Packed {
        items: &'a [u8],
        len: usize,
    },
    Texts(Vec<Text<'a>>),
}

impl<'a> TextList<'a> {
    pub fn from_texts(texts: Vec<Text<'a>>) -> Self {
        TextList(Items::Texts(texts))
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Items::Packed { len, .. } => *len,
            Items::Texts(texts) => texts.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each text in order, borrowed from the event.
    pub fn iter(&self) -> TextIter<'_> {
        match &self.0 {
            Items::Packed { items, len } => TextIter::Packed(PackedIter {
                cursor: Cursor::new(items),
                left: *len,
            }),
            Items::Texts(texts) => TextIter::Texts(texts.iter()),
        }
    }

    /// The texts after the first `skip`, owned: packed items by reference
    /// to `frame` when they are in it (the list was read from it), else
    /// copied in one piece; texts read through serde packed one by one.
    pub fn packed_after(&self, skip: usize, frame: Option<&Bytes>) -> PackedTexts {
        match &self.0 {
            Items::Packed { items, len } => {
                let mut cursor = Cursor::new(items);
                for _ in 0..skip.min(*len) {
                    let _ = cursor.read_str_or_bin();
                }
                let rest = cursor.rest();
                let bytes = match frame {
                    Some(frame) if holds(frame, rest) => frame.slice_ref(rest),
                    _ => Bytes::copy_from_slice(rest),
                };
                PackedTexts {
                    bytes,
                    len: len.saturating_sub(skip),
                }
            }
            Items::Texts(texts) => {
                let rest = texts.get(skip..).unwrap_or_default();
                let mut bytes = Vec::with_capacity(rest.iter().map(|t| t.0.len() + 5).sum());
                for text in rest {
                    pack_str(&mut bytes, text.as_str());
                }
                PackedTexts {
                    bytes: bytes.into(),
                    len: rest.len(),
                }
            }
        }
    }
}

impl Default for TextList<'_> {
    fn default() -> Self {
        TextList(Items::Texts(Vec::new()))
    }
}

/// Lists are equal when their texts are, however each was read.
impl PartialEq for TextList<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for TextList<'_> {}

/// A list's texts in order.
#[derive(Debug, Clone)]
pub enum TextIter<'l> {
    Packed(PackedIter<'l>),
    Texts(std::slice::Iter<'l, Text<'l>>),
}

impl<'l> Iterator for TextIter<'l> {
    type Item = &'l str;

    fn next(&mut self) -> Option<&'l str> {
        match self {
            TextIter::Packed(packed) => packed.next(),
            TextIter::Texts(texts) => texts.next().map(Text::as_str),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            TextIter::Packed(packed) => packed.size_hint(),
            TextIter::Texts(texts) => texts.size_hint(),
        }
    }
}

impl ExactSizeIterator for TextIter<'_> {}

/// Packed texts read one at a time.
#[derive(Debug, Clone)]
pub struct PackedIter<'l> {
    cursor: Cursor<'l>,
    left: usize,
}

impl PackedIter<'_> {
    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.cursor.position()
    }
}

impl ExactSizeIterator for PackedIter<'_> {}

impl<'l> Iterator for PackedIter<'l> {
    type Item = &'l str;

    fn next(&mut self) -> Option<&'l str> {
        self.left = self.left.checked_sub(1)?;
        let bytes = self.cursor.read_str_or_bin()?;
        // Checked when the list was read: an item is never left out, which
        // would shift every name after it.
        Some(std::str::from_utf8(bytes).unwrap_or_default())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// Texts packed as msgpack str items one after another, owned: a big job's
/// names not taken yet, read a slice at a time.
#[derive(Debug, Default)]
pub struct PackedTexts {
    bytes: Bytes,
    len: usize,
}

impl PackedTexts {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The texts from byte `at` on (where an earlier read stopped: its
    /// [`PackedIter::position`] added up), `left` of them.
    pub fn read_from(&self, at: usize, left: usize) -> PackedIter<'_> {
        PackedIter {
            cursor: Cursor::new(self.bytes.get(at..).unwrap_or_default()),
            left,
        }
    }
}

/// Whether `part` lies within `whole`'s bytes.
fn holds(whole: &[u8], part: &[u8]) -> bool {
    let start = whole.as_ptr() as usize;
    let part_start = part.as_ptr() as usize;
    start <= part_start && part_start + part.len() <= start + whole.len()
}

/// Appends `text` as a msgpack str.
fn pack_str(out: &mut Vec<u8>, text: &str) {
    let len = text.len();
    match u8::try_from(len) {
        Ok(short) if short < 32 => out.push(0xa0 | short),
        Ok(byte) => out.extend_from_slice(&[0xd9, byte]),
        Err(_) => match u16::try_from(len) {
            Ok(two) => {
                out.push(0xda);
                out.extend_from_slice(&two.to_be_bytes());
            }
            Err(_) => {
                out.push(0xdb);
                let four = u32::try_from(len).unwrap_or(u32::MAX);
                out.extend_from_slice(&four.to_be_bytes());
            }
        },
    }
    out.extend_from_slice(text.as_bytes());
}

impl<'de: 'a, 'a> Deserialize<'de> for TextList<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ListVisitor;
        impl<'de> Visitor<'de> for ListVisitor {
            type Value = TextList<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of strings or one string")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                // The size hint is the wire's word: cap what it may reserve.
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
                while let Some(item) = seq.next_element::<Text<'de>>()? {
                    out.push(item);
                }
                Ok(TextList::from_texts(out))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(TextList::from_texts(vec![Text(Cow::Borrowed(v))]))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(TextList::from_texts(vec![Text(Cow::Owned(v.to_owned()))]))
            }
            fn visit_borrowed_bytes<E>(self, v: &'de [u8]) -> Result<Self::Value, E> {
                Ok(TextList::from_texts(vec![text_from_bytes(v)]))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Self::Value, E> {
                let text = String::from_utf8_lossy(v).into_owned();
                Ok(TextList::from_texts(vec![Text(Cow::Owned(text))]))
            }
        }
        d.deserialize_any(ListVisitor)
    }
}

impl<'a> FastField<'a> for TextList<'a> {
    /// An array of str or bin items that are UTF-8 (a big job's 200,000
    /// names): checked in one pass and kept packed, nothing allocated;
    /// anything else through serde.
    fn fast(raw: &'a [u8]) -> Option<Self> {
        let mut cursor = Cursor::new(raw);
        let len = usize::try_from(cursor.read_array_len()?).ok()?;
        let items = cursor.rest();
        for _ in 0..len {
            std::str::from_utf8(cursor.read_str_or_bin()?).ok()?;
        }
        cursor
            .is_at_end()
            .then_some(TextList(Items::Packed { items, len }))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::event::payload::typed;

    fn bin(bytes: &[u8]) -> Vec<u8> {
        let mut raw = vec![0x92, 0xa1, b'a', 0xc4, bytes.len() as u8];
        raw.extend_from_slice(bytes);
        raw
    }

    /// A list read directly is the list serde reads, whatever its items.
    #[test]
    fn a_list_is_read_alike_directly_and_through_serde() {
        let cases = [
            rmp_serde::to_vec(&json!(["web1", "", "é-minion"])).unwrap(),
            rmp_serde::to_vec(&json!([])).unwrap(),
            rmp_serde::to_vec(&json!(["web1", 7])).unwrap(),
            rmp_serde::to_vec(&json!("web1")).unwrap(),
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
        assert!(matches!(direct.0, Items::Packed { .. }), "kept packed");
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

    /// The texts after the first few, owned, read back a piece at a time
    /// from where each read stopped: the same texts, packed or not, of every
    /// length a header has a form for; those of a shared frame held by
    /// reference to it.
    #[test]
    fn texts_after_the_first_are_read_back_in_pieces() {
        let long = "x".repeat(70_000);
        let middle = "m".repeat(300);
        let names = vec![
            "a",
            "",
            "thirty-two bytes long, exactly!!",
            &middle,
            &long,
            "z",
        ];
        let frame = Bytes::from(rmp_serde::to_vec(&names).unwrap());
        let packed = TextList::fast(&frame).expect("packed");
        let texts = TextList::from_texts(names.iter().map(|n| Text::borrowed(n)).collect());
        let elsewhere = Bytes::from_static(b"another frame");
        for (list, shared, by_reference) in [
            (&packed, Some(&frame), true),
            (&packed, Some(&elsewhere), false),
            (&packed, None, false),
            (&texts, Some(&frame), false),
        ] {
            for skip in 0..=names.len() + 1 {
                let rest = list.packed_after(skip, shared);
                let in_frame = skip < names.len() && holds(&frame, &rest.bytes);
                assert_eq!(in_frame, by_reference && skip < names.len(), "skip {skip}");
                assert_eq!(rest.len(), names.len().saturating_sub(skip));
                let (mut at, mut left, mut read) = (0, rest.len(), Vec::new());
                while left > 0 {
                    let mut piece = rest.read_from(at, left);
                    read.extend(piece.by_ref().take(2));
                    at += piece.position();
                    left = piece.len();
                }
                assert_eq!(read, names.get(skip..).unwrap_or_default(), "skip {skip}");
            }
        }
    }
}
