//! Strings as Salt sends them: one ([`Text`]: str, bin holding text, or an
//! integer where a string is expected), or a list of them ([`TextList`]: a
//! job's minions, a target, presence's lists). An array of str (or bin)
//! items that are all UTF-8 is checked once
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
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use super::cursor::Cursor;

/// A string as Salt meant it: str, or bin holding text (older Salt), or an integer
/// where a string is expected (jids). Borrowed unless it had to be made.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash, PartialOrd, Ord)]
pub struct Text<'a>(pub Cow<'a, str>);

impl<'a> Text<'a> {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn borrowed(s: &'a str) -> Self {
        Text(Cow::Borrowed(s))
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, text bytes or an integer")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_borrowed_bytes<E>(self, v: &'de [u8]) -> Result<Self::Value, E> {
                Ok(text_from_bytes(v))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(String::from_utf8_lossy(v).into_owned())))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(TextVisitor)
    }
}

/// Text held in bytes: borrowed when it is UTF-8, replaced lossily when not.
pub(super) fn text_from_bytes(v: &[u8]) -> Text<'_> {
    match std::str::from_utf8(v) {
        Ok(s) => Text(Cow::Borrowed(s)),
        Err(_) => Text(Cow::Owned(String::from_utf8_lossy(v).into_owned())),
    }
}

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

impl<'a> TextList<'a> {
    /// An array of str or bin items that are UTF-8 (a big job's 200,000
    /// names): checked in one pass and kept packed, nothing allocated;
    /// `None` for anything else.
    pub(super) fn packed(raw: &'a [u8]) -> Option<Self> {
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
impl TextList<'_> {
    /// Whether it is kept packed, as Salt sent it.
    pub(super) fn is_packed(&self) -> bool {
        matches!(self.0, Items::Packed { .. })
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let packed = TextList::packed(&frame).expect("packed");
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
