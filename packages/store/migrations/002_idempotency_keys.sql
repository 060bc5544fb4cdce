-- 002: durable idempotency keys (SPEC R-D5; DESIGN §3 POST /v1/messages).
--
-- Redis SETNX with a TTL is the fast path; this table is the durable backstop that still
-- answers "duplicate" when the Redis key has expired early or Redis was down. Ingress inserts
-- (producer, idempotency_key) → message_id; a unique_violation means "duplicate: answer 200
-- with the original message_id".
--
-- Why a separate, NON-partitioned table rather than a unique index on messages: PostgreSQL
-- can only enforce a unique index on a partitioned table when the index includes the
-- partition key. On messages that would be UNIQUE (producer, idempotency_key, created_at),
-- which happily accepts the same key again in another month — or even a millisecond later.
-- Keys expire (expires_at), so this table stays small and needs no partitioning.
CREATE TABLE idempotency_keys (
  producer        text        NOT NULL,
  idempotency_key text        NOT NULL,
  message_id      text        NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  -- after this the key may be reused; a purge deletes expired rows, and a writer that meets
  -- an expired row may take it over with ON CONFLICT … DO UPDATE … WHERE expires_at <= now()
  expires_at      timestamptz NOT NULL,
  PRIMARY KEY (producer, idempotency_key),
  CHECK (expires_at > created_at)
);

-- the purge of expired keys
CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);
