//! The spool's tests: batches by count, size and age; recovery after a kill;
//! damage quarantined; the size bound; permissions; the lock.

use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;
use crate::sink::segment;

fn config(max_bytes: u64) -> SpoolConfig {
    SpoolConfig {
        dir: PathBuf::new(),
        max_bytes,
        fsync: true,
    }
}

fn batch(max_records: usize, max_bytes: usize) -> BatchConfig {
    BatchConfig {
        max_records,
        max_bytes,
        max_age: Duration::from_secs(1),
    }
}

fn open(root: &Path, max_bytes: u64) -> (Spool, Recovered) {
    Spool::open(root, "up", &config(max_bytes), Encoding::Ndjson).expect("open spool")
}

fn bodies(spool: &Spool) -> Vec<String> {
    let index = spool.index();
    index
        .sealed
        .values()
        .map(|s| {
            let bytes = fs::read(spool.path_of(s.seq)).unwrap();
            String::from_utf8(segment::decode(&bytes, Encoding::Ndjson).body).unwrap()
        })
        .collect()
}

#[test]
fn batches_seal_by_count_and_by_bytes() {
    let root = tempfile::tempdir().unwrap();
    let (spool, _) = open(root.path(), 1 << 30);
    let mut writer = SpoolWriter::new(spool.clone(), batch(2, 1 << 20));
    for line in ["a\n", "b\n", "c\n"] {
        writer.append(line.as_bytes()).unwrap();
    }
    writer.flush().unwrap();
    assert_eq!(bodies(&spool), vec!["a\nb\n"]);
    writer.seal().unwrap();
    assert_eq!(bodies(&spool), vec!["a\nb\n", "c\n"]);

    let mut by_bytes = SpoolWriter::new(spool.clone(), batch(1000, 16 + 2 * (8 + 10)));
    for line in ["0123456789", "abcdefghij", "klmnopqrst"] {
        by_bytes.append(line.as_bytes()).unwrap();
    }
    by_bytes.seal().unwrap();
    let all = bodies(&spool);
    assert_eq!(all[2..], ["0123456789abcdefghij", "klmnopqrst"]);
    assert_eq!(spool.stats().batches_sealed.load(Ordering::Relaxed), 4);
}

#[test]
fn the_oldest_unsent_batch_is_the_open_one_until_a_sealed_one_waits() {
    let root = tempfile::tempdir().unwrap();
    let (spool, _) = open(root.path(), 1 << 30);
    let mut writer = SpoolWriter::new(spool.clone(), batch(1, 1 << 20));
    assert_eq!(spool.oldest_unsent(), None);
    writer.append(b"a\n").unwrap();
    writer.flush().unwrap();
    let first = spool.oldest_unsent().expect("the open batch is unsent");
    // The second record seals the first batch and opens another: still the first.
    writer.append(b"b\n").unwrap();
    writer.flush().unwrap();
    assert_eq!(spool.oldest_unsent(), Some(first));
    let sealed = spool.index().sealed.values().next().copied().unwrap();
    spool.delivered(sealed);
    let second = spool.oldest_unsent().expect("the open batch");
    assert!(second > first);
    writer.seal().unwrap();
    let sealed = spool.index().sealed.values().next().copied().unwrap();
    spool.delivered(sealed);
    assert_eq!(spool.oldest_unsent(), None);
}

#[test]
fn a_batch_seals_at_its_age() {
    let root = tempfile::tempdir().unwrap();
    let (spool, _) = open(root.path(), 1 << 30);
    let mut writer = SpoolWriter::new(spool.clone(), batch(1000, 1 << 20));
    assert_eq!(writer.seal_at(), None);
    writer.append(b"x\n").unwrap();
    let due = writer.seal_at().expect("an open batch has an age limit");
    writer.seal_if_due(due - Duration::from_millis(1)).unwrap();
    assert_eq!(spool.pending(), 0);
    writer.seal_if_due(due).unwrap();
    assert_eq!(spool.pending(), 1);
    assert_eq!(writer.seal_at(), None);
}

#[test]
fn records_written_before_a_kill_are_recovered_and_sent_first() {
    let root = tempfile::tempdir().unwrap();
    {
        let (spool, _) = open(root.path(), 1 << 30);
        let mut writer = SpoolWriter::new(spool.clone(), batch(2, 1 << 20));
        for line in ["1\n", "2\n", "3\n"] {
            writer.append(line.as_bytes()).unwrap();
        }
        writer.flush().unwrap();
        // Dropped without sealing (SpoolWriter has no Drop): what a SIGKILL leaves.
        drop(writer);
    }
    let (spool, recovered) = open(root.path(), 1 << 30);
    assert_eq!(
        recovered,
        Recovered {
            batches: 2,
            records: 3,
            corrupt_files: 0,
            torn_bytes: 0,
            foreign_entries: 0,
        }
    );
    assert_eq!(bodies(&spool), vec!["1\n2\n", "3\n"]);
    let mut writer = SpoolWriter::new(spool.clone(), batch(2, 1 << 20));
    writer.append(b"4\n").unwrap();
    writer.seal().unwrap();
    assert_eq!(
        bodies(&spool),
        vec!["1\n2\n", "3\n", "4\n"],
        "new after old"
    );
}

