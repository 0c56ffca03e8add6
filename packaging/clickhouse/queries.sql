-- Fleet queries over the views of packaging/clickhouse/schema.sql (current
-- ClickHouse, for 18.16 see legacy/queries.sql). The same text runs on one server
-- and on a cluster (cluster.sql names its Distributed tables as these).
--
-- Each query is one statement ending in a semicolon at the end of a line. No semicolon inside
-- a comment or a string (docs/clickhouse.md).
--
-- The views hold hours and days: "the last hour" reads the hour buckets the
-- window touches (up to two), "a day" the day buckets (up to two), and the
-- HAVING clauses drop what was last seen before the window. Counts are of
-- distinct records (duplicates from at-least-once delivery count once).

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
    uniqExactMerge(minions) AS minions,
    uniqExactMerge(failures) AS failures,
    min(first_seen) AS first_seen,
    max(last_seen) AS last_seen
FROM saltsight.failures_hourly
WHERE hour >= toStartOfHour(now() - INTERVAL 1 HOUR)
GROUP BY commit, sls, state_id, state_function, category
HAVING last_seen > now() - INTERVAL 1 HOUR
ORDER BY minions DESC, failures DESC
LIMIT 50;

-- Missing returns by minion and reason over a day: who never answers, and why.
SELECT
    minion,
    reason,
    uniqExactMerge(missing) AS missing,
    uniqExactMerge(jobs) AS jobs,
    groupUniqArrayMerge(functions) AS functions,
    max(last_missing) AS last_missing
FROM saltsight.missing_daily
WHERE day >= toDate(now() - INTERVAL 1 DAY)
GROUP BY minion, reason
HAVING last_missing > now() - INTERVAL 1 DAY
ORDER BY missing DESC
LIMIT 100;

-- Failure groups across masters over a day: the same failure (fingerprint) on
-- several masters points at a shared cause (a commit, a mirror, DNS). A group
-- amended by late returns counts once, at its latest revision (FINAL).
SELECT
    fingerprint,
    any(sls) AS sls,
    any(state_id) AS state_id,
    any(category) AS category,
    any(target) AS target,
    uniqExact(master) AS masters,
    groupUniqArray(master) AS on_masters,
    sum(count) AS minions,
    count() AS jobs,
    min(at) AS first_seen,
    max(at) AS last_seen
FROM saltsight.failure_groups FINAL
WHERE at > now() - INTERVAL 1 DAY
GROUP BY fingerprint
ORDER BY masters DESC, minions DESC
LIMIT 50;

-- Jobs by release (--metadata '{"release": ...}') over a day: failed minions and
-- missing returns per release, from each job's latest verdict.
SELECT
    release,
    count() AS jobs,
    sum(expected) AS expected,
    sum(failed) AS failed_returns,
    sum(missing) AS missing_returns
FROM saltsight.jobs FINAL
WHERE at > now() - INTERVAL 1 DAY AND release != ''
GROUP BY release
ORDER BY failed_returns DESC
LIMIT 50;

-- Rollout of each commit of a watched checkout over a week: when it was made,
-- when the first and the last master ran under it.
SELECT
    repo,
    commit,
    any(subject) AS subject,
    max(committed_at) AS committed_at,
    uniqExact(master) AS masters,
    min(first_seen) AS first_master_at,
    max(first_seen) AS last_master_at,
    if(committed_at < toDateTime64('1971-01-01', 6, 'UTC'), NULL,
       dateDiff('second', committed_at, first_master_at)) AS delay_to_first_s,
    dateDiff('second', first_master_at, last_master_at) AS spread_s
FROM
(
    SELECT repo, commit, master, any(subject) AS subject,
           max(committed_at) AS committed_at, min(first_seen) AS first_seen
    FROM saltsight.rollouts
    GROUP BY repo, commit, master
)
GROUP BY repo, commit
HAVING last_master_at > now() - INTERVAL 7 DAY
ORDER BY last_master_at DESC
LIMIT 50;

-- The same external target failing on several masters over a day: an upstream
-- outage (a mirror, DNS, a third-party URL), not one master's problem. From
-- each master's external incidents at their latest revision (FINAL).
SELECT
    target,
    groupUniqArray(category) AS categories,
    uniqExact(master) AS masters,
    groupUniqArray(master) AS on_masters,
    count() AS incidents,
    sum(minions) AS minions,
    sum(jobs) AS jobs,
    countIf(status = 'open') AS open,
    min(first_seen) AS first_failure,
    max(last_seen) AS last_failure
FROM saltsight.external_incidents FINAL
WHERE last_seen > now() - INTERVAL 1 DAY
GROUP BY target
HAVING masters > 1
ORDER BY masters DESC, minions DESC
LIMIT 50;

