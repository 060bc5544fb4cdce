-- 003: the dead-letter store (SPEC R-D11; DESIGN §3 /v1/dlq, §5 `reach dlq`).
--
-- The dead-letter service is the only writer: it consumes reach.dlq.v1, keeps every entry here
-- (including records that could not even be decoded), sweeps old PARKED entries to DEAD, and
-- replays entries to reach.ingress.v1. Not partitioned: entries are few (failures only), are
-- looked up by dlq_id, and are purged explicitly rather than by age.
CREATE TABLE dead_letters (
  dlq_id           text        PRIMARY KEY,
  -- null when the record could not be decoded far enough to know its message
  message_id       text,
  -- NO_ROUTE | RETRIES_EXHAUSTED | BUDGET_EXCEEDED | INVALID | EXPIRED | REJECTED (R-D11).
  -- Not a CHECK: a reason added later must never make the dead-letter store refuse an entry.
  reason           text        NOT NULL,
  -- the error code of DESIGN §6
  code             integer     NOT NULL,
  -- the error message as the failing service reported it
  error            text,
  -- the service that dead-lettered it
  service          text        NOT NULL,
  -- where the failed record was read from (the ingress topic for INVALID records)
  source_topic     text,
  source_partition integer,
  source_offset    bigint,
  attempts         integer     NOT NULL DEFAULT 0,
  producer         text,
  trace_id         text,
  capability       text,
  message_type     text,
  -- the attempts: [{attempt, agent_id, code, reason, at}, …]
  history          jsonb       NOT NULL DEFAULT '[]'::jsonb,
  -- the original record value as it was on the topic (Confluent-framed Avro, or whatever raw
  -- bytes failed to decode), so a replay sends exactly what was sent
  envelope         bytea,
  -- the envelope decoded to JSON for inspection; null when it could not be decoded
  envelope_json    jsonb,
  status           text        NOT NULL DEFAULT 'PARKED'
                   CHECK (status IN ('PARKED', 'REPLAYED', 'PURGED', 'DEAD')),
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  replayed_at      timestamptz,
  replay_count     integer     NOT NULL DEFAULT 0,
  -- The dead-letter consumer is at-least-once: after a crash it re-reads records it already
  -- stored. One row per source record makes that harmless (INSERT … ON CONFLICT DO NOTHING).
  -- Rows without a source position (NULLs are distinct) are not constrained.
  CONSTRAINT dead_letters_source_uniq UNIQUE (source_topic, source_partition, source_offset)
);

-- GET /v1/dlq?reason=&since=&limit= (newest first within a reason)
CREATE INDEX dead_letters_reason_idx ON dead_letters (reason, created_at);
-- GET /v1/dlq?since=&limit= without a reason
CREATE INDEX dead_letters_created_idx ON dead_letters (created_at);
-- redrive when an agent with a new capability appears (consumes reach.agents.v1)
CREATE INDEX dead_letters_capability_idx ON dead_letters (capability) WHERE capability IS NOT NULL;
-- the sweep "PARKED for longer than 24 h → DEAD" and status filters
CREATE INDEX dead_letters_status_idx ON dead_letters (status, created_at);
-- `reach dlq show <message_id>` and the trace view
CREATE INDEX dead_letters_message_idx ON dead_letters (message_id) WHERE message_id IS NOT NULL;
