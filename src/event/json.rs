//! Raw msgpack → JSON, for `tail --json` and `replay --output stdout`: the data as
//! Salt sent it, with the few things JSON cannot hold made explicit.
//!
//! - map keys that are not strings become their JSON text (`1` → `"1"`), as Python's
//!   `json.dumps` does;
//! - bin becomes a string (older Salt sent text as bin); bytes that are not UTF-8 are
//!   replaced with U+FFFD;
//! - Salt's datetime (ext 78, `%Y%m%dT%H:%M:%S.%f`) becomes an ISO 8601 string;
//!   any other ext becomes `{"ext_type": n, "data_hex": "..."}`;
//! - NaN and infinities become null.
//!
//! Nesting deeper than [`MAX_DEPTH`] is an error: the input is untrusted. What a
//! conversion builds is bounded ([`Limits`]): past a budget of values or of text
//! bytes, a value is replaced by a marker saying how many bytes it had, so a
//! frame of tens of megabytes never becomes gigabytes of JSON in memory.

use serde_json::{Map, Number, Value};

/// Deeper than any Salt return seen; a guard against hostile nesting.
pub const MAX_DEPTH: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid msgpack at byte {offset}")]
pub struct JsonError {
    pub offset: usize,
}

/// What one conversion may build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A string longer than this keeps its first bytes and ends with how long it
    /// was (`usize::MAX`: whole).
    pub max_text: usize,
    /// Values built at most; the rest become markers.
    pub max_values: usize,
    /// Text bytes built at most; the rest become markers.
    pub max_text_total: usize,
}

impl Limits {
    /// The defaults: strings whole, up to 2 million values and 64 MiB of text.
    pub const DEFAULT: Limits = Limits {
        max_text: usize::MAX,
        max_values: 2_000_000,
        max_text_total: 64 << 20,
    };
}

/// Converts exactly one msgpack value (trailing bytes are an error), within
/// [`Limits::DEFAULT`].
pub fn to_json(raw: &[u8]) -> Result<Value, JsonError> {
    to_json_within(raw, Limits::DEFAULT)
}

/// [`to_json`] within `limits`.
pub fn to_json_within(raw: &[u8], limits: Limits) -> Result<Value, JsonError> {
    let mut reader = Reader {
        buf: raw,
        pos: 0,
        limits,
        values: 0,
        text: 0,
    };
    let value = reader.value(0)?;
    if reader.pos != raw.len() {
        return Err(JsonError { offset: reader.pos });
    }
    Ok(value)
}

/// The marker a value past the budget becomes.
fn cut_marker(bytes: usize) -> Value {
    Value::String(format!(
        "[saltsight cut: a value of {bytes} bytes not shown]"
    ))
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    limits: Limits,
    /// Values built so far.
    values: usize,
    /// Text bytes built so far.
    text: usize,
}

