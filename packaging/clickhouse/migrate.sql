-- From the table earlier saltsight releases made (legacy/schema.sql, on a server
-- now running current ClickHouse) to schema.sql, on one server:
--
--   1. RENAME TABLE saltsight.records TO saltsight.records_v2
--   2. apply schema.sql (the new saltsight.records and its views)
--   3. apply this file: every old row into the new table, through the views
--   4. compare SELECT count() FROM saltsight.records_v2 FINAL with the new
--      table's, then DROP TABLE saltsight.records_v2
--
-- saltsight may keep running: between 1 and 2 its inserts fail, and it keeps
-- them in its spool and sends them again until they go in. A row sent to both
-- tables is one record: the new table collapses the copies by id.
-- Rows older than the retention (TTL in schema.sql) are not kept.
-- The columns the old table lacks are read from the whole record.

INSERT INTO saltsight.records
(
    id, kind, schema_version, master, at_micros, at, jid, minion, fun, run_kind, reason,
    sls, state_id, state_function, category, fingerprint, count, revision,
    commit, commit_subject, suspect_last_ok, suspect_first_failed, target,
    metadata, record
)
SELECT
    id, kind, schema_version, master, at_micros,
    fromUnixTimestamp64Micro(at_micros, 'UTC'),
    jid, minion, fun, run_kind, reason,
    sls, state_id, state_function, category, fingerprint, count, revision,
    commit,
    JSONExtractString(record, 'introduced_by', 'subject'),
    JSONExtractString(record, 'suspect_commits', 'last_ok'),
    JSONExtractString(record, 'suspect_commits', 'first_failed'),
    multiIf(
        JSONExtractString(record, 'host') != '', JSONExtractString(record, 'host'),
        JSONExtractString(record, 'url') != '', JSONExtractString(record, 'url'),
        JSONExtractString(record, 'package')
    ),
    metadata, record
FROM saltsight.records_v2;
