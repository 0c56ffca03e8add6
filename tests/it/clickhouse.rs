//! The shipped ClickHouse files, without a Salt master: the statement splitter
//! (issue 23: a `;` in a comment), the cluster layouts generated from the
//! schemas, and on current ClickHouse (chdb-core 26.9, in process) the schema,
//! its views, the fleet queries and the dashboard's panels over the rows the
//! `clickhouse` encoding makes of real bus captures: the views answer what the
//! raw rows answer, duplicates change nothing, and the old table migrates.
//! Real servers (18.16, a cluster of two) are in `clickhouse_fleet.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use saltsight::record::{
    ChangeKind, Drift, DriftedState, NonIdempotent, Record, RecordBody, RecordFactory, SettleStatus,
};
use saltsight::sink::encode::{Encoding, encode, ndjson};
use saltsight::time::Stamp;
use serde_json::Value;

use crate::support::clickhouse::{Chdb, packaging, split, statements};
use crate::support::upstream::{Reply, Upstream};
use crate::support::{bin, fixture};

#[test]
fn statements_split_at_semicolons_outside_comments_and_strings() {
    let text = "-- a comment; with a semicolon\nCREATE TABLE t (s String) -- why; because\nENGINE = Log;\n\
        /* a block; comment */ SELECT 'a;b', \"odd;name\", `x;y`, 'it''s;', 'back\\';slash' FROM t;\n\n-- the end;\n";
    assert_eq!(
        split(text),
        [
            "CREATE TABLE t (s String) \nENGINE = Log",
            "SELECT 'a;b', \"odd;name\", `x;y`, 'it''s;', 'back\\';slash' FROM t",
        ]
    );
    assert_eq!(split("SELECT 1"), ["SELECT 1"]);
    assert!(split("-- nothing;\n/* ; */").is_empty());
}

#[test]
fn every_shipped_sql_file_splits_into_whole_statements() {
    let dir = packaging("");
    let mut files = Vec::new();
    for sub in ["", "legacy"] {
        for entry in std::fs::read_dir(dir.join(sub)).expect("packaging/clickhouse") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "sql") {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 8, "{files:?}");
    for path in files {
        // As docs/clickhouse.md promises: no `;` in a comment or a string, so a
        // plain split at `;` (a shell loop, a simple tool) finds the same ones.
        let text = std::fs::read_to_string(&path).expect("read");
        let naive: Vec<String> = text.split(';').flat_map(split).collect();
        assert_eq!(
            naive,
            split(&text),
            "{}: a `;` inside a comment or a string",
            path.display()
        );
        let found = statements(&path);
        assert!(!found.is_empty(), "{}", path.display());
        for statement in found {
            let verb = statement.split_whitespace().next().unwrap_or("");
            assert!(
                ["CREATE", "SELECT", "INSERT", "ALTER"].contains(&verb),
                "{}: a statement starts with {verb:?}:\n{statement}",
                path.display()
            );
        }
    }
}

#[test]
fn the_cluster_layouts_are_generated_from_the_schemas() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (schema, cluster) in [
        ("schema.sql", "cluster.sql"),
        ("legacy/schema.sql", "legacy/cluster.sql"),
    ] {
        let out = Command::new("python3")
            .arg(root.join("scripts/clickhouse-cluster-sql"))
            .arg(packaging(schema))
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let generated = String::from_utf8(out.stdout).expect("utf-8");
        let shipped = std::fs::read_to_string(packaging(cluster)).expect("cluster file");
        assert!(
            generated == shipped,
            "packaging/clickhouse/{cluster} is not what scripts/clickhouse-cluster-sql makes of {schema}: run it again"
        );
    }
}

const CAPTURES: [&str; 6] = [
    "3008.3_ipc_state_apply_fail",
    "3008.3_ipc_file_missing_source",
    "3008.3_ipc_pkg_missing",
    "3008.3_ipc_render_jinja_error",
    "3008.3_ipc_metadata",
    "3008.3_ipc_minion_stopped_before_publish",
];