impl<'a> Reader<'a> {
    fn err(&self) -> JsonError {
        JsonError { offset: self.pos }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], JsonError> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.err())?;
        let out = self.buf.get(self.pos..end).ok_or_else(|| self.err())?;
        self.pos = end;
        Ok(out)
    }

    fn uint(&mut self, width: usize) -> Result<u64, JsonError> {
        Ok(self
            .take(width)?
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    }

    fn len(&mut self, width: usize) -> Result<usize, JsonError> {
        let n = self.uint(width)?;
        usize::try_from(n).map_err(|_| self.err())
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.err());
        }
        self.values += 1;
        if self.values > self.limits.max_values || self.text > self.limits.max_text_total {
            // Over budget: the value is skipped whole and said to be.
            let start = self.pos;
            let end = crate::bus::msgpack::skip_value(self.buf, start, self.buf.len())
                .map_err(|_| self.err())?;
            self.pos = end;
            return Ok(cut_marker(end - start));
        }
        let marker = self.take(1)?[0];
        Ok(match marker {
            0x00..=0x7f => Value::from(marker),
            0xe0..=0xff => Value::from(marker as i8),
            0x80..=0x8f => self.map(usize::from(marker & 0x0f), depth)?,
            0x90..=0x9f => self.array(usize::from(marker & 0x0f), depth)?,
            0xa0..=0xbf => self.text(usize::from(marker & 0x1f))?,
            0xc0 => Value::Null,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4 | 0xd9 => {
                let n = self.len(1)?;
                self.text(n)?
            }
            0xc5 | 0xda => {
                let n = self.len(2)?;
                self.text(n)?
            }
            0xc6 | 0xdb => {
                let n = self.len(4)?;
                self.text(n)?
            }
            0xc7 => {
                let n = self.len(1)?;
                self.ext(n)?
            }
            0xc8 => {
                let n = self.len(2)?;
                self.ext(n)?
            }
            0xc9 => {
                let n = self.len(4)?;
                self.ext(n)?
            }
            0xca => float(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xcb => float(f64::from_bits(self.uint(8)?)),
            0xcc => Value::from(self.uint(1)?),
            0xcd => Value::from(self.uint(2)?),
            0xce => Value::from(self.uint(4)?),
            0xcf => Value::from(self.uint(8)?),
            0xd0 => Value::from(self.uint(1)? as u8 as i8),
            0xd1 => Value::from(self.uint(2)? as u16 as i16),
            0xd2 => Value::from(self.uint(4)? as u32 as i32),
            0xd3 => Value::from(self.uint(8)? as i64),
            0xd4 => self.ext(1)?,
            0xd5 => self.ext(2)?,
            0xd6 => self.ext(4)?,
            0xd7 => self.ext(8)?,
            0xd8 => self.ext(16)?,
            0xdc => {
                let n = self.len(2)?;
                self.array(n, depth)?
            }
            0xdd => {
                let n = self.len(4)?;
                self.array(n, depth)?
            }
            0xde => {
                let n = self.len(2)?;
                self.map(n, depth)?
            }
            0xdf => {
                let n = self.len(4)?;
                self.map(n, depth)?
            }
            0xc1 => {
                return Err(JsonError {
                    offset: self.pos - 1,
                });
            }
        })
    }

    fn text(&mut self, n: usize) -> Result<Value, JsonError> {
        let bytes = self.take(n)?;
        let room = self.limits.max_text_total.saturating_sub(self.text);
        let keep = n.min(self.limits.max_text).min(room);
        self.text += keep;
        if keep == n {
            return Ok(Value::String(String::from_utf8_lossy(bytes).into_owned()));
        }
        let mut end = keep;
        // A cut inside a UTF-8 sequence would become U+FFFD: cut before it.
        while end > 0 && end < n && (bytes[end] & 0xc0) == 0x80 {
            end -= 1;
        }
        let mut text = String::from_utf8_lossy(&bytes[..end]).into_owned();
        text.push_str(&format!(" [saltsight cut {n} bytes]"));
        Ok(Value::String(text))
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, JsonError> {
        // Every element takes at least one byte: cap the reservation by what is left.
        let mut out = Vec::with_capacity(n.min(self.buf.len() - self.pos));
        for _ in 0..n {
            out.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(out))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, JsonError> {
        let mut out = Map::new();
        for _ in 0..n {
            let start = self.pos;
            let key = match self.value(depth + 1)? {
                Value::String(s) => s,
                // A map or list as a key (a Python tuple) is not rendered: the
                // JSON text of keys within keys doubles with every level.
                Value::Array(_) | Value::Object(_) => {
                    format!("[saltsight: a key of {} bytes]", self.pos - start)
                }
                other => other.to_string(),
            };
            let value = self.value(depth + 1)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }

    fn ext(&mut self, n: usize) -> Result<Value, JsonError> {
        let ext_type = self.take(1)?[0] as i8;
        let data = self.take(n)?;
        if ext_type == 78 {
            if let Some(iso) = std::str::from_utf8(data)
                .ok()
                .and_then(salt_datetime_to_iso)
            {
                return Ok(Value::String(iso));
            }
        }
        let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
        Ok(serde_json::json!({"ext_type": ext_type, "data_hex": hex}))
    }
}

fn float(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// `20261121T19:32:59.034109` → `2026-11-21T19:32:59.034109` (naive, as Salt keeps it).
fn salt_datetime_to_iso(s: &str) -> Option<String> {
    let (date, time) = s.split_once('T')?;
    if date.len() != 8 || !date.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(format!(
        "{}-{}-{}T{time}",
        &date[0..4],
        &date[4..6],
        &date[6..8]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_json_shaped_data() {
        let value = json!({"a": [1, -1, -200, 70000, -70000, 1.5, null, true, false],
                           "s": "x".repeat(70000), "n": {"deep": {"er": []}}, "big": u64::MAX, "neg": i64::MIN});
        let raw = rmp_serde::to_vec_named(&value).unwrap();
        assert_eq!(to_json(&raw).unwrap(), value);
    }

    #[test]
    fn int_keys_bin_and_salt_datetime() {
        // Pairs: 1 → "x"; bin "hi" → bin 0xff (not UTF-8); "d" → Salt datetime.
        let mut fixed = vec![
            0x83, 0x01, 0xa1, b'x', 0xc4, 2, b'h', b'i', 0xc4, 1, 0xff, 0xa1, b'd', 0xc7, 24, 78,
        ];
        fixed.extend_from_slice(b"20261121T19:32:59.034109");
        let got = to_json(&fixed).unwrap();
        assert_eq!(got["1"], json!("x"));
        assert_eq!(got["hi"], json!("\u{fffd}"));
        assert_eq!(got["d"], json!("2026-11-21T19:32:59.034109"));
    }

    #[test]
    fn what_is_built_stays_within_its_limits() {
        let value = json!({"a": "x".repeat(100), "b": [1, 2, 3, 4, 5, 6], "c": "é".repeat(10)});
        let raw = rmp_serde::to_vec_named(&value).unwrap();
        let capped = to_json_within(
            &raw,
            Limits {
                max_text: 10,
                ..Limits::DEFAULT
            },
        )
        .unwrap();
        assert_eq!(capped["a"], json!("xxxxxxxxxx [saltsight cut 100 bytes]"));
        assert_eq!(capped["c"], json!("ééééé [saltsight cut 20 bytes]"));
        let few = to_json_within(
            &raw,
            Limits {
                max_values: 6,
                ..Limits::DEFAULT
            },
        )
        .unwrap();
        // The map, "a" and its value, "b", its array and its first element: 6.
        let cut = json!("[saltsight cut: a value of 1 bytes not shown]");
        assert_eq!(few["b"], json!([1, cut, cut, cut, cut, cut]));
        // A frame of 20 MB in one string, with a 1 MB text budget.
        let big = rmp_serde::to_vec_named(&json!({"return": "y".repeat(20 << 20)})).unwrap();
        let small = to_json_within(
            &big,
            Limits {
                max_text_total: 1 << 20,
                ..Limits::DEFAULT
            },
        )
        .unwrap();
        assert!(small["return"].as_str().unwrap().len() < (1 << 20) + 64);
    }

    #[test]
    fn keys_within_keys_do_not_grow_with_their_depth() {
        // {{{...: 1}: 1}: 1} forty deep: its JSON text would double each level.
        let mut raw = vec![0x81; 40];
        raw.extend_from_slice(&[0xa1, b'"']);
        raw.extend(std::iter::repeat_n(0x01, 40));
        let value = to_json(&raw).unwrap();
        assert!(value.to_string().len() < 200, "{value}");
    }

    #[test]
    fn hostile_input_is_an_error_not_a_crash() {
        assert!(to_json(&[0xdd, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(to_json(&[0xc6, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(to_json(&[0x91; 10_000]).is_err());
        assert!(to_json(&[0xc0, 0xc0]).is_err());
    }
}
