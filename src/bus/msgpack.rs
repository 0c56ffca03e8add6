//! A msgpack scanner: where a value ends.
//!
//! The frame splitter asks "does the buffer hold a whole value yet, and where does
//! it end?" (check-then-parse; `Incomplete` is an ordinary answer); the event
//! decoder's cursor (`event::cursor`) skips the values it does not want with it. Skipping here is a walk over headers only: no allocation, no UTF-8 check,
//! no recursion (a pending-count loop), so a hostile nesting depth cannot blow the
//! stack and a hostile length cannot make us allocate.

/// Why a scan stopped without a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanError {
    /// The buffer ends inside the value; more bytes may complete it.
    Incomplete,
    /// The value would end past `limit` (its declared end is `declared_end`, or at
    /// least that, when element counts make it grow).
    TooLarge { declared_end: u64 },
    /// A byte that msgpack never uses as a marker (`0xc1`) at this offset.
    Invalid { offset: usize },
}

/// Size of a marker's header and what follows it.
enum Shape {
    /// `len` bytes of payload follow a header of `head` bytes.
    Bytes { head: usize, len: u64 },
    /// `items` further values follow a header of `head` bytes.
    Items { head: usize, items: u64 },
}

/// The big-endian unsigned integer of `width` bytes at `at`.
pub fn be(buf: &[u8], at: usize, width: usize) -> Result<u64, ScanError> {
    let bytes = buf.get(at..at + width).ok_or(ScanError::Incomplete)?;
    Ok(bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
}

/// Reads the header at `pos`: how long it is and what it announces.
fn shape(buf: &[u8], pos: usize) -> Result<Shape, ScanError> {
    let marker = *buf.get(pos).ok_or(ScanError::Incomplete)?;
    let fixed = |len| Ok(Shape::Bytes { head: 1, len });
    match marker {
        0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => fixed(0),
        0x80..=0x8f => Ok(Shape::Items {
            head: 1,
            items: u64::from(marker & 0x0f) * 2,
        }),
        0x90..=0x9f => Ok(Shape::Items {
            head: 1,
            items: u64::from(marker & 0x0f),
        }),
        0xa0..=0xbf => fixed(u64::from(marker & 0x1f)),
        0xc1 => Err(ScanError::Invalid { offset: pos }),
        0xc4 | 0xd9 => Ok(Shape::Bytes {
            head: 2,
            len: be(buf, pos + 1, 1)?,
        }),
        0xc5 | 0xda => Ok(Shape::Bytes {
            head: 3,
            len: be(buf, pos + 1, 2)?,
        }),
        0xc6 | 0xdb => Ok(Shape::Bytes {
            head: 5,
            len: be(buf, pos + 1, 4)?,
        }),
        // ext 8/16/32: length, then a type byte, then the payload.
        0xc7 => Ok(Shape::Bytes {
            head: 3,
            len: be(buf, pos + 1, 1)?,
        }),
        0xc8 => Ok(Shape::Bytes {
            head: 4,
            len: be(buf, pos + 1, 2)?,
        }),
        0xc9 => Ok(Shape::Bytes {
            head: 6,
            len: be(buf, pos + 1, 4)?,
        }),
        0xca => fixed(4),
        0xcb => fixed(8),
        0xcc | 0xd0 => fixed(1),
        0xcd | 0xd1 => fixed(2),
        0xce | 0xd2 => fixed(4),
        0xcf | 0xd3 => fixed(8),
        // fixext 1/2/4/8/16: a type byte, then the payload.
        0xd4 => Ok(Shape::Bytes { head: 2, len: 1 }),
        0xd5 => Ok(Shape::Bytes { head: 2, len: 2 }),
        0xd6 => Ok(Shape::Bytes { head: 2, len: 4 }),
        0xd7 => Ok(Shape::Bytes { head: 2, len: 8 }),
        0xd8 => Ok(Shape::Bytes { head: 2, len: 16 }),
        0xdc => Ok(Shape::Items {
            head: 3,
            items: be(buf, pos + 1, 2)?,
        }),
        0xdd => Ok(Shape::Items {
            head: 5,
            items: be(buf, pos + 1, 4)?,
        }),
        0xde => Ok(Shape::Items {
            head: 3,
            items: be(buf, pos + 1, 2)? * 2,
        }),
        0xdf => Ok(Shape::Items {
            head: 5,
            items: be(buf, pos + 1, 4)? * 2,
        }),
    }
}

/// Finds the end of the value starting at `start`, never looking past `limit`.
///
/// Returns the offset one past the value. A value that cannot fit below `limit` is
/// `TooLarge` as soon as its headers say so, before its bytes arrive: each pending
/// element needs at least one byte, and a str/bin/ext declares its length.
pub fn skip_value(buf: &[u8], start: usize, limit: usize) -> Result<usize, ScanError> {
    // Most values a walk skips are a one-byte scalar, a short string or a
    // float: ended here, as the walk would end them, without its loop.
    let single = match buf.get(start) {
        Some(0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3) => Some(1),
        Some(&marker @ 0xa0..=0xbf) => Some(1 + usize::from(marker & 0x1f)),
        Some(0xcb) => Some(9),
        _ => None,
    };
    if let Some(len) = single {
        let end = start.saturating_add(len);
        if end > limit {
            return Err(ScanError::TooLarge {
                declared_end: end as u64,
            });
        }
        return if end > buf.len() {
            Err(ScanError::Incomplete)
        } else {
            Ok(end)
        };
    }
    walk_value(buf, start, limit)
}

/// [`skip_value`] for any value: headers walked with a count of the values
/// still to come.
fn walk_value(buf: &[u8], start: usize, limit: usize) -> Result<usize, ScanError> {
    let limit = limit as u64;
    let mut pos = start;
    let mut pending: u64 = 1;
    while pending > 0 {
        pending -= 1;
        match shape(buf, pos)? {
            Shape::Bytes { head, len } => {
                let end = pos as u64 + head as u64 + len;
                if end > limit {
                    return Err(ScanError::TooLarge { declared_end: end });
                }
                // `end <= limit <= usize::MAX`, so the cast is exact.
                pos = end as usize;
            }
            Shape::Items { head, items } => {
                pos += head;
                pending += items;
                let at_least = pos as u64 + pending;
                if at_least > limit {
                    return Err(ScanError::TooLarge {
                        declared_end: at_least,
                    });
                }
            }
        }
        if pos > buf.len() {
            return Err(ScanError::Incomplete);
        }
    }
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack<T: serde::Serialize>(v: &T) -> Vec<u8> {
        rmp_serde::to_vec_named(v).expect("serialisable")
    }

    proptest::proptest! {
        /// The short way for single values ends every prefix of every value
        /// where the walk ends it, with the same error, under any limit.
        #[test]
        fn the_short_way_agrees_with_the_walk(
            value in proptest::prelude::any::<(u8, i64, f64, String, bool, Option<Vec<u8>>)>(),
            pick in 0usize..6,
            limit in 0usize..80,
        ) {
            let (small, int, float, text, flag, bytes) = value;
            let packed = match pick {
                0 => pack(&small),
                1 => pack(&int),
                2 => pack(&float),
                3 => pack(&text),
                4 => pack(&flag),
                _ => pack(&bytes),
            };
            for cut in 0..=packed.len() {
                for limit in [limit, usize::MAX] {
                    proptest::prop_assert_eq!(
                        skip_value(&packed[..cut], 0, limit),
                        walk_value(&packed[..cut], 0, limit),
                        "{:x?} cut at {}", packed, cut
                    );
                }
            }
        }
    }

    #[test]
    fn skips_nested_values_exactly() {
        let value =
            serde_json::json!({"a": [1, 2, {"b": "x".repeat(300)}], "c": null, "d": -5, "e": 1.5});
        let mut bytes = pack(&value);
        let len = bytes.len();
        bytes.extend_from_slice(&[0xc0, 0xc0]);
        assert_eq!(skip_value(&bytes, 0, usize::MAX), Ok(len));
    }

    #[test]
    fn every_strict_prefix_is_incomplete() {
        let bytes = pack(&serde_json::json!({"head": {}, "body": [1, "two", {"3": 4.0}]}));
        for cut in 0..bytes.len() {
            assert_eq!(
                skip_value(&bytes[..cut], 0, usize::MAX),
                Err(ScanError::Incomplete),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn declared_length_over_limit_is_too_large_before_bytes_arrive() {
        // bin32 announcing 1 GiB, with none of it present.
        let bytes = [0xc6, 0x40, 0x00, 0x00, 0x00];
        assert_eq!(
            skip_value(&bytes, 0, 1 << 20),
            Err(ScanError::TooLarge {
                declared_end: 5 + (1 << 30)
            })
        );
    }

    #[test]
    fn huge_element_count_is_too_large_not_a_loop() {
        // array32 claiming 4 billion elements.
        let bytes = [0xdd, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            skip_value(&bytes, 0, 1 << 20),
            Err(ScanError::TooLarge { .. })
        ));
    }

    #[test]
    fn reserved_marker_is_invalid() {
        assert_eq!(
            skip_value(&[0x91, 0xc1], 0, 100),
            Err(ScanError::Invalid { offset: 1 })
        );
    }

    #[test]
    fn ext_types_are_skipped_with_their_type_byte() {
        // Salt's datetime: ext 78 with "%Y%m%dT%H:%M:%S.%f".
        let text = b"20261121T19:32:59.034109";
        let mut bytes = vec![0xc7, text.len() as u8, 78];
        bytes.extend_from_slice(text);
        assert_eq!(skip_value(&bytes, 0, 1000), Ok(bytes.len()));
        assert_eq!(skip_value(&[0xd6, 1, 0, 0, 0, 0], 0, 100), Ok(6));
    }
}
