-- Fleet queries over saltsight.records for ClickHouse 18.16
-- (legacy/schema.sql): raw rows, FINAL collapsing the duplicates that
-- at-least-once delivery may leave before a merge. Current ClickHouse reads
-- views instead: ../queries.sql.
--
-- Each query is one statement ending in a semicolon at the end of a line. No semicolon inside
-- a comment or a string (docs/clickhouse.md).

-- Top failing states by commit over the last hour, render failures included
-- (their state_id and state_function are empty): which commit broke what,
-- where, and how widely.
SELECT
    commit,
    any(commit_subject) AS commit_subject,
    sls,
    state_id,
    state_function,
    category,
    uniqExact(master) AS masters,
    uniqExact(minion) AS minions,
    count() AS failures,
    min(at) AS first_seen,
    max(at) AS last_seen
FROM saltsight.records FINAL
WHERE kind IN ('state_failure', 'render_failure') AND at > now() - INTERVAL 1 HOUR
GROUP BY commit, sls, state_id, state_function, category
ORDER BY minions DESC, failures DESC
LIMIT 50;

-- Missing returns by minion and reason over a day: who never answers, and why.
SELECT
    minion,
    reason,
    count() AS missing,
    uniqExact(jid) AS jobs,
    groupUniqArray(fun) AS functions,
    max(at) AS last_missing
FROM saltsight.records FINAL
WHERE kind = 'minion_missing' AND at > now() - INTERVAL 1 DAY
GROUP BY minion, reason
ORDER BY missing DESC
LIMIT 100;

-- Failure groups across masters over a day: the same failure (fingerprint) on
-- several masters points at a shared cause (a commit, a mirror, DNS). A group
-- amended by late returns counts once, at its latest revision.
SELECT
    fingerprint,
    any(sls) AS sls,
    any(state_id) AS state_id,
    any(category) AS category,
    any(target) AS target,
    uniqExact(master) AS masters,
    groupUniqArray(master) AS on_masters,
    sum(minions) AS minions,
    count() AS jobs,
    min(first_at) AS first_seen,
    max(first_at) AS last_seen
FROM
(
    SELECT
        master,
        jid,
        fingerprint,
        any(sls) AS sls,
        any(state_id) AS state_id,
        any(category) AS category,
        any(target) AS target,
        argMax(count, revision) AS minions,
        min(at) AS first_at
    FROM saltsight.records FINAL
    WHERE kind = 'failure_group' AND at > now() - INTERVAL 1 DAY
    GROUP BY master, jid, fingerprint
)
GROUP BY fingerprint
ORDER BY masters DESC, minions DESC
LIMIT 50;

-- Jobs by release (--metadata '{"release": ...}') over a day: failed minions and
-- missing returns per release.
SELECT
    visitParamExtractString(metadata, 'release') AS release,
    uniqExact(jid) AS jobs,
    countIf(kind = 'minion_return' AND reason = 'failed') AS failed_returns,
    countIf(kind = 'minion_missing') AS missing_returns
FROM saltsight.records FINAL
WHERE at > now() - INTERVAL 1 DAY AND metadata != ''
GROUP BY release
ORDER BY failed_returns DESC
LIMIT 50;
