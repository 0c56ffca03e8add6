-- Synthetic saltsight records for the ClickHouse benchmark (bench.py), made by
-- ClickHouse itself: rows {first}..{last} of {total} spread evenly over the
-- {days} days before {end}, inserted through saltsight.records so every view
-- fills as it would from saltsight. bench.py substitutes the {names}.
--
-- The mix, per 10,000 records: 8,450 minion_return (2 % failed), 100 late_return,
-- 200 minion_missing (6 reasons), 800 state_failure, 50 render_failure,
-- 100 failure_group, 140 job_published, 138 job_completed, 1 rollout,
-- 10 external_incident (4 targets), 8 drift (one drifted state each), 2
-- non_idempotent, 0.5 bus_gap and 0.5 config_change. 20 masters, 50,000 minions (2,500 a master), a job per
-- master and hour, 2,000 failure fingerprints over 100 SLS (skewed: the commonest
-- 1 % of them are 32 % of the failures), each SLS's last commit changing
-- weekly, 300 HEADs of the state tree over the month, 40 external targets.
INSERT INTO saltsight.records
    (id, kind, schema_version, master, at_micros, at, jid, minion, fun, run_kind, reason, sls, state_id,
     state_function, category, fingerprint, count, revision, commit, commit_subject,
     suspect_last_ok, suspect_first_failed, target, metadata, record)
SELECT
    lower(hex(MD5(toString(n)))) AS id,
    kind, 2, master, toUnixTimestamp64Micro(at), at, jid, minion, fun, 'scheduled', reason, sls, state_id,
    state_function, category, fingerprint, count, revision, commit, commit_subject,
    suspect_last_ok, suspect_first_failed, target, metadata,
    concat('{"kind":"', kind, '","schema_version":2,"id":"', id, '","master":"', master,
           '","at":"', toString(at), '","jid":"', jid, '","minion":"', minion,
           '","fun":"state.highstate","run_kind":"scheduled","sls":"', sls,
           '","state_id":"', state_id, '","category":"', category,
           '","comment":"', comment, '","fingerprint":"', fingerprint,
           '","duration_ms":', toString(h % 90000),
           ',"expected":2500,"returned":2450,"missing":{"no_response":50}',
           ',"commits":[{"id":"', commit, '","author":"alice","time":"', toString(at - INTERVAL 20 MINUTE),
           '","subject":"', commit_subject, '"}]',
           ',"metadata":', if(metadata = '', 'null', metadata),
           if(kind = 'rollout', concat(
               ',"repo":"/srv/salt","status":"', reason, '","committed_at":"', toString(at - INTERVAL 20 MINUTE),
               '","seen_at":"', toString(at - INTERVAL 15 MINUTE), '","seen_move":true,"known":2500,"applied":', toString(count),
               ',"failed":', toString(failed_minions), ',"pending":0',
               ',"delay_from_commit":{"p50_s":', toString(h % 600 + 60), ',"p95_s":', toString(h % 600 + 600),
               if(reason = 'complete', concat(',"p100_s":', toString(h % 600 + 1200)), ''), '}',
               ',"sample_failed":[', if(failed_minions = 0, '', concat('{"minion":"minion-', leftPad(toString(minion_no), 5, '0'),
               '","jid":"', jid, '","fingerprint":"', lower(hex(substring(MD5(toString(fp_no)), 1, 8))), '"}')), ']'), ''),
           if(kind = 'drift', concat(
               ',"change":"', reason, '","repo":"/srv/salt","states":[{"sls":"sls', toString(fp_no % 100),
               '","state_id":"state', toString(fp_no % 500), '","function":"file.managed","name":"/etc/f',
               toString(fp_no), '.conf","change":"', reason, '","summary":"-by hand"}]'), ''),
           if(kind = 'non_idempotent', ',"hint":"a command with no unless/onlyif/creates runs every time"', ''),
           if(kind = 'external_incident', concat(
               ',"incident":"', incident_id, '","target":"', target, '","jobs":', toString(h % 12 + 1),
               ',"failures":', toString(count * 2), ',"first_seen":"', toString(at - INTERVAL 30 MINUTE),
               '","last_seen":"', toString(at), '"'), ''),
           '}') AS record