-- Release delay per commit over a month: from the commit's time to half, 95%
-- and all of the fleet having applied it (a successful, non-test highstate or
-- state.apply under it), each master's rollout at its latest revision. Across
-- masters a delay is the slowest master's, and the one to 100% only once every
-- master reached it. A commit superseded before it reached everyone has none.
SELECT
    repo,
    commit,
    any(subject) AS subject,
    min(committed_at) AS commit_time,
    uniqExact(master) AS masters,
    groupUniqArray(status) AS statuses,
    sum(known) AS minions,
    sum(applied) AS applied,
    sum(failed) AS failed,
    sum(pending) AS pending,
    max(delay_p50_s) AS to_50_s,
    max(delay_p95_s) AS to_95_s,
    if(countIf(isNull(delay_p100_s)) = 0, max(delay_p100_s), NULL) AS to_100_s
FROM saltsight.rollout_progress FINAL
WHERE seen_at > now() - INTERVAL 30 DAY
GROUP BY repo, commit
ORDER BY commit_time DESC
LIMIT 100;

-- Commits whose rollout failed on some minions over a month, with each root
-- cause across masters: the failed minions each rollout keeps (a bounded
-- sample) joined to their jobs' failure groups by fingerprint. `minions`
-- counts the minions of those jobs' groups, `failed` the rollouts' own count
-- of failed minions, per commit.
SELECT
    f.repo AS repo,
    f.commit AS commit,
    any(f.subject) AS subject,
    any(totals.failed_minions) AS failed,
    f.fingerprint AS fingerprint,
    any(g.sls) AS sls,
    any(g.state_id) AS state_id,
    any(g.category) AS category,
    any(g.target) AS target,
    uniqExact(f.master) AS masters,
    groupUniqArray(f.master) AS on_masters,
    uniqExact(f.master, f.jid) AS jobs,
    sum(g.count) AS minions,
    groupUniqArrayArray(f.minions) AS sample_minions
FROM
(
    SELECT master, repo, commit, any(subject) AS subject, failure.2 AS jid,
           failure.3 AS fingerprint, groupUniqArray(failure.1) AS minions
    FROM saltsight.rollout_progress FINAL
    ARRAY JOIN arrayZip(failed_minions, failed_jids, failed_fingerprints) AS failure
    WHERE failed > 0 AND seen_at > now() - INTERVAL 30 DAY
    GROUP BY master, repo, commit, jid, fingerprint
) AS f
LEFT JOIN
(
    SELECT master, jid, fingerprint, sls, state_id, category, target, count
    FROM saltsight.failure_groups FINAL
    WHERE at > now() - INTERVAL 31 DAY
) AS g ON g.master = f.master AND g.jid = f.jid AND g.fingerprint = f.fingerprint
LEFT JOIN
(
    SELECT repo, commit, sum(failed) AS failed_minions
    FROM saltsight.rollout_progress FINAL
    WHERE failed > 0 AND seen_at > now() - INTERVAL 30 DAY
    GROUP BY repo, commit
) AS totals ON totals.repo = f.repo AND totals.commit = f.commit
GROUP BY repo, commit, fingerprint
ORDER BY failed DESC, masters DESC
LIMIT 100;

-- The minions that drift most over a week, on every master: states put back
-- by a run (corrected) or seen by a test=True run (detected), and which.
SELECT
    master,
    minion,
    sumIf(drifts, change = 'corrected') AS corrected,
    sumIf(drifts, change = 'detected') AS detected,
    groupUniqArray(state) AS states,
    max(last_drift) AS last_drift
FROM
(
    SELECT master, minion, change, concat(sls, ':', state_id) AS state,
           uniqExactMerge(drifts) AS drifts, max(last_drift) AS last_drift
    FROM saltsight.drift_daily
    WHERE day >= today() - 7
    GROUP BY master, minion, change, state
)
GROUP BY master, minion
ORDER BY corrected + detected DESC, last_drift DESC
LIMIT 50;

-- The states that never settle, across masters: judged non-idempotent and not
-- settled since (their changes are not drift: fix the state), each master's
-- latest judgement (FINAL).
SELECT
    sls,
    state_id,
    state_function,
    uniqExact(master) AS masters,
    groupUniqArray(master) AS on_masters,
    sum(minions) AS minions,
    any(hint) AS hint,
    min(at) AS since
FROM saltsight.non_idempotent FINAL
WHERE status = 'never_settles'
GROUP BY sls, state_id, state_function
ORDER BY masters DESC, minions DESC
LIMIT 50;
