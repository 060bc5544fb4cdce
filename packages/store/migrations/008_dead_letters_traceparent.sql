-- 008: a dead letter keeps the trace context it was stored under (SPEC R-F1).
--
-- The dead-letter service records a `dead_letter` span for every entry it stores, as a child of
-- the span of the stage that gave up on the message. A replay, perhaps days later, continues
-- that trace from here: its `dead_letter_replay` span and the replayed record's traceparent
-- descend from this one instead of starting a new tree. NULL for entries stored before, or
-- without any trace context (an undecodable record).
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS traceparent text;