FROM
(
    SELECT
        number AS n,
        cityHash64(number) AS h,
        number % 10000 AS slot,
        multiIf(slot < 8450, 'minion_return', slot < 8550, 'late_return', slot < 8750, 'minion_missing',
                slot < 9550, 'state_failure', slot < 9600, 'render_failure', slot < 9700, 'failure_group',
                slot < 9840, 'job_published', slot < 9850, 'external_incident', slot < 9858, 'drift',
                slot < 9860, 'non_idempotent', slot < 9998, 'job_completed',
                slot = 9998, 'rollout',
                number % 20000 = 9999, 'bus_gap', 'config_change') AS kind,
        fromUnixTimestamp64Micro(toInt64({end_micros} - ({total} - number) * ({days} * 86400000000 / {total})), 'UTC') AS at,
        h % 50000 AS minion_no,
        concat('master-', leftPad(toString(minion_no % 20), 2, '0')) AS master,
        if(kind IN ('job_published', 'job_completed', 'bus_gap', 'config_change', 'failure_group', 'rollout', 'external_incident'), '',
           concat('minion-', leftPad(toString(minion_no), 5, '0'))) AS minion,
        concat(formatDateTime(toStartOfHour(at), '%Y%m%d%H'), '0000', leftPad(toString(minion_no % 20), 6, '0')) AS jid,
        'state.highstate' AS fun,
        -- Skewed as in life: a few failures are most of them.
        toUInt32(2000 * pow((intDiv(h, 50000) % 1000000) / 1000000, 4)) AS fp_no,
        kind IN ('state_failure', 'render_failure', 'failure_group') AS failing,
        if(failing OR kind = 'non_idempotent', concat('sls', toString(fp_no % 100)), '') AS sls,
        if((failing AND kind != 'render_failure') OR kind = 'non_idempotent', concat('state', toString(fp_no % 500)), '') AS state_id,
        if((failing AND kind != 'render_failure') OR kind = 'non_idempotent', ['file.managed', 'pkg.installed', 'cmd.run', 'service.running'][fp_no % 4 + 1], '') AS state_function,
        multiIf(failing, if(kind = 'render_failure', 'render',
           ['dependency.package', 'network.dns', 'network.connect', 'source_missing', 'command', 'permission', 'timeout', 'other'][fp_no % 8 + 1]),
           kind = 'external_incident', ['network.dns', 'network.connect'][fp_no % 2 + 1], '') AS category,
        multiIf(failing, lower(hex(substring(MD5(toString(fp_no)), 1, 8))), kind = 'external_incident', incident_id, '') AS fingerprint,
        multiIf(kind = 'minion_return', if(h % 50 = 0, 'failed', 'succeeded'),
                kind = 'minion_missing', ['not_connected', 'minion_restarted', 'lost', 'running_past_deadline', 'no_response', 'unknown_gap'][h % 6 + 1],
                kind = 'late_return', 'succeeded', kind = 'bus_gap', 'disconnected', kind = 'config_change', 'states',
                kind = 'rollout', ['complete', 'superseded', 'stalled', 'in_progress'][h % 4 + 1],
                kind = 'external_incident', ['open', 'closed'][h % 2 + 1],
                kind = 'drift', ['corrected', 'detected'][h % 2 + 1],
                kind = 'non_idempotent', ['never_settles', 'settled'][h % 2 + 1], '') AS reason,
        toUInt32(multiIf(kind = 'failure_group', h % 200 + 1, kind = 'job_completed', h % 60, kind = 'state_failure', h % 3,
                         kind = 'rollout', 2500 - failed_minions, kind = 'external_incident', h % 300 + 3,
                         kind IN ('drift', 'non_idempotent'), h % 20 + 1, 0)) AS count,
        toUInt32(if(kind IN ('failure_group', 'job_completed', 'rollout', 'external_incident'), intDiv(h, 7) % 5, 0)) AS revision,
        -- A rollout fails on a few minions one time in three; an incident is a
        -- mirror's (the targets failures name), keyed per master and hour.
        toUInt32(if(kind = 'rollout' AND h % 3 = 0, h % 40 + 1, 0)) AS failed_minions,
        lower(hex(substring(MD5(concat(master, toString(toStartOfHour(at)), toString(fp_no % 40))), 1, 8))) AS incident_id,
        -- The commit that last touched the SLS: each SLS changes about weekly,
        -- at its own time; config_change records follow the fleet's HEAD.
        intDiv(number * {days}, {total}) AS day_no,
        if(kind IN ('config_change', 'rollout'), concat('head', toString(intDiv(number * 300, {total}))),
           concat('sls', toString(fp_no % 100), '-', toString(intDiv(day_no + fp_no % 100 % 7, 7)))) AS commit_key,
        if(failing OR kind IN ('config_change', 'rollout'), lower(hex(MD5(commit_key))), '') AS commit,
        if(commit != '', concat('states: change ', commit_key), '') AS commit_subject,
        if(failing AND h % 3 = 0, lower(hex(MD5(concat(commit_key, '^')))), '') AS suspect_last_ok,
        if(suspect_last_ok != '', commit, '') AS suspect_first_failed,
        multiIf(category IN ('dependency.package', 'network.dns', 'network.connect'), concat('mirror', toString(fp_no % 40), '.example.net'),
                kind = 'external_incident', concat('mirror', toString(fp_no % 4), '.example.net'), '') AS target,
        if(h % 4 = 0, concat('{"release":"r', toString(intDiv(number * 120, {total})), '"}'), '') AS metadata,
        if(failing, concat('Source file salt://files/f', toString(fp_no), '.conf not found in saltenv base'), '') AS comment
    FROM numbers({first}, {count})
);