#[test]
fn a_torn_tail_is_cut_and_damage_is_quarantined_with_good_records_kept() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("up");
    {
        let (spool, _) = open(root.path(), 1 << 30);
        let mut writer = SpoolWriter::new(spool.clone(), batch(3, 1 << 20));
        for line in ["good\n", "flip\n", "kept\n", "torn\n"] {
            writer.append(line.as_bytes()).unwrap();
        }
        writer.flush().unwrap();
        drop(writer);
    }
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg" || e == "open"))
        .collect();
    files.sort();
    // Flip a bit in the sealed batch's second record; tear the open batch's record.
    let mut sealed = fs::read(&files[0]).unwrap();
    let second = segment::HEADER_LEN + segment::framed_len(5) + 8;
    sealed[second] ^= 1;
    fs::write(&files[0], sealed).unwrap();
    let open_len = fs::metadata(&files[1]).unwrap().len();
    let file = OpenOptions::new().write(true).open(&files[1]).unwrap();
    file.set_len(open_len - 2).unwrap();

    let (spool, recovered) = open(root.path(), 1 << 30);
    assert_eq!(recovered.corrupt_files, 1);
    assert_eq!(recovered.records, 2);
    assert_eq!(recovered.torn_bytes, segment::framed_len(5) as u64 - 2);
    assert_eq!(bodies(&spool), vec!["good\nkept\n"]);
    assert_eq!(spool.stats().corrupt_records.load(Ordering::Relaxed), 1);
    let quarantined: Vec<_> = fs::read_dir(dir.join("quarantine")).unwrap().collect();
    assert_eq!(quarantined.len(), 1, "the damaged file is kept as found");

    fs::write(dir.join("00000000000000000001.seg"), b"not a segment").unwrap();
    drop(spool);
    let (_, recovered) = open(root.path(), 1 << 30);
    assert_eq!(recovered.corrupt_files, 1);
    assert_eq!(
        fs::read_dir(dir.join("quarantine")).unwrap().count(),
        2,
        "a foreign file is quarantined, not crashed on"
    );
}

#[test]
fn a_full_spool_drops_its_oldest_batches_and_counts_them() {
    let root = tempfile::tempdir().unwrap();
    let (spool, _) = open(root.path(), 4096);
    let mut writer = SpoolWriter::new(spool.clone(), batch(1, 1024));
    let record = [b'r'; 500];
    for _ in 0..20 {
        writer.append(&record).unwrap();
        writer.seal().unwrap();
    }
    let stats = spool.stats();
    let kept = spool.pending() as u64;
    assert!(spool.bytes() <= 4096, "{} bytes", spool.bytes());
    assert_eq!(stats.dropped_batches.load(Ordering::Relaxed), 20 - kept);
    assert_eq!(stats.dropped_records.load(Ordering::Relaxed), 20 - kept);
    assert!(kept >= 5, "kept {kept}");
    let on_disk: u64 = fs::read_dir(spool.dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .map(|p| fs::metadata(p).unwrap().len())
        .sum();
    assert_eq!(on_disk, spool.bytes());
}

#[test]
fn files_are_private_and_one_agent_holds_a_spool() {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir_all(root.path().join("up")).unwrap();
    fs::set_permissions(root.path().join("up"), fs::Permissions::from_mode(0o755)).unwrap();
    let (spool, _) = open(root.path(), 1 << 30);
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode(spool.dir()),
        0o700,
        "a too-open directory is tightened"
    );
    assert_eq!(mode(&spool.dir().join("dead-letter")), 0o700);
    let mut writer = SpoolWriter::new(spool.clone(), batch(10, 1 << 20));
    writer.append(b"x\n").unwrap();
    writer.seal().unwrap();
    let seq = spool.index().sealed.keys().next().copied().unwrap();
    assert_eq!(mode(&spool.path_of(seq)), 0o600);
    match Spool::open(root.path(), "up", &config(1 << 30), Encoding::Ndjson) {
        Err(SpoolError::Locked { .. }) => {}
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a second agent opened a held spool"),
    }
}

