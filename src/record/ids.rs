//! Who made a record and which it is: [`RecordFactory`] fills the fields
//! every record carries, and its [`RecordId`] is a [`stable_hash`] of the
//! record's key, so the same facts have the same id in every build
//! (upstream deduplicates on it).

use std::sync::Arc;

use serde::Serialize;

use super::{Record, RecordBody, RecordKind, SCHEMA_VERSION};
use crate::time::Stamp;

/// Builds records for one master: fills the common fields and the stable id.
#[derive(Debug, Clone)]
pub struct RecordFactory {
    /// Shared by every record made (one allocation, not one a record).
    master: Arc<str>,
    /// Each kind's id hashed as far as its master and kind, which every id
    /// of the kind starts with (a fifth of an id's bytes, hashed once).
    started: [Fnv128; RecordKind::COUNT],
}

impl RecordFactory {
    pub fn new(master: impl Into<String>) -> Self {
        let master: Arc<str> = Arc::from(master.into());
        let started = RecordKind::ALL.map(|kind| {
            let mut hasher = Fnv128::new();
            hasher.write(master.as_bytes());
            hasher.write(kind.as_str().as_bytes());
            hasher
        });
        Self { master, started }
    }

    /// `key` holds what makes the record unique beyond master and kind (jid,
    /// minion, revision...).
    pub fn make(&self, at: Stamp, key: &[&str], body: RecordBody) -> Record {
        let kind = body.kind();
        let mut hasher = self.started[kind.index()];
        for part in key {
            hasher.write(part.as_bytes());
        }
        let id = hasher.finish();
        Record {
            kind,
            schema_version: SCHEMA_VERSION,
            id: RecordId::of(id),
            master: self.master.clone(),
            at,
            body,
            redacted: Vec::new(),
        }
    }
}

/// A record's id: its key's hash as 32 lowercase hex digits, held in the
/// record (not allocated: a record is made for every return).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordId([u8; 32]);

impl RecordId {
    /// `hash` in hex, made at its length: `write!` with its padding cost as
    /// much as hashing the record's key.
    pub fn of(hash: u128) -> Self {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0; 32];
        for (pair, byte) in text.chunks_exact_mut(2).zip(hash.to_be_bytes()) {
            pair[0] = DIGITS[usize::from(byte >> 4)];
            pair[1] = DIGITS[usize::from(byte & 0xf)];
        }
        RecordId(text)
    }

    pub fn as_str(&self) -> &str {
        // Hex digits are ASCII: never the empty default.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::ops::Deref for RecordId {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for RecordId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for RecordId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq<&str> for RecordId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for RecordId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A hash of `parts` that is the same in every build and on every platform (record
/// ids, failure fingerprints); ("ab","c") and ("a","bc") differ.
pub fn stable_hash<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u128 {
    let mut hasher = Fnv128::new();
    for part in parts {
        hasher.write(part);
    }
    hasher.finish()
}

/// FNV-1a, 128-bit, with a final mix: stable across builds and platforms (unlike std's hasher), and
/// wide enough that ids of a fleet's records do not collide. Each part is
/// terminated so that ("ab","c") and ("a","bc") differ.
#[derive(Debug, Clone, Copy)]
struct Fnv128(u128);

impl Fnv128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;

    fn new() -> Self {
        Fnv128(Self::OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        // A plain loop, then the terminator: a chained iterator checked its
        // state at every byte (half of an id's cost, hashed for every record).
        let mut hash = self.0;
        for &b in bytes {
            hash = (hash ^ u128::from(b)).wrapping_mul(Self::PRIME);
        }
        self.0 = (hash ^ 0xff).wrapping_mul(Self::PRIME);
    }

    /// FNV-1a's last bytes barely reach the high bits; a final mix (murmur3's
    /// fmix64 on each half, each half folded into the other) spreads them.
    fn finish(&self) -> u128 {
        fn fmix64(mut k: u64) -> u64 {
            k ^= k >> 33;
            k = k.wrapping_mul(0xff51afd7ed558ccd);
            k ^= k >> 33;
            k = k.wrapping_mul(0xc4ceb9fe1a85ec53);
            k ^ (k >> 33)
        }
        let (hi, lo) = ((self.0 >> 64) as u64, self.0 as u64);
        let lo = fmix64(lo ^ hi.rotate_left(31));
        let hi = fmix64(hi ^ lo);
        (u128::from(hi) << 64) | u128::from(lo)
    }
}
