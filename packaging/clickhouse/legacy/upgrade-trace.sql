-- Adds the trace id column (Salt's tracing, docs/opentelemetry.md) to a
-- saltsight.records made by an earlier legacy/schema.sql, after upgrade.sql.
-- 18.16 has no ADD COLUMN IF NOT EXISTS, so run this once. The column is filled
-- from the whole record as rows are inserted, and rows inserted before stay ''.

ALTER TABLE saltsight.records
    ADD COLUMN trace_id String MATERIALIZED visitParamExtractString(record, 'trace_id') AFTER target;