/// The rows the `clickhouse` encoding makes of `capture` replayed as `master`,
/// as an HTTP output sends them.
fn encoded(capture: &str, master: &str) -> Vec<Value> {
    let upstream = Upstream::start(Vec::new(), Reply::status(200));
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("saltsight.toml");
    std::fs::write(
        &config,
        format!(
            "master_id = {master:?}\n[spool]\ndir = {:?}\n\n[[output]]\ntype = \"http\"\nname = \"ch\"\n\
             encoding = \"clickhouse\"\nurl = {:?}\nbatch_max_age = \"100ms\"\n",
            dir.path().join("spool").display().to_string(),
            upstream.url(),
        ),
    )
    .expect("config");
    let out = Command::new(bin())
        .args(["--endpoint", "tcp:127.0.0.1:1", "--config"])
        .arg(&config)
        .args(["replay", "--output", "config"])
        .arg(fixture(&format!("captures/{capture}.bin")))
        .output()
        .expect("replay runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = upstream.requests();
    for r in &requests {
        assert!(
            r.target
                .contains("INSERT+INTO+saltsight.records+FORMAT+JSONEachRow")
                || r.target
                    .contains("INSERT%20INTO%20saltsight.records%20FORMAT%20JSONEachRow"),
            "{}",
            r.target
        );
    }
    requests.iter().flat_map(|r| r.records()).collect()
}

/// Every capture replayed as two masters, moved in time so that the newest row
/// is a minute old (the fleet queries look at the last hour and day). Rows of
/// the second master keep only `at_micros`, as an older saltsight sends them:
/// the current schema fills `at` from it.
fn fleet_rows() -> Vec<Value> {
    let mut rows = Vec::new();
    for (i, master) in ["edge-1", "edge-2"].into_iter().enumerate() {
        for capture in CAPTURES {
            for mut row in encoded(capture, master) {
                if i == 1 {
                    row.as_object_mut().expect("a row").remove("at");
                }
                rows.push(row);
            }
        }
    }
    let newest = rows
        .iter()
        .map(|r| r["at_micros"].as_i64().expect("at_micros"))
        .max()
        .expect("rows");
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_micros(),
    )
    .expect("fits");
    let shift = now - 60_000_000 - newest;
    for row in &mut rows {
        let at = row["at_micros"].as_i64().expect("at_micros") + shift;
        row["at_micros"] = at.into();
        if row.get("at").is_some() {
            row["at"] = Stamp(at).to_string().into();
        }
    }
    rows
}

fn body(rows: &[Value]) -> Vec<u8> {
    rows.iter()
        .flat_map(|r| format!("{r}\n").into_bytes())
        .collect()
}

/// The current schema with `rows` inserted.
fn current(rows: &[Value]) -> Chdb {
    let mut ch = Chdb::start();
    ch.apply(&packaging("schema.sql"));
    ch.insert("saltsight.records", &body(rows));
    ch
}

/// The legacy table (what earlier releases made) with `rows` inserted.
fn legacy(rows: &[Value]) -> Chdb {
    let mut ch = Chdb::start();
    ch.apply(&packaging("legacy/schema.sql"));
    ch.insert("saltsight.records", &body(rows));
    ch
}

/// The answers of every statement of a queries file, each row cut to `fields`
/// (where present) and sorted. Jobs by release (the fourth) leaves out `jobs`:
/// the raw query counts distinct jids, the view (master, jid) pairs, and these
/// captures replayed as two masters share their jids.
fn answers(ch: &mut Chdb, file: &str, fields: &[&str]) -> Vec<Vec<BTreeMap<String, Value>>> {
    statements(&packaging(file))
        .iter()
        .map(|q| {
            let mut rows: Vec<BTreeMap<String, Value>> = ch
                .rows(q)
                .into_iter()
                .map(|row| {
                    fields
                        .iter()
                        .filter_map(|f| row.get(*f).map(|v| ((*f).to_owned(), v.clone())))
                        .collect()
                })
                .collect();
            if q.contains("failed_returns") {
                rows.iter_mut().for_each(|r| drop(r.remove("jobs")));
            }
            rows.sort_by_key(|r| format!("{r:?}"));
            rows
        })
        .collect()
}

