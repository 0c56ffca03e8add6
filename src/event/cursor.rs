//! Typed reads over a complete msgpack buffer (a frame already split): map
//! headers, strings, and raw spans of values skipped with the bus's scanner.

use crate::bus::msgpack::{ScanError, be, skip_value};

/// Typed reads over a buffer that holds complete values (a frame already split).
/// Every read either consumes a value or leaves the cursor where it was and says
/// why; callers treat any error as a malformed frame.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn is_at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// The marker byte of the next value, without consuming it.
    pub fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// What follows the position, to the end.
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    /// Takes the next `len` bytes (a value whose end was found another way).
    pub fn take_bytes(&mut self, len: usize) -> Option<&'a [u8]> {
        let bytes = self.buf.get(self.pos..self.pos.checked_add(len)?)?;
        self.pos += len;
        Some(bytes)
    }

    /// Reads a map key: its text, or `None` for a key of another kind, which
    /// is passed whole (not read as the value). `Err` when it is cut short.
    #[inline]
    pub fn read_key(&mut self) -> Result<Option<&'a [u8]>, ScanError> {
        match self.read_str_or_bin() {
            Some(key) => Ok(Some(key)),
            None => self.take_raw().map(|_| None),
        }
    }

    /// Skips one value and returns its raw bytes.
    pub fn take_raw(&mut self) -> Result<&'a [u8], ScanError> {
        let end = skip_value(self.buf, self.pos, self.buf.len())?;
        let raw = &self.buf[self.pos..end];
        self.pos = end;
        Ok(raw)
    }

    /// Reads a map header and returns its number of key/value pairs.
    pub fn read_map_len(&mut self) -> Option<u32> {
        self.read_len(0x80, 0xde)
    }

    /// Reads an array header and returns its number of items.
    pub fn read_array_len(&mut self) -> Option<u32> {
        self.read_len(0x90, 0xdc)
    }

    /// A map's or an array's length: `fix` its fix form's marker (the
    /// length in its low four bits), `with_16` the 16-bit form's, followed
    /// by the 32-bit form's.
    fn read_len(&mut self, fix: u8, with_16: u8) -> Option<u32> {
        let marker = self.peek()?;
        let (head, len) = match marker {
            _ if marker & 0xf0 == fix => (1, u64::from(marker & 0x0f)),
            _ if marker == with_16 => (3, be(self.buf, self.pos + 1, 2).ok()?),
            _ if marker == with_16 + 1 => (5, be(self.buf, self.pos + 1, 4).ok()?),
            _ => return None,
        };
        self.pos += head;
        u32::try_from(len).ok()
    }

    /// Reads a str or a bin and returns its bytes (Salt wrote strings as bin, and
    /// raw bytes as str, in older releases: both are accepted).
    pub fn read_str_or_bin(&mut self) -> Option<&'a [u8]> {
        let marker = self.peek()?;
        let (head, len) = match marker {
            0xa0..=0xbf => (1, u64::from(marker & 0x1f)),
            0xd9 | 0xc4 => (2, be(self.buf, self.pos + 1, 1).ok()?),
            0xda | 0xc5 => (3, be(self.buf, self.pos + 1, 2).ok()?),
            0xdb | 0xc6 => (5, be(self.buf, self.pos + 1, 4).ok()?),
            _ => return None,
        };
        let start = self.pos + head;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        let bytes = self.buf.get(start..end)?;
        self.pos = end;
        Some(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_reads_str_and_bin_alike() {
        let mut cursor = Cursor::new(&[0xa3, b'a', b'b', b'c', 0xc4, 2, 0xff, 0xfe]);
        assert_eq!(cursor.read_str_or_bin(), Some(&b"abc"[..]));
        assert_eq!(cursor.read_str_or_bin(), Some(&[0xff, 0xfe][..]));
        assert!(cursor.is_at_end());
    }
}
