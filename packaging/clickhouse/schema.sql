-- saltsight records in ClickHouse (the `clickhouse` encoding of an [[output]] of
-- type "http"), one server. For current ClickHouse, tested on 26.9. It needs
-- DateTime64, LowCardinality, TTL, codecs and data-skipping
-- indexes (all there since 22.8 LTS). Debian 12's ClickHouse 18.16 has none of
-- these: use legacy/schema.sql there. A cluster: cluster.sql. From the table
-- earlier saltsight releases shipped: migrate.sql. docs/clickhouse.md says why.
--
-- Apply over the HTTP interface, one statement per request (the file has
-- several, and Debian's package has no clickhouse-client):
--   scripts/clickhouse-apply http://localhost:8123/ packaging/clickhouse/schema.sql
--
-- Statements end with a semicolon at the end of a line. No semicolon inside a comment or a
-- string: the tests' splitter copes with them, simple tools may not.
--
-- Delivery is at least once: a batch may arrive twice (a retry after a timeout,
-- a restart mid-send). Every record has a stable `id`, and a record's time is
-- one of its facts, so copies share the whole sorting key: ReplacingMergeTree
-- collapses them at merge time. Every view below is as duplicate-proof: it
-- keeps sets of ids (uniqExact) or one row per key (ReplacingMergeTree), never
-- a sum of rows.
--
-- Retention: 90 days (every TTL below). Change it with, for each table,
--   ALTER TABLE saltsight.records MODIFY TTL toDateTime(at) + INTERVAL 30 DAY
-- Partitions are days, so expired data goes by dropping whole parts.

CREATE DATABASE IF NOT EXISTS saltsight;

-- Every record, as sent. Sorted by kind, master and time: a query for one kind
-- over a time range reads only that range of each master, and a day's partition
-- is skipped whole outside it.
CREATE TABLE IF NOT EXISTS saltsight.records
(
    id String CODEC(ZSTD(1)),                      -- stable per facts: duplicates share it
    kind LowCardinality(String),                   -- job_published, minion_return, ...
    schema_version UInt32 CODEC(T64, ZSTD(1)),
    master LowCardinality(String),                 -- master_id of the saltsight that saw it
    -- Sent by every saltsight. Fills `at` for rows without it (releases before
    -- `at` was sent). Not EPHEMERAL: 26.9 does not fill a DEFAULT from an
    -- EPHEMERAL column in JSONEachRow. Sorted by time, it costs about a byte a row.
    at_micros Int64 CODEC(Delta, ZSTD(1)),
    at DateTime64(6, 'UTC') DEFAULT fromUnixTimestamp64Micro(at_micros, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
    jid String CODEC(ZSTD(1)),
    minion LowCardinality(String),
    fun LowCardinality(String),                    -- the job's function (state.apply, cmd.run, ...)
    run_kind LowCardinality(String),               -- adhoc, scheduled, orchestrated, api, reactor, runner, unknown
    reason LowCardinality(String),                 -- minion_missing: why, minion_return: succeeded/failed, bus_gap: why, config_change: the repo
    sls LowCardinality(String),
    state_id LowCardinality(String),
    state_function LowCardinality(String),         -- file.managed, pkg.installed, ...
    category LowCardinality(String),               -- render, dependency.package, network.dns, ...
    fingerprint LowCardinality(String),            -- the failure's normalised-comment hash
    count UInt32 CODEC(T64, ZSTD(1)),              -- failure_group: minions, job_completed: failed, state_failure: fallout
    revision UInt32 CODEC(T64, ZSTD(1)),           -- job_completed / failure_group revision (late returns amend)
    commit LowCardinality(String),                 -- the commit that last touched the failing SLS (config_change: the new HEAD)
    commit_subject LowCardinality(String),         -- its subject line
    suspect_last_ok LowCardinality(String),        -- suspect range: HEAD of the minion's last passing run
    suspect_first_failed LowCardinality(String),   -- ... and of its first failing run
    target LowCardinality(String),                 -- an external cause's host, URL or package
    metadata String CODEC(ZSTD(1)),                -- the job's --metadata as JSON text
    release LowCardinality(String) MATERIALIZED JSONExtractString(metadata, 'release'),
    record String CODEC(ZSTD(3)),                  -- the whole record as JSON (docs/records.md)
    trace_id String MATERIALIZED JSONExtractString(record, 'trace_id') CODEC(ZSTD(1)), -- the job's trace, with Salt's tracing on (docs/opentelemetry.md)
    INDEX jid_idx jid TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX minion_idx minion TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX fingerprint_idx fingerprint TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(at)
ORDER BY (kind, master, at, id)
TTL toDateTime(at) + INTERVAL 90 DAY
SETTINGS ttl_only_drop_parts = 1;

-- The views. Each is a table filled by a materialised view on every insert into
-- `records`. queries.sql and the dashboard read these, not raw rows.

-- State and render failures per hour by master, SLS, state, commit, category and
-- external target.
CREATE TABLE IF NOT EXISTS saltsight.failures_hourly
(
    hour DateTime('UTC'),
    master LowCardinality(String),
    kind LowCardinality(String),                   -- state_failure or render_failure
    category LowCardinality(String),
    sls LowCardinality(String),
    state_id LowCardinality(String),
    state_function LowCardinality(String),
    commit LowCardinality(String),
    commit_subject LowCardinality(String),
    target LowCardinality(String),
    failures AggregateFunction(uniqExact, String), -- record ids
    minions AggregateFunction(uniqExact, String),
    jobs AggregateFunction(uniqExact, String),
    first_seen SimpleAggregateFunction(min, DateTime64(6, 'UTC')),
    last_seen SimpleAggregateFunction(max, DateTime64(6, 'UTC'))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, master, category, sls, state_id, state_function, commit, commit_subject, target, kind)
TTL hour + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS saltsight.failures_hourly_mv TO saltsight.failures_hourly AS
SELECT
    toStartOfHour(toDateTime(at, 'UTC')) AS hour,
    master, kind, category, sls, state_id, state_function, commit, commit_subject, target,
    uniqExactState(id) AS failures,
    uniqExactState(toString(minion)) AS minions,
    uniqExactState(jid) AS jobs,
    min(at) AS first_seen,
    max(at) AS last_seen
FROM saltsight.records
WHERE kind IN ('state_failure', 'render_failure')
GROUP BY hour, master, kind, category, sls, state_id, state_function, commit, commit_subject, target;

-- Missing returns per day by master, minion and reason.
CREATE TABLE IF NOT EXISTS saltsight.missing_daily
(
    day Date,
    master LowCardinality(String),
    minion LowCardinality(String),
    reason LowCardinality(String),
    missing AggregateFunction(uniqExact, String),  -- record ids
    jobs AggregateFunction(uniqExact, String),
    functions AggregateFunction(groupUniqArray, String),
    last_missing SimpleAggregateFunction(max, DateTime64(6, 'UTC'))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (day, master, reason, minion)
TTL day + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS saltsight.missing_daily_mv TO saltsight.missing_daily AS
SELECT
    toDate(at, 'UTC') AS day,
    master, minion, reason,
    uniqExactState(id) AS missing,
    uniqExactState(jid) AS jobs,
    groupUniqArrayState(toString(fun)) AS functions,
    max(at) AS last_missing
FROM saltsight.records
WHERE kind = 'minion_missing'
GROUP BY day, master, minion, reason;

-- Failure groups: one row per (master, job, fingerprint), the latest revision
-- (a late return amends a group). Small: a group stands for all the minions of
-- one job with one failure. Read with FINAL.
CREATE TABLE IF NOT EXISTS saltsight.failure_groups
(
    master LowCardinality(String),
    jid String,
    fingerprint LowCardinality(String),
    at DateTime64(6, 'UTC'),
    sls LowCardinality(String),
    state_id LowCardinality(String),
    state_function LowCardinality(String),
    category LowCardinality(String),
    target LowCardinality(String),
    commit LowCardinality(String),
    commit_subject LowCardinality(String),
    suspect_last_ok LowCardinality(String),
    suspect_first_failed LowCardinality(String),
    run_kind LowCardinality(String),
    release LowCardinality(String),
    count UInt32,                                  -- minions with the failure
    revision UInt32,
    INDEX at_idx at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree(revision)
ORDER BY (master, jid, fingerprint)
TTL toDateTime(at) + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS saltsight.failure_groups_mv TO saltsight.failure_groups AS
SELECT
    master, jid, fingerprint, at, sls, state_id, state_function, category, target,
    commit, commit_subject, suspect_last_ok, suspect_first_failed, run_kind, release,
    count, revision
FROM saltsight.records
WHERE kind = 'failure_group';

-- Jobs: one row per (master, job), its latest job_completed revision, with the
-- counts that record carries. Read with FINAL.
CREATE TABLE IF NOT EXISTS saltsight.jobs
(
    master LowCardinality(String),
    jid String,
    at DateTime64(6, 'UTC'),                       -- when the verdict was given
    published_at DateTime64(6, 'UTC'),
    fun LowCardinality(String),
    run_kind LowCardinality(String),
    release LowCardinality(String),
    expected UInt32,
    returned UInt32,
    succeeded UInt32,
    failed UInt32,
    missing UInt32,                                -- every reason, not_connected included
    duration_ms UInt64,
    revision UInt32,
    INDEX at_idx at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree(revision)
ORDER BY (master, jid)
TTL toDateTime(at) + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS saltsight.jobs_mv TO saltsight.jobs AS
SELECT
    master, jid, at,
    parseDateTime64BestEffortOrZero(JSONExtractString(record, 'published_at'), 6, 'UTC') AS published_at,
    fun, run_kind, release,
    JSONExtractUInt(record, 'expected') AS expected,
    JSONExtractUInt(record, 'returned') AS returned,
    JSONExtractUInt(record, 'succeeded') AS succeeded,
    count AS failed,
    arraySum(JSONExtractKeysAndValues(record, 'missing', 'UInt32').2) AS missing,
    JSONExtractUInt(record, 'duration_ms') AS duration_ms,
    revision
FROM saltsight.records
WHERE kind = 'job_completed';

-- Rollouts: when each master first ran under each commit of a watched checkout
-- (its config_change records), and when that commit was made.
CREATE TABLE IF NOT EXISTS saltsight.rollouts
(
    repo LowCardinality(String),
    commit String,
    master LowCardinality(String),
    subject SimpleAggregateFunction(any, String),
    committed_at SimpleAggregateFunction(max, DateTime64(6, 'UTC')), -- max: a record without the commit's time says 1970
    first_seen SimpleAggregateFunction(min, DateTime64(6, 'UTC'))
)
ENGINE = AggregatingMergeTree
ORDER BY (repo, commit, master)
TTL toDateTime(first_seen) + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS saltsight.rollouts_mv TO saltsight.rollouts AS
SELECT
    reason AS repo,
    commit,
    master,
    any(JSONExtractString(record, 'commits', 1, 'subject')) AS subject,
    max(parseDateTime64BestEffortOrZero(JSONExtractString(record, 'commits', 1, 'time'), 6, 'UTC')) AS committed_at,
    min(at) AS first_seen
FROM saltsight.records
WHERE kind = 'config_change' AND commit != ''
GROUP BY repo, commit, master;

-- Release delay: one row per (master, state tree, commit), the latest revision
-- of its `rollout` record (re-emitted as minions apply the commit, closed
-- complete, superseded or stalled). Delays are seconds from the commit's time
-- to half, 95% and all of the master's minions having applied it (NULL until
-- reached). The failed minions' sample keeps each one's job and root cause
-- (its failure group's fingerprint). Read with FINAL.
CREATE TABLE IF NOT EXISTS saltsight.rollout_progress
(
    master LowCardinality(String),
    repo LowCardinality(String),
    commit String,
    at DateTime64(6, 'UTC'),                       -- this revision
    subject String,
    status LowCardinality(String),                 -- in_progress, complete, superseded, stalled
    committed_at Nullable(DateTime64(6, 'UTC')),
    seen_at DateTime64(6, 'UTC'),                  -- when saltsight saw the HEAD there
    known UInt32,
    applied UInt32,
    failed UInt32,
    pending UInt32,
    delay_p50_s Nullable(Float64),
    delay_p95_s Nullable(Float64),
    delay_p100_s Nullable(Float64),
    failed_minions Array(String),                  -- a bounded sample, with...
    failed_jids Array(String),                     -- ... the job each failed in
    failed_fingerprints Array(String),             -- ... and its root cause ('' if none)
    revision UInt32,
    INDEX at_idx at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree(revision)
ORDER BY (master, repo, commit)
TTL toDateTime(at) + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS saltsight.rollout_progress_mv TO saltsight.rollout_progress AS
SELECT
    master,
    JSONExtractString(record, 'repo') AS repo,
    commit,
    at,
    commit_subject AS subject,
    reason AS status,
    parseDateTime64BestEffortOrNull(JSONExtractString(record, 'committed_at'), 6, 'UTC') AS committed_at,
    parseDateTime64BestEffortOrZero(JSONExtractString(record, 'seen_at'), 6, 'UTC') AS seen_at,
    JSONExtractUInt(record, 'known') AS known,
    JSONExtractUInt(record, 'applied') AS applied,
    JSONExtractUInt(record, 'failed') AS failed,
    JSONExtractUInt(record, 'pending') AS pending,
    JSONExtract(record, 'delay_from_commit', 'p50_s', 'Nullable(Float64)') AS delay_p50_s,
    JSONExtract(record, 'delay_from_commit', 'p95_s', 'Nullable(Float64)') AS delay_p95_s,
    JSONExtract(record, 'delay_from_commit', 'p100_s', 'Nullable(Float64)') AS delay_p100_s,
    arrayMap(x -> JSONExtractString(x, 'minion'), JSONExtractArrayRaw(record, 'sample_failed')) AS failed_minions,
    arrayMap(x -> JSONExtractString(x, 'jid'), JSONExtractArrayRaw(record, 'sample_failed')) AS failed_jids,
    arrayMap(x -> JSONExtractString(x, 'fingerprint'), JSONExtractArrayRaw(record, 'sample_failed')) AS failed_fingerprints,
    revision
FROM saltsight.records
WHERE kind = 'rollout';

-- External incidents: one row per (master, incident), the latest revision of
-- its `external_incident` record (one target, a host or a URL's host, failing
-- on several minions across jobs). The same target in incidents of several
-- masters is an upstream outage, not a local problem. Read with FINAL.
CREATE TABLE IF NOT EXISTS saltsight.external_incidents
(
    master LowCardinality(String),
    incident String,
    at DateTime64(6, 'UTC'),                       -- this revision
    target LowCardinality(String),
    category LowCardinality(String),
    status LowCardinality(String),                 -- open, closed
    minions UInt32,
    jobs UInt32,
    failures UInt64,
    first_seen DateTime64(6, 'UTC'),
    last_seen DateTime64(6, 'UTC'),
    revision UInt32,
    INDEX at_idx at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree(revision)
ORDER BY (master, incident)
TTL toDateTime(at) + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS saltsight.external_incidents_mv TO saltsight.external_incidents AS
SELECT
    master,
    fingerprint AS incident,
    at,
    target,
    category,
    reason AS status,
    count AS minions,
    JSONExtractUInt(record, 'jobs') AS jobs,
    JSONExtractUInt(record, 'failures') AS failures,
    parseDateTime64BestEffortOrZero(JSONExtractString(record, 'first_seen'), 6, 'UTC') AS first_seen,
    parseDateTime64BestEffortOrZero(JSONExtractString(record, 'last_seen'), 6, 'UTC') AS last_seen,
    revision
FROM saltsight.records
WHERE kind = 'external_incident';

-- Drift per day by master, minion, state and change (corrected: a run put it
-- back, detected: a test=True run saw it): one row per state a `drift` record
-- lists.
CREATE TABLE IF NOT EXISTS saltsight.drift_daily
(
    day Date,
    master LowCardinality(String),
    minion LowCardinality(String),
    change LowCardinality(String),
    sls LowCardinality(String),
    state_id LowCardinality(String),
    state_function LowCardinality(String),
    drifts AggregateFunction(uniqExact, String),   -- record id and state
    jobs AggregateFunction(uniqExact, String),
    last_drift SimpleAggregateFunction(max, DateTime64(6, 'UTC'))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (day, master, minion, sls, state_id, state_function, change)
TTL day + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS saltsight.drift_daily_mv TO saltsight.drift_daily AS
SELECT
    toDate(at, 'UTC') AS day,
    master, minion,
    JSONExtractString(state, 'change') AS change,
    JSONExtractString(state, 'sls') AS sls,
    JSONExtractString(state, 'state_id') AS state_id,
    JSONExtractString(state, 'function') AS state_function,
    uniqExactState(concat(id, ' ', sls, ' ', state_id, ' ', state_function)) AS drifts,
    uniqExactState(jid) AS jobs,
    max(at) AS last_drift
FROM saltsight.records
ARRAY JOIN JSONExtractArrayRaw(record, 'states') AS state
WHERE kind = 'drift'
GROUP BY day, master, minion, change, sls, state_id, state_function;

-- States judged non-idempotent (they change on every run under one commit:
-- not drift): one row per (master, state), its latest judgement. Read with FINAL.
CREATE TABLE IF NOT EXISTS saltsight.non_idempotent
(
    master LowCardinality(String),
    sls LowCardinality(String),
    state_id LowCardinality(String),
    state_function LowCardinality(String),
    at DateTime64(6, 'UTC'),                       -- this judgement
    status LowCardinality(String),                 -- never_settles, settled
    minions UInt32,
    hint String,
    commit LowCardinality(String),
    INDEX at_idx at TYPE minmax GRANULARITY 1
)
ENGINE = ReplacingMergeTree(at)
ORDER BY (master, sls, state_id, state_function)
TTL toDateTime(at) + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS saltsight.non_idempotent_mv TO saltsight.non_idempotent AS
SELECT
    master, sls, state_id, state_function, at,
    reason AS status,
    count AS minions,
    JSONExtractString(record, 'hint') AS hint,
    commit
FROM saltsight.records
WHERE kind = 'non_idempotent';