const COMPARED: [&str; 16] = [
    "commit",
    "sls",
    "state_id",
    "state_function",
    "category",
    "masters",
    "minions",
    "failures",
    "minion",
    "reason",
    "missing",
    "jobs",
    "fingerprint",
    "target",
    "release",
    "failed_returns",
];

#[test]
fn the_views_answer_the_fleet_queries_as_raw_rows_do_and_duplicates_change_nothing() {
    let rows = fleet_rows();
    assert!(rows.len() > 50, "{} rows", rows.len());
    let mut ch = current(&rows);
    let mut raw = legacy(&rows);
    // The raw rows over FINAL (the legacy queries) against the views. The
    // queries from the fifth on have no legacy twin, and these captures hold
    // no config_change, rollout or external_incident: clickhouse_fleet.rs and
    // incidents_live.rs run them on the records of live runs.
    let mut want = answers(&mut raw, "legacy/queries.sql", &COMPARED);
    let got = answers(&mut ch, "queries.sql", &COMPARED);
    assert_eq!(got.len(), 10);
    assert_eq!(got[..4], want[..], "views vs raw rows");
    // What the captures hold, across both masters.
    let top = &got[0];
    assert!(
        top.iter()
            .any(|r| r["category"] == "render" && r["masters"] == 2),
        "render failures are among the top failing states: {top:?}"
    );
    assert!(
        top.iter()
            .any(|r| r["category"] == "dependency.package" && r["masters"] == 2),
        "{top:?}"
    );
    let groups = &got[2];
    assert!(groups.len() >= 3, "{groups:?}");
    assert!(groups.iter().all(|g| g["masters"] == 2), "{groups:?}");
    assert!(
        groups.iter().any(|g| g["target"] != ""),
        "a package failure names its target: {groups:?}"
    );
    assert!(got[1].iter().any(|r| r["reason"] == "not_connected"));
    assert!(!got[3].is_empty(), "a release: {:?}", got[3]);

    // Every row again, in other batches: every answer stays, before and after
    // the merges that collapse the copies.
    for half in rows.chunks(rows.len() / 2 + 1).rev() {
        ch.insert("saltsight.records", &body(half));
        raw.insert("saltsight.records", &body(half));
    }
    assert_eq!(answers(&mut ch, "queries.sql", &COMPARED), got);
    for table in [
        "records",
        "failures_hourly",
        "missing_daily",
        "failure_groups",
        "jobs",
    ] {
        ch.query(&format!("OPTIMIZE TABLE saltsight.{table} FINAL"));
    }
    assert_eq!(answers(&mut ch, "queries.sql", &COMPARED), got);
    want = answers(&mut raw, "legacy/queries.sql", &COMPARED);
    assert_eq!(got[..4], want[..], "raw rows with duplicates");
    let n = |ch: &mut Chdb, sql: &str| ch.query(sql).trim().parse::<usize>().expect("a count");
    assert_eq!(
        n(&mut ch, "SELECT count() FROM saltsight.records FINAL"),
        rows.len()
    );
    // Times kept their microseconds, whether sent as text or as at_micros only.
    let sent: BTreeMap<String, i64> = rows
        .iter()
        .map(|r| {
            (
                r["id"].as_str().expect("id").to_owned(),
                r["at_micros"].as_i64().expect("at_micros"),
            )
        })
        .collect();
    for line in ch
        .query("SELECT id, toUnixTimestamp64Micro(at) FROM saltsight.records FINAL")
        .lines()
    {
        let (id, at) = line.split_once('\t').expect("two columns");
        assert_eq!(sent[id], at.parse::<i64>().expect("micros"), "{id}");
    }
    // The new columns are filled from the record.
    let failure = ch.rows(
        "SELECT target, category FROM saltsight.records WHERE kind = 'state_failure' AND category = 'dependency.package' LIMIT 1",
    );
    assert_ne!(failure[0]["target"], "", "{failure:?}");

    // The fleet queries read the views, never the raw rows.
    for q in statements(&packaging("queries.sql")) {
        assert!(!q.contains("saltsight.records"), "{q}");
    }
}

