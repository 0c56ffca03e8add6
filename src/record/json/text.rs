//! What a map hands its writer as text of its own: a key (quoted, as
//! serde_json writes keys: strings, and numbers and booleans in quotes) or a
//! shared part's kept fields (written as they are).

use serde::ser::{self, Impossible, Serialize};
use serde_json::ser::{CompactFormatter, Formatter};

use super::{Compound, Error, KEPT_FIELDS, number, quoted};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Key,
    Kept,
}

pub(super) struct Text<'c, 'a> {
    pub(super) compound: &'c mut Compound<'a>,
    pub(super) role: Role,
}

impl Text<'_, '_> {
    /// A key written by `write` between quotes; kept fields are text only.
    fn quoted_key(
        self,
        write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
    ) -> Result<(), Error> {
        if self.role != Role::Key {
            return Err(not_text());
        }
        self.compound.comma();
        self.compound.out.push(b'"');
        number(write(self.compound.out))?;
        self.compound.out.push(b'"');
        Ok(())
    }
}

fn not_text() -> Error {
    Error("a map key must be a string, a number or a boolean".to_owned())
}

type Refused = Impossible<(), Error>;

impl ser::Serializer for Text<'_, '_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Refused;
    type SerializeTuple = Refused;
    type SerializeTupleStruct = Refused;
    type SerializeTupleVariant = Refused;
    type SerializeMap = Refused;
    type SerializeStruct = Refused;
    type SerializeStructVariant = Refused;

    #[inline]
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        match self.role {
            Role::Key if v == KEPT_FIELDS => self.compound.kept_next = true,
            Role::Key => {
                self.compound.comma();
                quoted(self.compound.out, v);
            }
            Role::Kept if v.is_empty() => {}
            Role::Kept => {
                self.compound.comma();
                self.compound.out.extend_from_slice(v.as_bytes());
            }
        }
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
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
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.quoted_key(|out| {
            out.extend_from_slice(if v { b"true" } else { b"false" });
            Ok(())
        })
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
        self.quoted_key(|out| CompactFormatter.write_i64(out, v))
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.quoted_key(|out| CompactFormatter.write_i128(out, v))
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
        self.quoted_key(|out| CompactFormatter.write_u64(out, v))
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.quoted_key(|out| CompactFormatter.write_u128(out, v))
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(Error("a float map key must be finite".to_owned()));
        }
        self.quoted_key(|out| CompactFormatter.write_f32(out, v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(Error("a float map key must be finite".to_owned()));
        }
        self.quoted_key(|out| CompactFormatter.write_f64(out, v))
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Error> {
        Err(not_text())
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(not_text())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), Error> {
        Err(not_text())
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(not_text())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(not_text())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(not_text())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Refused, Error> {
        Err(not_text())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Refused, Error> {
        Err(not_text())
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Refused, Error> {
        Err(not_text())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Refused, Error> {
        Err(not_text())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Refused, Error> {
        Err(not_text())
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Refused, Error> {
        Err(not_text())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Refused, Error> {
        Err(not_text())
    }
}