#[tokio::test]
async fn delivered_and_dead_lettered_batches_leave_the_spool() {
    let root = tempfile::tempdir().unwrap();
    let (spool, _) = open(root.path(), 1 << 30);
    let mut writer = SpoolWriter::new(spool.clone(), batch(1, 1 << 20));
    for line in ["a\n", "b\n"] {
        writer.append(line.as_bytes()).unwrap();
    }
    writer.seal().unwrap();
    let cancel = CancellationToken::new();
    let first = spool.next(&cancel).await.unwrap();
    assert_eq!(spool.read(first).unwrap().unwrap().body, b"a\n");
    spool.delivered(first);
    let second = spool.next(&cancel).await.unwrap();
    assert!(second.seq > first.seq);
    spool
        .dead_letter(second, &serde_json::json!({"status": 400}))
        .unwrap();
    assert_eq!(spool.pending(), 0);
    let dead: Vec<String> = fs::read_dir(spool.dir().join("dead-letter"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert!(!spool.path_of(first.seq).exists());
    let stats = spool.stats();
    assert_eq!(stats.sent_records.load(Ordering::Relaxed), 1);
    assert_eq!(stats.dead_records.load(Ordering::Relaxed), 1);
    cancel.cancel();
    assert_eq!(spool.next(&cancel).await, None);
}

#[test]
fn a_damaged_length_or_header_loses_only_what_is_damaged() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("up");
    {
        let (spool, _) = open(root.path(), 1 << 30);
        let mut writer = SpoolWriter::new(spool.clone(), batch(1000, 1 << 20));
        for i in 0..100 {
            writer.append(format!("record {i}\n").as_bytes()).unwrap();
        }
        writer.seal().unwrap();
        let mut writer = SpoolWriter::new(spool, batch(1000, 1 << 20));
        for i in 100..150 {
            writer.append(format!("record {i}\n").as_bytes()).unwrap();
        }
        writer.seal().unwrap();
    }
    let mut segs: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segs.sort();
    // The first batch: the length of its 11th record damaged.
    let mut first = fs::read(&segs[0]).unwrap();
    let eleventh = segment::HEADER_LEN + segment::framed_len(9) * 10;
    first[eleventh + 2] ^= 0x40;
    fs::write(&segs[0], first).unwrap();
    // The second: its header damaged.
    let mut second = fs::read(&segs[1]).unwrap();
    second[..4].copy_from_slice(b"XXXX");
    fs::write(&segs[1], second).unwrap();
    let (spool, recovered) = open(root.path(), 1 << 30);
    assert_eq!(
        (
            recovered.batches,
            recovered.records,
            recovered.corrupt_files
        ),
        (2, 149, 2)
    );
    let all = bodies(&spool).concat();
    assert!(!all.contains("record 10\n") && all.contains("record 11\n"));
    assert!(all.contains("record 100\n") && all.contains("record 149\n"));
    assert_eq!(fs::read_dir(dir.join("quarantine")).unwrap().count(), 2);
}

#[test]
fn something_named_like_a_batch_that_is_no_file_is_set_aside() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("up");
    fs::create_dir_all(dir.join("00000000000000000042.seg")).unwrap();
    fs::create_dir_all(dir.join("00000000000000000043.open")).unwrap();
    let (_, recovered) = open(root.path(), 1 << 30);
    assert_eq!((recovered.foreign_entries, recovered.batches), (2, 0));
    assert!(!dir.join("00000000000000000042.seg").exists());
}

#[test]
fn the_batch_being_sent_is_never_dropped_for_the_bound() {
    let root = tempfile::tempdir().unwrap();
    let (spool, _) = open(root.path(), 4096);
    let mut writer = SpoolWriter::new(spool.clone(), batch(1, 1024));
    let record = [b'r'; 500];
    writer.append(&record).unwrap();
    writer.seal().unwrap();
    let oldest = *spool.index().sealed.values().next().unwrap();
    // The sender took it; meanwhile the spool fills far past its bound.
    assert!(spool.read(oldest).unwrap().is_some());
    for _ in 0..20 {
        writer.append(&record).unwrap();
        writer.seal().unwrap();
    }
    assert!(
        spool.index().sealed.contains_key(&oldest.seq),
        "dropped while in flight"
    );
    spool.delivered(oldest);
    let stats = spool.stats();
    let (sent, dropped) = (
        stats.sent_records.load(Ordering::Relaxed),
        stats.dropped_records.load(Ordering::Relaxed),
    );
    assert_eq!(sent, 1);
    assert_eq!(
        sent + dropped + spool.pending() as u64,
        21,
        "each record counted once"
    );
}