#[test]
fn the_old_table_migrates_into_the_new_schema() {
    let rows = fleet_rows();
    let mut want = current(&rows);
    let mut ch = legacy(&rows);
    ch.query("RENAME TABLE saltsight.records TO saltsight.records_v2");
    ch.apply(&packaging("schema.sql"));
    ch.apply(&packaging("migrate.sql"));
    let count =
        |ch: &mut Chdb, table: &str| ch.query(&format!("SELECT count() FROM {table} FINAL"));
    assert_eq!(
        count(&mut ch, "saltsight.records"),
        count(&mut ch, "saltsight.records_v2")
    );
    let fields: Vec<&str> = COMPARED.to_vec();
    assert_eq!(
        answers(&mut ch, "queries.sql", &fields),
        answers(&mut want, "queries.sql", &fields)
    );
    // Columns the old table lacked come from the whole record.
    let columns = "SELECT id, commit_subject, suspect_last_ok, suspect_first_failed, target, at FROM saltsight.records FINAL ORDER BY id";
    assert_eq!(ch.query(columns), want.query(columns));
}

#[test]
fn the_cluster_layout_answers_as_one_server_does() {
    // cluster.sql on current ClickHouse, a cluster of one local shard: the
    // Distributed tables, the _local tables and their views, the same queries.
    let rows = fleet_rows();
    let mut want = current(&rows);
    let mut ch = Chdb::start_cluster();
    ch.apply(&packaging("cluster.sql"));
    ch.insert("saltsight.records", &body(&rows));
    let stored = ch.query("SELECT count() FROM saltsight.records_local FINAL");
    assert_eq!(stored.trim(), rows.len().to_string());
    let fields: Vec<&str> = COMPARED.to_vec();
    let got = answers(&mut ch, "queries.sql", &fields);
    assert_eq!(got, answers(&mut want, "queries.sql", &fields));
    assert!(!got[2].is_empty(), "{got:?}");
    ch.insert("saltsight.records", &body(&rows));
    assert_eq!(answers(&mut ch, "queries.sql", &fields), got);
}

/// Grafana's ClickHouse data source's macros, expanded as it does for the last
/// day; `$master` as "All".
fn expand(sql: &str) -> String {
    let from = "toDateTime(now() - 86400)";
    sql.replace(
        "${master:singlequote}",
        "SELECT DISTINCT master FROM saltsight.jobs",
    )
    .replace(
        "$__timeFilter(hour)",
        &format!("hour >= {from} AND hour <= now()"),
    )
    .replace(
        "$__timeFilter(day)",
        &format!("day >= toDate({from}) AND day <= today()"),
    )
    .replace(
        "$__timeFilter(at)",
        &format!("at >= {from} AND at <= now()"),
    )
    .replace(
        "$__timeFilter(first_seen)",
        &format!("first_seen >= {from} AND first_seen <= now()"),
    )
}

