//! Time as saltsight keeps it: [`Stamp`], microseconds since the Unix epoch, and
//! Salt's `_stamp` (ISO 8601 in UTC, naive in 3006/3007 `2026-11-21T19:44:41.731831`,
//! with `+00:00` in 3008). A leaf: every stage and output may use it. The
//! fixed-form parse is by hand (it runs per event); the calendar arithmetic is
//! the time crate's.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An instant as microseconds since the Unix epoch (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stamp(pub i64);

impl Stamp {
    /// Parses `YYYY-MM-DDTHH:MM:SS[.ffffff][Z|±HH:MM]`; a naive stamp is UTC, as Salt
    /// writes it (`datetime.utcnow()` before 3008).
    pub fn parse(text: &str) -> Option<Stamp> {
        let b = text.as_bytes();
        if b.len() < 19
            || b[4] != b'-'
            || b[7] != b'-'
            || !matches!(b[10], b'T' | b' ')
            || b[13] != b':'
            || b[16] != b':'
        {
            return None;
        }
        // Digits read in place: `str::parse` was most of a stamp's cost
        // (one per event).
        let num = |range: std::ops::Range<usize>| -> Option<i64> {
            b.get(range)?.iter().try_fold(0i64, |n, &c| {
                c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
            })
        };
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&month)
            || !(1..=31).contains(&day)
            || hour > 23
            || minute > 59
            || second > 60
        {
            return None;
        }
        let mut rest = &text[19..];
        let mut micros = 0i64;
        if let Some(frac) = rest.strip_prefix('.') {
            let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            for (i, c) in frac[..digits].bytes().take(6).enumerate() {
                micros += i64::from(c - b'0') * 10i64.pow(5 - i as u32);
            }
            rest = &frac[digits..];
        }
        let offset_secs = match rest {
            "" | "Z" => 0,
            _ => {
                let sign = match rest.as_bytes()[0] {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                let hm = &rest[1..];
                if hm.len() != 5 || hm.as_bytes()[2] != b':' {
                    return None;
                }
                let h: i64 = hm[0..2].parse().ok()?;
                let m: i64 = hm[3..5].parse().ok()?;
                sign * (h * 3600 + m * 60)
            }
        };
        // The calendar day, checked (no 30 February) by the time crate.
        let date = time::Date::from_calendar_date(
            i32::try_from(year).ok()?,
            time::Month::try_from(u8::try_from(month).ok()?).ok()?,
            u8::try_from(day).ok()?,
        )
        .ok()?;
        let days = i64::from(date.to_julian_day()) - UNIX_EPOCH_JULIAN_DAY;
        let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
        Some(Stamp(secs * 1_000_000 + micros))
    }

    /// The wall clock's time now.
    /// The time a Salt jid was made (`%Y%m%d%H%M%S%f`, 20 digits), read as
    /// UTC: the master's own clock, so only a rough bound.
    pub fn of_jid(jid: &str) -> Option<Stamp> {
        let d = jid.as_bytes();
        if d.len() != 20 || !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let part = |r: std::ops::Range<usize>| &jid[r];
        Stamp::parse(&format!(
            "{}-{}-{}T{}:{}:{}.{}",
            part(0..4),
            part(4..6),
            part(6..8),
            part(8..10),
            part(10..12),
            part(12..14),
            part(14..20)
        ))
    }

    pub fn now() -> Stamp {
        Stamp::from_system_time(SystemTime::now())
    }

    pub fn from_system_time(t: SystemTime) -> Stamp {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Stamp(micros(d)),
            Err(e) => Stamp(-micros(e.duration())),
        }
    }

    pub fn to_system_time(self) -> SystemTime {
        if self.0 >= 0 {
            UNIX_EPOCH + Duration::from_micros(self.0 as u64)
        } else {
            UNIX_EPOCH - Duration::from_micros(self.0.unsigned_abs())
        }
    }

    /// `self` moved later by `d` (saturating).
    pub fn plus(self, d: Duration) -> Stamp {
        Stamp(self.0.saturating_add(micros(d)))
    }

    /// `self` moved earlier by `d` (saturating).
    pub fn minus(self, d: Duration) -> Stamp {
        Stamp(self.0.saturating_sub(micros(d)))
    }

    /// Microseconds from `earlier` to `self` (negative when `self` is earlier).
    pub fn micros_since(self, earlier: Stamp) -> i64 {
        self.0 - earlier.0
    }
}

