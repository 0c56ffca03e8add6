//! Delivery on one core: 10,000 records redacted (or not, the baseline), encoded (ndjson, or ClickHouse rows),
//! appended to the disk spool in batches of 1,000 (sealed with fsync, the
//! default, or without), then read back, gzipped and POSTed to a local HTTP
//! server that answers 200, until the spool is empty. The server runs in the
//! same process (pinned with it, its cost is counted too).
//!
//! Run: `taskset -c 0 cargo bench --bench sink`. Figures are in the README.

use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group};
use saltsight::config::redact::RedactConfig;
use saltsight::config::spool::SpoolConfig;
use saltsight::record::redact::Redactor;
use saltsight::record::{
    JobContext, MinionReturn, Record, RecordBody, RecordFactory, RunKind, StateCounts,
};
use saltsight::sink::deliver::{Delivery, Upstream};
use saltsight::sink::encode::{self, Encoding};
use saltsight::sink::http::{HttpSettings, HttpUpstream};
use saltsight::sink::retry::RetryConfig;
use saltsight::sink::spool::{BatchConfig, Spool, SpoolWriter};
use saltsight::time::Stamp;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

const RECORDS: usize = 10_000;

/// minion_return records as a 1,000-minion state run makes them (~450 bytes each).
fn records() -> Vec<Record> {
    let factory = RecordFactory::new("salt-master-eu-1");
    (0..RECORDS)
        .map(|i| {
            let jid = format!("2026112119331690{:04}", i / 1000);
            let minion = format!("web{:04}.eu-west.example.com", i % 1000);
            factory.make(
                Stamp(1_763_753_597_593_904 + i as i64),
                &[&jid, &minion],
                RecordBody::MinionReturn(MinionReturn {
                    jid: jid.as_str().into(),
                    minion: minion.as_str().into(),
                    fun: Some("state.apply".into()),
                    retcode: Some(0),
                    salt_success: Some(true),
                    succeeded: true,
                    context: JobContext {
                        run_kind: RunKind::Adhoc,
                        metadata: Some(serde_json::json!({"release": "r2026.11.3"})),
                        ..JobContext::default()
                    }
                    .into(),
                    schedule: None,
                    trimmed: None,
                    return_trace: None,
                    duration_ms: Some(1_843 + i as u64 % 500),
                    states: Some(StateCounts {
                        ok: 212,
                        changed: 3,
                        failed: 0,
                        would_change: 0,
                    }),
                }),
            )
        })
        .collect()
}

/// Answers every request 200 after reading its body.
async fn serve(listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut reader = BufReader::new(read);
            loop {
                let mut length = 0usize;
                let mut line = String::new();
                loop {
                    line.clear();
                    if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).await.is_err() {
                    return;
                }
                let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
                if write.write_all(ok).await.is_err() {
                    return;
                }
            }
        });
    }
}

fn upstream(url: &str, encoding: Encoding) -> HttpUpstream {
    HttpUpstream::new(&HttpSettings::with_defaults(url, encoding)).expect("upstream")
}

/// Redacts (or not), encodes, spools and sends every record; returns when the
/// spool is empty.
async fn deliver(
    records: Vec<Record>,
    redactor: Option<&Redactor>,
    spool: &Spool,
    url: &str,
    encoding: Encoding,
    json: &mut Vec<u8>,
    row: &mut Vec<u8>,
) {
    let mut writer = SpoolWriter::new(spool.clone(), BatchConfig::default());
    for record in records {
        // As the run handler does before the outputs; the baseline encodes the
        // record as it is (the encoders take any record; `Outputs` does not).
        let (plain, redacted) = match redactor {
            Some(r) => (None, Some(r.record(record))),
            None => (Some(record), None),
        };
        let Some(record) = redacted.as_ref().map(|r| r.get()).or(plain.as_ref()) else {
            unreachable!("one of the two is set")
        };
        json.clear();
        encode::ndjson(record, json);
        let payload = match encoding {
            Encoding::Ndjson => &json[..],
            Encoding::ClickHouse => {
                row.clear();
                encode::encode(encoding, record, json, row);
                &row[..]
            }
            Encoding::Otlp | Encoding::OtlpSpans => {
                row.clear();
                saltsight::sink::otlp::logs::spooled(record, json, row);
                &row[..]
            }
        };
        writer.append(payload).expect("append");
    }
    writer.seal().expect("seal");
    let cancel = CancellationToken::new();
    let task = Delivery::new(
        "bench",
        spool.clone(),
        upstream(url, encoding),
        RetryConfig::default(),
    )
    .start(cancel.clone());
    spool.drained(&CancellationToken::new()).await;
    cancel.cancel();
    task.await.expect("sender");
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    runtime.spawn(serve(listener));
    let records = records();
    let bytes: usize = records
        .iter()
        .map(|r| serde_json::to_vec(r).expect("json").len() + 1)
        .sum();
    eprintln!(
        "{RECORDS} records, {} bytes as ndjson ({} per record)",
        bytes,
        bytes / RECORDS
    );
    let batch: Vec<u8> = records[..1000]
        .iter()
        .flat_map(|r| {
            let mut line = Vec::new();
            encode::ndjson(r, &mut line);
            line
        })
        .collect();
    let gzipped =
        runtime.block_on(async { upstream(&url, Encoding::Ndjson).prepare(&batch).len() });
    eprintln!(
        "a batch of 1000: {} bytes, {} gzipped ({:.1}x)",
        batch.len(),
        gzipped,
        batch.len() as f64 / gzipped as f64
    );
    let mut group = c.benchmark_group("sink");
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.sample_size(20);
    let redactor = Redactor::new(&RedactConfig::default()).expect("default rules");
    for (name, encoding, fsync, redact) in [
        ("ndjson_gzip_fsync", Encoding::Ndjson, true, false),
        ("ndjson_gzip_fsync_redacted", Encoding::Ndjson, true, true),
        ("ndjson_gzip_nofsync", Encoding::Ndjson, false, false),
        ("clickhouse_gzip_fsync", Encoding::ClickHouse, true, false),
        (
            "clickhouse_gzip_fsync_redacted",
            Encoding::ClickHouse,
            true,
            true,
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = SpoolConfig {
            dir: dir.path().to_path_buf(),
            max_bytes: 1 << 30,
            fsync,
        };
        let (spool, _) = Spool::open(dir.path(), name, &config, encoding).expect("spool");
        let (mut json, mut row) = (Vec::new(), Vec::new());
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut total = std::time::Duration::ZERO;
                for _ in 0..iterations {
                    // Records are moved through the pipeline: the copies are
                    // made outside the timing.
                    let owned = records.clone();
                    let started = Instant::now();
                    runtime.block_on(deliver(
                        owned,
                        redact.then_some(&redactor),
                        &spool,
                        &url,
                        encoding,
                        &mut json,
                        &mut row,
                    ));
                    total += started.elapsed();
                }
                total
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
