-- 005: a dead letter is identified by its dlq_id alone.
--
-- 003 also made (source_topic, source_partition, source_offset) unique, so that a DLQ record
-- read twice was stored once. But offsets are not unique over time: a topic recreated or a
-- cluster rebuilt starts again at offset 0, and the INSERT … ON CONFLICT DO NOTHING of the
-- dead-letter service then silently dropped new entries whose source position matched an old
-- one (found by the test suite against a fresh broker and a kept database). A re-read DLQ record
-- carries the same dlq_id, which the primary key already deduplicates.
ALTER TABLE dead_letters DROP CONSTRAINT IF EXISTS dead_letters_source_uniq;
CREATE INDEX IF NOT EXISTS dead_letters_source_idx ON dead_letters (source_topic, source_partition, source_offset);
