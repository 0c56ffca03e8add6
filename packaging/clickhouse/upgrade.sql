-- Adds to a saltsight.records made by an earlier schema.sql the columns added
-- since (idempotent: run it after every upgrade of saltsight), and rows inserted
-- before stay with '' there (the whole record, `record`, holds every field).
-- On a cluster (cluster.sql), run it on every server with `records_local` in
-- place of `records`, and add the column to the Distributed `records` as an
-- ALIAS of the same expression.

-- The job's trace id, with Salt's tracing on (docs/opentelemetry.md).
ALTER TABLE saltsight.records
    ADD COLUMN IF NOT EXISTS trace_id String MATERIALIZED JSONExtractString(record, 'trace_id') CODEC(ZSTD(1)) AFTER record;