/// `d` in whole microseconds, at most `i64::MAX`.
fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// RFC 3339 in UTC with microseconds, e.g. `2026-11-21T19:32:59.034109Z`.
impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = [0; STAMP_LEN];
        match self.rfc3339(&mut text) {
            Some(text) => f.write_str(text),
            None => self.write_padded(f),
        }
    }
}

/// Bytes of a stamp's text in years 0 to 9999.
const STAMP_LEN: usize = 27;

impl Stamp {
    /// (year, month, day, seconds of the day, microseconds).
    fn parts(self) -> (i32, u8, u8, i64, i64) {
        let secs = self.0.div_euclid(1_000_000);
        let micros = self.0.rem_euclid(1_000_000);
        let days = secs.div_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        (y, m, d, secs.rem_euclid(86_400), micros)
    }

    /// The text of a stamp in any year, through `write!` and its padding.
    fn write_padded(self, f: &mut impl fmt::Write) -> fmt::Result {
        let (y, m, d, of_day, micros) = self.parts();
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
            of_day / 3600,
            of_day / 60 % 60,
            of_day % 60
        )
    }

    /// The text of a stamp in years 0 to 9999, written digit by digit into
    /// `out`: every record carries one or two, and `write!` with its padding
    /// cost more than the rest of a record's encoding.
    fn rfc3339(self, out: &mut [u8; STAMP_LEN]) -> Option<&str> {
        self.rfc3339_digits(out)?;
        std::str::from_utf8(out).ok()
    }

    /// Appends the stamp's text between quotes (as JSON writes it), its
    /// bytes made ASCII here and copied as they are; `false`, with nothing
    /// appended, outside years 0 to 9999.
    pub(crate) fn append_quoted(self, out: &mut Vec<u8>) -> bool {
        let mut text = [0; STAMP_LEN];
        if self.rfc3339_digits(&mut text).is_none() {
            return false;
        }
        out.push(b'"');
        out.extend_from_slice(&text);
        out.push(b'"');
        true
    }

    /// [`Stamp::rfc3339`]'s bytes, the last stamp's recalled.
    fn rfc3339_digits(self, out: &mut [u8; STAMP_LEN]) -> Option<()> {
        thread_local! {
            /// The last stamp written and its text: an event's records
            /// carry the same time, two or three of them in a row.
            static LAST: std::cell::Cell<Option<(i64, [u8; STAMP_LEN])>> =
                const { std::cell::Cell::new(None) };
        }
        match LAST.with(std::cell::Cell::get) {
            Some((micros, text)) if micros == self.0 => *out = text,
            _ => {
                self.rfc3339_anew(out)?;
                LAST.with(|last| last.set(Some((self.0, *out))));
            }
        }
        Some(())
    }

    /// [`Stamp::rfc3339`]'s digits, made: `None` outside years 0 to 9999.
    fn rfc3339_anew(self, out: &mut [u8; STAMP_LEN]) -> Option<()> {
        let (y, m, d, of_day, micros) = self.parts();
        let year = u32::try_from(y).ok().filter(|y| *y <= 9999)?;
        let mut digits = |at: usize, width: usize, mut value: u32| {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        digits(0, 4, year);
        digits(5, 2, u32::from(m));
        digits(8, 2, u32::from(d));
        digits(11, 2, (of_day / 3600) as u32);
        digits(14, 2, (of_day / 60 % 60) as u32);
        digits(17, 2, (of_day % 60) as u32);
        digits(20, 6, micros as u32);
        for (at, c) in [
            (4, b'-'),
            (7, b'-'),
            (10, b'T'),
            (13, b':'),
            (16, b':'),
            (19, b'.'),
            (26, b'Z'),
        ] {
            out[at] = c;
        }
        Some(())
    }
}

impl serde::Serialize for Stamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut text = [0; STAMP_LEN];
        match self.rfc3339(&mut text) {
            Some(text) => s.serialize_str(text),
            None => s.collect_str(self),
        }
    }
}

/// From the RFC 3339 text it serializes as (a checkpoint reads it back).
impl<'de> serde::Deserialize<'de> for Stamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Stamp::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("not a time: {text:?}")))
    }
}

