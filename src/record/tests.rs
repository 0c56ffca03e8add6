//! Records: ids, the JSON shape, and the size a record is moved at.

use super::*;

fn gap() -> RecordBody {
    RecordBody::BusGap(BusGapRecord {
        reason: "disconnected",
        started_at: Stamp(0),
        ended_at: Stamp(1),
        duration_ms: 0,
        dropped_frames: 0,
    })
}

#[test]
fn ids_are_stable_and_depend_on_master_kind_and_key() {
    let a = RecordFactory::new("m1");
    let id = |f: &RecordFactory, key: &[&str]| f.make(Stamp(5), key, gap()).id;
    assert_eq!(id(&a, &["1", "web1"]), id(&a, &["1", "web1"]));
    assert_ne!(id(&a, &["1", "web1"]), id(&a, &["1", "web2"]));
    assert_ne!(id(&a, &["ab", "c"]), id(&a, &["a", "bc"]));
    assert_ne!(id(&a, &["1"]), id(&RecordFactory::new("m2"), &["1"]));
    // Pinned: the id must not change between builds (upstream deduplicates on it).
    assert_eq!(id(&a, &["x"]), "6aa20b78a9eb96ef49ee9db2ffa32fdd");
    // Neighbouring keys differ everywhere, not in a few digits.
    let (r0, r1) = (id(&a, &["1", "0"]), id(&a, &["1", "1"]));
    let same = r0.chars().zip(r1.chars()).filter(|(x, y)| x == y).count();
    assert!(same < 10, "{r0} vs {r1}");
}

#[test]
fn an_id_is_its_hash_in_32_hex_digits_leading_zeros_kept() {
    for id in [
        0,
        1,
        0xab << 120,
        u128::MAX,
        0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
    ] {
        assert_eq!(RecordId::of(id).as_str(), format!("{id:032x}"));
    }
}

#[test]
fn serialises_flat_with_kind_and_schema_version() {
    let record = RecordFactory::new("m1").make(Stamp(0), &[], gap());
    let json = serde_json::to_value(&record).unwrap();
    assert_eq!(json["kind"], "bus_gap");
    assert_eq!(json["schema_version"], 2);
    assert_eq!(json["reason"], "disconnected");
    assert_eq!(json["at"], "1970-01-01T00:00:00.000000Z");
}

/// Records are moved by value through the stages, redaction and outputs: a
/// kind that holds much is boxed, so a record is about the size of the common
/// kinds (a `minion_return`, a `minion_missing`), not of the largest.
#[test]
fn a_record_is_the_size_of_the_common_kinds() {
    use std::mem::size_of;
    let common = size_of::<MinionReturn>().max(size_of::<MinionMissing>());
    assert!(
        size_of::<RecordBody>() <= common + 8,
        "RecordBody is {} bytes, the common kinds {common}: box the large kind",
        size_of::<RecordBody>()
    );
}