#[test]
fn every_dashboard_panel_runs_on_the_views() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/grafana/saltsight-clickhouse.json");
    let board: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("dashboard")).expect("JSON");
    assert_eq!(board["uid"], "saltsight-fleet");
    let vars = board["templating"]["list"].as_array().expect("variables");
    assert!(
        vars.iter()
            .any(|v| v["name"] == "datasource" && v["query"] == "grafana-clickhouse-datasource")
    );
    let panels = board["panels"].as_array().expect("panels");
    let titles: Vec<&str> = panels
        .iter()
        .map(|p| p["title"].as_str().expect("title"))
        .collect();
    for want in [
        "Failure groups across masters",
        "Release delay per commit",
        "Missing returns by reason",
        "Top external targets",
    ] {
        assert!(titles.contains(&want), "{titles:?}");
    }
    let mut ch = current(&fleet_rows());
    let mut ids = std::collections::BTreeSet::new();
    for panel in panels {
        let title = panel["title"].as_str().expect("title");
        assert!(ids.insert(panel["id"].as_u64().expect("id")), "{title}: id");
        assert_eq!(panel["datasource"]["type"], "grafana-clickhouse-datasource");
        for key in ["x", "y", "w", "h"] {
            assert!(panel["gridPos"][key].is_u64(), "{title}: gridPos.{key}");
        }
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}");
        for target in targets {
            let sql = target["rawSql"].as_str().expect("rawSql");
            assert!(!sql.contains("saltsight.records"), "{title} reads raw rows");
            let expanded = expand(sql);
            assert!(!expanded.contains('$'), "{title}: a macro left: {expanded}");
            let rows = ch.rows(&expanded);
            // No config_change in the captures: the rollout panel is empty.
            if title != "Release delay per commit" {
                assert!(!rows.is_empty(), "{title}: no rows");
            }
        }
    }
}

#[test]
fn the_benchmark_runs_every_query_and_panel_on_generated_records() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("tempdir");
    let python = crate::support::clickhouse::chdb_venv().join("bin/python");
    let out = Command::new(python)
        .arg(root.join("benches/clickhouse/bench.py"))
        .args(["--rows", "300000", "--runs", "1", "--db"])
        .arg(dir.path().join("db"))
        .output()
        .expect("bench.py runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("records: 300,000"), "{text}");
    // Every query, panel and lookup answered with rows.
    let timed: Vec<&str> = text.lines().filter(|l| l.contains(" ms |")).collect();
    assert_eq!(timed.len(), 10 + 7 + 3, "{text}");
    for line in timed {
        assert!(!line.ends_with("| 0 |"), "no rows: {line}");
    }
}

