-- Adds the columns saltsight rows carry since the commit and target columns
-- came in to a saltsight.records made by an earlier legacy/schema.sql (18.16
-- has no ADD COLUMN IF NOT EXISTS: run this once). Rows inserted before stay
-- with '' there. The whole record (`record`) has always held these fields.

ALTER TABLE saltsight.records
    ADD COLUMN commit_subject String AFTER record,
    ADD COLUMN suspect_last_ok String AFTER commit_subject,
    ADD COLUMN suspect_first_failed String AFTER suspect_last_ok,
    ADD COLUMN target String AFTER suspect_first_failed;