/// The Julian day number of 1970-01-01.
const UNIX_EPOCH_JULIAN_DAY: i64 = 2_440_588;

/// (year, month, day) of a day counted from the Unix epoch; days beyond the
/// time crate's range (years ±9999) show as its ends.
fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let julian = (days + UNIX_EPOCH_JULIAN_DAY).clamp(
        i64::from(time::Date::MIN.to_julian_day()),
        i64::from(time::Date::MAX.to_julian_day()),
    );
    let date = time::Date::from_julian_day(julian as i32).unwrap_or(time::Date::MIN);
    (date.year(), u8::from(date.month()), date.day())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naive_and_offset_stamps_from_real_masters() {
        // 3008.3 writes +00:00; 3006/3007 write naive UTC. Same instant, same value.
        let aware = Stamp::parse("2026-11-21T19:32:59.034109+00:00").unwrap();
        let naive = Stamp::parse("2026-11-21T19:32:59.034109").unwrap();
        assert_eq!(aware, naive);
        // 2026-11-21T19:32:59Z is 1795289579 (the capture's recv_ts is 1795289579.03552).
        assert_eq!(aware.0, 1_795_289_579_034_109);
        assert_eq!(aware.to_string(), "2026-11-21T19:32:59.034109Z");
    }

    #[test]
    fn offsets_and_short_fractions() {
        let a = Stamp::parse("2026-11-21T21:32:59.5+02:00").unwrap();
        assert_eq!(a, Stamp::parse("2026-11-21T19:32:59.500000Z").unwrap());
        assert_eq!(Stamp::parse("1970-01-01T00:00:00").unwrap(), Stamp(0));
        assert_eq!(
            Stamp::parse("1969-12-31T23:59:59").unwrap().to_string(),
            "1969-12-31T23:59:59.000000Z"
        );
    }

    #[test]
    fn rejects_what_is_not_a_stamp() {
        for bad in [
            "",
            "2026-11-21",
            "2026-13-01T00:00:00",
            "2026-11-21T19:32:59.",
            "2026-11-21T19:32:59+0000",
            "2026-02-30T00:00:00",
            "2025-02-29T00:00:00",
            "abcd-11-21T19:32:59",
            // Read as digits anyway, these would be a year and an hour.
            "20 6-11-21T19:32:59",
            "2026-11-21T0/:32:59",
        ] {
            assert_eq!(Stamp::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn display_round_trips_over_years_1_to_9999() {
        for day in (-719_000..2_900_000).step_by(997) {
            let stamp = Stamp(day * 86_400_000_000 + 12_345_678);
            assert_eq!(Stamp::parse(&stamp.to_string()), Some(stamp));
        }
    }

    #[test]
    fn the_digit_by_digit_text_is_the_formatted_one() {
        let formatted = |stamp: Stamp| {
            let mut text = String::new();
            stamp
                .write_padded(&mut text)
                .expect("a String takes any text");
            text
        };
        let year_0 = -62_167_219_200_000_000;
        for micros in (-1_000_000_000_000_000..300_000_000_000_000_000)
            .step_by(7_777_777_777_777)
            .chain([0, 86_399_999_999, 1_795_289_579_034_109, year_0, year_0 - 1])
        {
            let stamp = Stamp(micros);
            assert_eq!(stamp.to_string(), formatted(stamp), "{micros}");
            let json = serde_json::to_string(&stamp).expect("serialize");
            assert_eq!(json, format!("{:?}", formatted(stamp)));
        }
        assert_eq!(Stamp(year_0).to_string(), "0000-01-01T00:00:00.000000Z");
        assert_eq!(Stamp(year_0 - 1).to_string(), "-001-12-31T23:59:59.999999Z");
    }

    #[test]
    fn a_stamp_reads_back_what_it_writes() {
        for micros in [0, 1_763_769_600_123_456, -5_000_001] {
            let text = serde_json::to_string(&Stamp(micros)).expect("serialize");
            let back: Stamp = serde_json::from_str(&text).expect("deserialize");
            assert_eq!(back, Stamp(micros), "{text}");
        }
        assert!(serde_json::from_str::<Stamp>("\"yesterday\"").is_err());
    }
}