#[test]
fn an_earlier_legacy_table_upgrades_to_the_legacy_schema() {
    // The table earlier releases made: legacy/schema.sql without the columns
    // added since.
    let added = [
        "commit_subject String",
        "suspect_last_ok String",
        "suspect_first_failed String",
        "target String",
        "trace_id String",
    ];
    let schema = std::fs::read_to_string(packaging("legacy/schema.sql")).expect("schema");
    let old: String = schema
        .lines()
        .filter(|l| !added.iter().any(|c| l.trim_start().starts_with(c)))
        .map(|l| {
            // The column before the added ones loses its trailing comma.
            if l.trim_start().starts_with("record String,") {
                l.replacen("record String,", "record String ", 1)
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut upgraded = upgrades(
        &old,
        &["legacy/upgrade.sql", "legacy/upgrade-trace.sql"],
        "legacy/schema.sql",
    );
    // And the rows of today's saltsight fill the new columns there.
    let rows = fleet_rows();
    upgraded.insert("saltsight.records", &body(&rows));
    let targets = upgraded.query(
        "SELECT count() FROM saltsight.records WHERE target != '' AND kind = 'failure_group'",
    );
    assert_ne!(targets.trim(), "0");
}

/// A server with the table `old_schema` makes, after `upgrades` were applied
/// to it: its columns are checked to be those `schema` makes (and to differ
/// before).
fn upgrades(old_schema: &str, upgrades: &[&str], schema: &str) -> Chdb {
    let describe = "SELECT name, type, default_kind, default_expression FROM system.columns \
                    WHERE database = 'saltsight' AND table = 'records' ORDER BY name";
    let mut upgraded = Chdb::start();
    for statement in split(old_schema) {
        upgraded.query(&statement);
    }
    let mut fresh = Chdb::start();
    fresh.apply(&packaging(schema));
    let before = upgraded.query(describe);
    assert_ne!(before, fresh.query(describe), "the old table lacks columns");
    for file in upgrades {
        upgraded.apply(&packaging(file));
    }
    assert_eq!(upgraded.query(describe), fresh.query(describe));
    upgraded
}

/// A table made by an earlier schema.sql takes upgrade.sql (twice: it is
/// idempotent) and then has exactly the columns of a new one; the trace id a
/// record carries fills its column, on the current and the legacy schema.
#[test]
fn the_current_table_upgrades_and_fills_the_trace_id_from_the_record() {
    let schema = std::fs::read_to_string(packaging("schema.sql")).expect("schema");
    let old: String = schema
        .lines()
        .filter(|l| !l.trim_start().starts_with("trace_id String"))
        .collect::<Vec<_>>()
        .join("\n");
    let upgraded = upgrades(&old, &["upgrade.sql", "upgrade.sql"], "schema.sql");

    let mut rows = fleet_rows();
    rows.truncate(3);
    let mut traced = rows[0].clone();
    let mut record: Value =
        serde_json::from_str(traced["record"].as_str().expect("record")).expect("JSON");
    record["trace_id"] = "0af7651916cd43dd8448eb211c80319c".into();
    traced["record"] = record.to_string().into();
    traced["id"] = "traced".into();
    rows.push(traced);
    let mut old_server = Chdb::start();
    old_server.apply(&packaging("legacy/schema.sql"));
    for (mut ch, table) in [(upgraded, "current"), (old_server, "legacy")] {
        ch.insert("saltsight.records", &body(&rows));
        let traced =
            ch.query("SELECT id, trace_id FROM saltsight.records WHERE trace_id != '' FORMAT TSV");
        assert_eq!(
            traced.trim(),
            "traced\t0af7651916cd43dd8448eb211c80319c",
            "{table}"
        );
    }
}

/// A `drift` record of `master` (its states `sls:id`), as the encoding makes it.
fn drift_row(master: &str, jid: &str, minion: &str, change: ChangeKind, states: &[&str]) -> Value {
    let body = Drift {
        jid: jid.into(),
        minion: minion.into(),
        fun: "state.highstate".into(),
        change,
        repo: "states".into(),
        commit: "c1".repeat(20),
        states: states
            .iter()
            .map(|s| {
                let (sls, id) = s.split_once(':').expect("sls:id");
                DriftedState {
                    sls: sls.into(),
                    state_id: id.into(),
                    function: "file.managed".into(),
                    name: format!("/etc/{id}"),
                    change,
                    summary: "-by hand\n+managed".into(),
                }
            })
            .collect(),
        states_not_listed: 0,
        changed_not_read: 0,
        intentional: 1,
        unsettled: 0,
        never_settles: 0,
        trimmed: None,
        context: Default::default(),
    };
    row_of(master, &[jid, minion], RecordBody::Drift(body))
}

fn judgement_row(
    master: &str,
    state: &str,
    status: SettleStatus,
    minions: u32,
    at: Stamp,
) -> Value {
    let (sls, id) = state.split_once(':').expect("sls:id");
    let body = NonIdempotent {
        sls: sls.into(),
        state_id: id.into(),
        function: "cmd.run".into(),
        name: "date".into(),
        status,
        hint: "a command with no unless".into(),
        jid: "j".into(),
        minion: "web1".into(),
        changed_runs: 3,
        minions,
        repo: "states".into(),
        commit: "c1".repeat(20),
        since: at,
    };
    let factory = RecordFactory::new(master.to_owned());
    let record = factory.make(
        at,
        &[state, status.as_str()],
        RecordBody::NonIdempotent(Box::new(body)),
    );
    encode_row(&record)
}

fn row_of(master: &str, key: &[&str], body: RecordBody) -> Value {
    let now = Stamp::now();
    let record = RecordFactory::new(master.to_owned()).make(now, key, body);
    encode_row(&record)
}

fn encode_row(record: &Record) -> Value {
    let mut json = Vec::new();
    ndjson(record, &mut json);
    let mut row = Vec::new();
    encode(Encoding::ClickHouse, record, &json, &mut row);
    serde_json::from_slice(&row).expect("a row")
}

#[test]
fn the_drift_views_answer_the_two_drift_queries_and_duplicates_change_nothing() {
    let now = Stamp::now();
    let earlier = Stamp(now.0 - 3_600_000_000);
    let rows = vec![
        drift_row(
            "edge-1",
            "j1",
            "web1",
            ChangeKind::Corrected,
            &["web:motd", "layout:cache"],
        ),
        drift_row("edge-1", "j2", "web1", ChangeKind::Detected, &["web:motd"]),
        drift_row("edge-1", "j1", "db1", ChangeKind::Corrected, &["web:motd"]),
        judgement_row("edge-1", "layout:stamp", SettleStatus::NeverSettles, 3, now),
        judgement_row("edge-2", "layout:stamp", SettleStatus::NeverSettles, 2, now),
        judgement_row(
            "edge-2",
            "pkgs:tools",
            SettleStatus::NeverSettles,
            1,
            earlier,
        ),
        judgement_row("edge-2", "pkgs:tools", SettleStatus::Settled, 1, now),
    ];
    let mut ch = current(&rows);
    let queries = statements(&packaging("queries.sql"));
    let (most, never) = (&queries[queries.len() - 2], &queries[queries.len() - 1]);
    let answer = |ch: &mut Chdb| {
        let most: Vec<(String, String, u64, u64)> = ch
            .rows(most)
            .iter()
            .map(|r| {
                let n = |k: &str| {
                    r[k].as_u64()
                        .or_else(|| r[k].as_str().and_then(|s| s.parse().ok()))
                        .unwrap_or(0)
                };
                (
                    r["master"].as_str().unwrap_or("").to_owned(),
                    r["minion"].as_str().unwrap_or("").to_owned(),
                    n("corrected"),
                    n("detected"),
                )
            })
            .collect();
        let never: Vec<(String, Value, Value)> = ch
            .rows(never)
            .iter()
            .map(|r| {
                (
                    format!(
                        "{}:{}",
                        r["sls"].as_str().unwrap_or(""),
                        r["state_id"].as_str().unwrap_or("")
                    ),
                    r["masters"].clone(),
                    r["minions"].clone(),
                )
            })
            .collect();
        (most, never)
    };
    let got = answer(&mut ch);
    assert_eq!(
        got.0,
        vec![
            ("edge-1".into(), "web1".into(), 2, 1),
            ("edge-1".into(), "db1".into(), 1, 0)
        ],
        "the minions that drift most"
    );
    assert_eq!(got.1.len(), 1, "a settled state is not listed: {:?}", got.1);
    let (state, masters, minions) = &got.1[0];
    assert_eq!(
        (state.as_str(), number(masters), number(minions)),
        ("layout:stamp", 2, 5)
    );
    // Every row again: the same answers, before and after the merges.
    ch.insert("saltsight.records", &body(&rows));
    assert_eq!(answer(&mut ch), got);
    for table in ["drift_daily", "non_idempotent"] {
        ch.query(&format!("OPTIMIZE TABLE saltsight.{table} FINAL"));
    }
    assert_eq!(answer(&mut ch), got);
}

/// A count as chdb's JSON gives it (a UInt64 is quoted).
fn number(v: &Value) -> u64 {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or(0)
}
