-- saltsight records for ClickHouse 18.16 (Debian 12's package), the table
-- earlier saltsight releases shipped plus the columns added since. No
-- LowCardinality, DateTime64, TTL, codecs or views: 18.16 lacks them or has them
-- experimental. On current ClickHouse use ../schema.sql. A table made by an
-- earlier release gets the new columns from upgrade.sql. docs/clickhouse.md.
--
-- Apply over the HTTP interface, one statement per request (Debian's package has
-- no clickhouse-client):
--   scripts/clickhouse-apply http://localhost:8123/ packaging/clickhouse/legacy/schema.sql
--
-- Delivery is at least once: a batch may arrive twice (a retry after a timeout,
-- a restart mid-send). Every record has a stable `id`, so ReplacingMergeTree,
-- keyed on it, collapses the copies at merge time. Read with FINAL (or GROUP BY
-- id) for exact counts before a merge has run.

CREATE DATABASE IF NOT EXISTS saltsight;

CREATE TABLE IF NOT EXISTS saltsight.records
(
    id String,                 -- stable per facts: duplicates share it
    kind String,               -- job_published, minion_return, minion_missing, ...
    schema_version UInt32,
    master String,             -- master_id of the saltsight that saw it
    at_micros Int64,           -- event time, microseconds since the epoch (UTC)
    at DateTime MATERIALIZED toDateTime(intDiv(at_micros, 1000000)),
    jid String,
    minion String,
    fun String,                -- the job's function (state.apply, cmd.run, ...)
    run_kind String,           -- adhoc, scheduled, orchestrated, api, reactor, runner, unknown
    reason String,             -- minion_missing: why, minion_return: succeeded/failed, bus_gap: why
    sls String,
    state_id String,
    state_function String,     -- file.managed, pkg.installed, ...
    category String,           -- render, dependency.package, network.dns, ...
    fingerprint String,        -- the failure's normalised-comment hash
    count UInt32,              -- failure_group: minions, job_completed: failed, state_failure: fallout
    revision UInt32,           -- job_completed / failure_group revision (late returns amend)
    commit String,             -- the commit that last touched the failing SLS
    metadata String,           -- the job's --metadata as JSON text (e.g. a release id)
    record String,             -- the whole record as JSON (docs/records.md)
    commit_subject String,     -- that commit's subject line
    suspect_last_ok String,    -- suspect range: HEAD of the minion's last passing run
    suspect_first_failed String, -- ... and of its first failing run
    target String,             -- an external cause's host, URL or package
    trace_id String MATERIALIZED visitParamExtractString(record, 'trace_id') -- the job's trace, with Salt's tracing on
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(at)
ORDER BY (kind, master, id);
