//! Records as JSON lines: the bytes `serde_json::to_writer` writes (compact,
//! its escapes, its numbers), made with less work, because a record is
//! written per return and its JSON was the agent's largest cost per event.
//!
//! - A string is scanned a word at a time for what JSON escapes (`"`, `\`,
//!   control bytes) and copied in runs; serde_json looks at each byte. One
//!   with nothing to escape (most keys and values) is written inline, and one
//!   of up to sixteen bytes is checked in one or two words, with no loop.
//! - A [`Shared`](super::Shared) part writes the JSON of its fields that it
//!   kept the first time ([`fields`]), as one copy: while [`line`] or
//!   [`record`] runs, a part hands it over as a map entry named
//!   [`KEPT_FIELDS`], which this writer alone knows, and any other
//!   serialiser never sees ([`hot`] asks the part for them itself).
//! - The kinds made per return are written field by field ([`hot`]), not
//!   through the derive's map of a flattened body; [`record`] chooses.
//!
//! Numbers go through serde_json's own formatter, so they are its digits.

use std::cell::Cell;

use serde::ser::{self, Serialize};
use serde_json::ser::{CompactFormatter, Formatter};

use super::Record;

/// A map key that is not a field: its value is the JSON of fields, written
/// as it is (`"a":1,"b":2`, no braces; empty for no fields).
pub(crate) const KEPT_FIELDS: &str = "$saltsight::record::json::kept_fields";

/// Why a value could not be written as JSON: a map key that is no string,
/// or a `Serialize` implementation's own error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Error(String);

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

thread_local! {
    static WRITING: Cell<bool> = const { Cell::new(false) };
}

/// Whether [`line`] or [`record`] is writing on this thread: a shared part
/// may hand over its kept fields.
pub(crate) fn writing() -> bool {
    WRITING.with(Cell::get)
}

/// Appends `value` as JSON (no newline). On an error, `out` may hold part of it.
pub fn line<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), Error> {
    let _writing = Writing::on();
    value.serialize(&mut Writer { out })
}

/// Appends `record` as [`line`] does, the kinds made per return written
/// field by field ([`hot`]).
pub fn record(record: &Record, out: &mut Vec<u8>) -> Result<(), Error> {
    let _writing = Writing::on();
    if hot::record(record, out)? {
        return Ok(());
    }
    record.serialize(&mut Writer { out })
}

/// [`writing`] while it lives, as it was after.
struct Writing(bool);

impl Writing {
    fn on() -> Self {
        Writing(WRITING.with(|on| on.replace(true)))
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        WRITING.with(|on| on.set(self.0));
    }
}

/// `part`'s fields as JSON (`"a":1,"b":2`), to keep; `None` when it is not
/// written as an object.
pub(crate) fn fields<T: Serialize + ?Sized>(part: &T) -> Option<Box<str>> {
    let mut out = Vec::new();
    line(part, &mut out).ok()?;
    let inner = out.strip_prefix(b"{")?.strip_suffix(b"}")?;
    String::from_utf8(inner.to_vec())
        .ok()
        .map(String::into_boxed_str)
}

/// Hands `fields` (from [`fields`]) to the writer as the entries of a map:
/// flattened into a record, or an object of its own.
pub(crate) fn serialize_kept<S: ser::Serializer>(
    fields: &str,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use ser::SerializeMap;
    struct Raw<'t>(&'t str);
    impl Serialize for Raw<'_> {
        fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_str(self.0)
        }
    }
    let mut map = serializer.serialize_map(None)?;
    map.serialize_entry(KEPT_FIELDS, &Raw(fields))?;
    map.end()
}

struct Writer<'o> {
    out: &'o mut Vec<u8>,
}

/// One byte per byte value: 0 when it is written as it is, else the letter
/// after the backslash (`u` for `\u00XX`).
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// The bytes of `word` that are escaped (a control byte, `"` or `\\`), each
/// flagged by its high bit. The lowest flag is exact (bytes of 0x80 and up
/// never set one; a flag above it may be wrong), which is all that is read.
fn escaped_flags(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = word ^ (ONES * b'"' as u64);
    let backslash = word ^ (ONES * b'\\' as u64);
    let is_quote = quote.wrapping_sub(ONES) & !quote;
    let is_backslash = backslash.wrapping_sub(ONES) & !backslash;
    (below_space | is_quote | is_backslash) & HIGHS
}

/// Where the first byte at or after `from` that is escaped is: a byte at a
/// time below eight, else eight at a time, the last eight overlapping those
/// before (already found clean, so they flag nothing).
#[inline]
fn next_escaped(bytes: &[u8], from: usize) -> Option<usize> {
    let len = bytes.len();
    if len - from < 8 {
        return bytes[from..]
            .iter()
            .position(|&byte| ESCAPE[byte as usize] != 0)
            .map(|at| from + at);
    }
    let mut at = from;
    loop {
        let start = at.min(len - 8);
        let word = u64::from_le_bytes(bytes[start..start + 8].try_into().unwrap_or_default());
        let flags = escaped_flags(word);
        if flags != 0 {
            return Some(start + (flags.trailing_zeros() / 8) as usize);
        }
        if start + 8 == len {
            return None;
        }
        at = start + 8;
    }
}

