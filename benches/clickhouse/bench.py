#!/usr/bin/env python3
"""The ClickHouse benchmark: N synthetic records (generate.sql) inserted through
packaging/clickhouse/schema.sql into ClickHouse 26.x in process (chdb-core, from
scripts/setup-chdb), then every fleet query (queries.sql) and every panel of the
fleet dashboard (packaging/grafana/saltsight-clickhouse.json) timed, best of
--runs; then the storage per table. Run with the chdb
venv's Python:

    ~/.cache/saltsight/chdb-26.9.0/bin/python benches/clickhouse/bench.py --rows 100000000 --db /var/tmp/ssbench

docs/clickhouse.md has the figures. --rows 1000000 takes seconds. --legacy
loads legacy/schema.sql (the table earlier releases shipped) instead and times
legacy/queries.sql, for comparison."""

import argparse
import json
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
sys.path.insert(0, os.path.join(root, "scripts"))
from clickhouse_sql import statements  # noqa: E402

from chdb import session  # noqa: E402


def panels(path):
    """(title, sql) of every panel query of the dashboard, macros filled for the
    last 30 days."""
    with open(path) as f:
        board = json.load(f)
    out = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            out.append((panel["title"], fill_macros(target["rawSql"], 30 * 86400)))
    return out


def fill_macros(sql, seconds):
    """The Grafana ClickHouse data source's macros as it expands them, for a
    range of `seconds` ending now."""
    frm = f"toDateTime(now() - {seconds})"
    return (
        sql.replace("$__timeFilter(", "__TF(")
        .replace("$__fromTime", frm)
        .replace("$__toTime", "now()")
        .replace("${master:singlequote}", "SELECT DISTINCT master FROM saltsight.jobs")
        .replace("$__interval_s", str(max(seconds // 1000, 60)))
        .replace("__TF(hour)", f"(hour >= {frm} AND hour <= now())")
        .replace("__TF(day)", f"(day >= toDate({frm}) AND day <= today())")
        .replace("__TF(at)", f"(at >= {frm} AND at <= now())")
        .replace("__TF(first_seen)", f"(first_seen >= {frm} AND first_seen <= now())")
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--db", required=True)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--chunk", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--legacy", action="store_true")
    args = ap.parse_args()
    s = session.Session(args.db)
    if not args.skip_load:
        schema = "legacy/schema.sql" if args.legacy else "schema.sql"
        for st in statements(open(os.path.join(root, "packaging/clickhouse", schema)).read()):
            s.query(st)
        template = open(os.path.join(here, "generate.sql")).read()
        if args.legacy:  # `at` is computed from at_micros there
            template = template.replace("at_micros, at, jid", "at_micros, jid").replace(
                "toUnixTimestamp64Micro(at), at, jid", "toUnixTimestamp64Micro(at), jid")
        end = int(time.time() * 1e6)
        started = time.monotonic()
        for first in range(0, args.rows, args.chunk):
            count = min(args.chunk, args.rows - first)
            sql = statements(template)[0]
            for k, v in dict(first=first, count=count, total=args.rows, days=args.days, end_micros=end).items():
                sql = sql.replace("{" + k + "}", str(v))
            s.query(sql)
            print(f"loaded {first + count:,} rows, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        if not args.legacy:
            s.query("OPTIMIZE TABLE saltsight.failure_groups FINAL")
            s.query("OPTIMIZE TABLE saltsight.jobs FINAL")
    print(f"ClickHouse {s.query('SELECT version()', 'TSV').bytes().decode().strip()} (chdb), "
          f"{os.cpu_count()} cores")
    total = int(s.query("SELECT count() FROM saltsight.records", "TSV").bytes())
    print(f"records: {total:,}")
    queries = "legacy/queries.sql" if args.legacy else "queries.sql"
    work = [(f"query {i + 1}", q) for i, q in enumerate(
        statements(open(os.path.join(root, "packaging/clickhouse", queries)).read()))]
    if not args.legacy:
        work += panels(os.path.join(root, "packaging/grafana/saltsight-clickhouse.json"))
    # Lookups of one job, one minion, one failure over the whole month (the
    # skipping indexes; the legacy table has none).
    jid, minion, fingerprint = s.query(
        "SELECT jid, minion, fingerprint FROM saltsight.records "
        "WHERE kind = 'state_failure' ORDER BY id LIMIT 1", "TSV").bytes().decode().split()
    work += [
        ("lookup: one job's records", f"SELECT kind, count() FROM saltsight.records WHERE jid = '{jid}' GROUP BY kind"),
        ("lookup: one minion's failures", "SELECT count() FROM saltsight.records "
         f"WHERE minion = '{minion}' AND kind = 'state_failure'"),
        ("lookup: one fingerprint's records", f"SELECT count() FROM saltsight.records WHERE fingerprint = '{fingerprint}'"),
    ]
    print("| query | best of %d | result rows |" % args.runs)
    print("|---|---|---|")
    worst = 0.0
    for name, sql in work:
        best, result = None, ""
        for _ in range(args.runs):
            t = time.monotonic()
            r = s.query(sql, "TSV")
            took = time.monotonic() - t
            if best is None or took < best:
                best, result = took, r.bytes().decode()
        worst = max(worst, best)
        lines = len(result.splitlines())
        print(f"| {name} | {best * 1000:.0f} ms | {lines} |", flush=True)
    print(f"slowest: {worst * 1000:.0f} ms")
    print("| table | rows | on disk | uncompressed |")
    print("|---|---|---|---|")
    for line in s.query(
        "SELECT table, sum(rows), formatReadableSize(sum(bytes_on_disk)), "
        "formatReadableSize(sum(data_uncompressed_bytes)) FROM system.parts "
        "WHERE database = 'saltsight' AND active GROUP BY table ORDER BY sum(bytes_on_disk) DESC",
        "TSV",
    ).bytes().decode().splitlines():
        t, rows, disk, raw = line.split("\t")
        print(f"| {t} | {int(rows):,} | {disk} | {raw} |")


if __name__ == "__main__":
    main()