/// Whether no byte of `bytes` is escaped: short texts read as one word of
/// overlapping loads (a key, a kind, a name), longer ones sixteen bytes a
/// step, the last step overlapping those before.
#[inline]
fn clean(bytes: &[u8]) -> bool {
    let len = bytes.len();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default());
    let half = |at: usize| {
        u64::from(u32::from_le_bytes(
            bytes[at..at + 4].try_into().unwrap_or_default(),
        ))
    };
    // Spaces pad a short text's word: they are never escaped.
    const SPACES: u64 = 0x2020_2020_2020_2020;
    match len {
        0 => true,
        1..=3 => {
            let first = u64::from(bytes[0]);
            let middle = u64::from(bytes[len / 2]) << 8;
            let last = u64::from(bytes[len - 1]) << 16;
            escaped_flags(first | middle | last | (SPACES << 24)) == 0
        }
        4..=7 => escaped_flags(half(0) | (half(len - 4) << 32)) == 0,
        8..=16 => escaped_flags(word(0)) | escaped_flags(word(len - 8)) == 0,
        _ => {
            let mut at = 0;
            while at + 16 <= len {
                if escaped_flags(word(at)) | escaped_flags(word(at + 8)) != 0 {
                    return false;
                }
                at += 16;
            }
            at == len || escaped_flags(word(len - 16)) | escaped_flags(word(len - 8)) == 0
        }
    }
}

/// Appends `text` quoted and escaped as serde_json does. Inlined: a record
/// writes a few dozen short texts, and most need no escape.
#[inline]
fn quoted(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    if !clean(bytes) {
        if let Some(first) = next_escaped(bytes, 0) {
            return quoted_escaping(out, bytes, first);
        }
    }
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    out.extend_from_slice(bytes);
    out.push(b'"');
}

/// [`quoted`] for a text whose first escaped byte is at `first`.
fn quoted_escaping(out: &mut Vec<u8>, bytes: &[u8], first: usize) {
    out.reserve(bytes.len() + 8);
    out.push(b'"');
    let mut run = 0;
    let mut next = Some(first);
    while let Some(at) = next {
        out.extend_from_slice(&bytes[run..at]);
        let byte = bytes[at];
        match ESCAPE[byte as usize] {
            b'u' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.extend_from_slice(&[HEX[(byte >> 4) as usize], HEX[(byte & 0xf) as usize]]);
            }
            letter => out.extend_from_slice(&[b'\\', letter]),
        }
        run = at + 1;
        next = next_escaped(bytes, run);
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// What closes a compound: `]`, `}`, or `]}` / `}}` for an enum variant's.
#[derive(Clone, Copy)]
enum Close {
    Array,
    Object,
    VariantArray,
    VariantObject,
}

struct Compound<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    close: Close,
    /// The next map value is kept fields ([`KEPT_FIELDS`]).
    kept_next: bool,
}

impl<'a> Compound<'a> {
    fn open(writer: &'a mut Writer<'_>, open: &[u8], close: Close) -> Self {
        writer.out.extend_from_slice(open);
        Compound {
            out: writer.out,
            first: true,
            close,
            kept_next: false,
        }
    }

    fn comma(&mut self) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.comma();
        value.serialize(&mut Writer { out: self.out })
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        self.comma();
        quoted(self.out, key);
        self.out.push(b':');
        value.serialize(&mut Writer { out: self.out })
    }

    fn end(self) -> Result<(), Error> {
        self.out.extend_from_slice(match self.close {
            Close::Array => b"]",
            Close::Object => b"}",
            Close::VariantArray => b"]}",
            Close::VariantObject => b"}}",
        });
        Ok(())
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Error;
    #[inline]
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        key.serialize(Text {
            compound: self,
            role: Role::Key,
        })
    }
    #[inline]
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if std::mem::take(&mut self.kept_next) {
            return value.serialize(Text {
                compound: self,
                role: Role::Kept,
            });
        }
        self.out.push(b':');
        value.serialize(&mut Writer { out: self.out })
    }
    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl<'a, 'o> ser::Serializer for &'a mut Writer<'o> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        number(CompactFormatter.write_i64(self.out, v))
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        number(CompactFormatter.write_i128(self.out, v))
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        number(CompactFormatter.write_u64(self.out, v))
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        number(CompactFormatter.write_u128(self.out, v))
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if !v.is_finite() {
            return self.serialize_unit();
        }
        number(CompactFormatter.write_f32(self.out, v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if !v.is_finite() {
            return self.serialize_unit();
        }
        number(CompactFormatter.write_f64(self.out, v))
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        quoted(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for byte in v {
            seq.serialize_element(byte)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        let mut object = Compound::open(self, b"{", Close::Object);
        object.field(variant, value)?;
        object.end()
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>, Error> {
        Ok(Compound::open(self, b"[", Close::Array))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Error> {
        open_variant(self, variant, b"[", Close::VariantArray)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>, Error> {
        Ok(Compound::open(self, b"{", Close::Object))
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'a>, Error> {
        self.serialize_map(None)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Error> {
        open_variant(self, variant, b"{", Close::VariantObject)
    }
}

/// `{"variant":` and the variant's own opening bracket.
fn open_variant<'a>(
    writer: &'a mut Writer<'_>,
    variant: &str,
    open: &[u8],
    close: Close,
) -> Result<Compound<'a>, Error> {
    writer.out.push(b'{');
    quoted(writer.out, variant);
    writer.out.push(b':');
    Ok(Compound::open(writer, open, close))
}

fn number(written: std::io::Result<()>) -> Result<(), Error> {
    // Writing into a `Vec` cannot fail.
    written.map_err(|e| Error(e.to_string()))
}

mod hot;
mod text;
use text::{Role, Text};

#[cfg(test)]
mod tests;
