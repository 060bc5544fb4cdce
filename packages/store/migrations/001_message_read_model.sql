-- 001: the message read model (DESIGN §1, §3; SPEC R-D1, R-E4).
--
-- The tracker is the only writer (it folds reach.status.v1 into these tables in batches);
-- ingress answers GET /v1/messages/{id}, /v1/messages/{id}/events and /v1/traces/{trace_id}
-- from them, read-only. Payloads are not stored here (R-E4): they stay in Kafka.
--
-- Both tables are partitioned by month on the MESSAGE's created_at, so a message and its whole
-- timeline live in the same month's partitions, and old months can be detached or dropped as a
-- unit instead of being deleted row by row.
--
-- Month boundaries are UTC instants. A timestamptz partition bound given as a plain date is
-- read in the creating session's TimeZone; two services with different TimeZone settings would
-- then create overlapping ranges. Every bound below is therefore computed in UTC.

-- ─── messages: one row per message (per fan-out copy), its current state ───────────────────
CREATE TABLE messages (
  message_id        text        NOT NULL,
  -- the envelope's created_at; the partition key, immutable for the life of the message
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL DEFAULT now(),
  status            text        NOT NULL DEFAULT 'PENDING'
                    CHECK (status IN ('PENDING', 'ROUTED', 'DELIVERING', 'DELIVERED', 'REJECTED', 'DEAD')),
  -- State only moves forward within an attempt, and a retry starts a new attempt at PENDING.
  -- The tracker applies an update only when (attempt, state_rank) grows, so status events that
  -- arrive late or twice (at-least-once, several partitions) can never move a message back.
  -- Derived from status, so a writer cannot make the two disagree.
  state_rank        smallint    GENERATED ALWAYS AS (
                      CASE status
                        WHEN 'PENDING'    THEN 0
                        WHEN 'ROUTED'     THEN 1
                        WHEN 'DELIVERING' THEN 2
                        ELSE 3            -- DELIVERED | REJECTED | DEAD: terminal
                      END) STORED,
  attempt           integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  message_type      text        NOT NULL,
  producer          text        NOT NULL,
  -- exactly one of capability / topic / target_agent_id is set on the envelope
  capability        text,
  topic             text,
  target_agent_id   text,
  -- the agent chosen for (or handling) the current attempt
  agent_id          text,
  -- a fan-out copy points at the message it was copied from
  parent_message_id text,
  trace_id          text        NOT NULL,
  request_id        text,
  session_id        text,
  correlation_id    text,
  reply_to          text,
  idempotency_key   text,
  priority          text        NOT NULL DEFAULT 'NORMAL' CHECK (priority IN ('HIGH', 'NORMAL', 'LOW')),
  expire_at         timestamptz,
  -- the error code (DESIGN §6) and text of the last failure, if any
  code              integer,
  reason            text,
  -- the handler's result for ?wait_ms and the SDK's dedupe of redeliveries
  result            jsonb,
  -- the routing rule that matched, for `reach rules explain` and traces
  rule              text,
  -- A unique index on a partitioned table must contain the partition key. message_id alone
  -- is unique in practice (msg_ + ULID, minted once); lookups by message_id use this index's
  -- leading column in every partition, and prune to one partition when the caller also knows
  -- created_at (the ULID's time prefix gives it).
  PRIMARY KEY (message_id, created_at)
) PARTITION BY RANGE (created_at);

-- GET /v1/traces/{trace_id}: every message of a trace, in order
CREATE INDEX messages_trace_idx ON messages (trace_id, created_at);
-- the duplicate check's fallback when the Redis key has expired or Redis is down (R-D5);
-- uniqueness itself is enforced by idempotency_keys (migration 002)
CREATE INDEX messages_idempotency_idx ON messages (producer, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- fan-out: the copies of one message
CREATE INDEX messages_parent_idx ON messages (parent_message_id)
  WHERE parent_message_id IS NOT NULL;
-- sweeps ("DELIVERING for longer than its deadline", budget checks) and status listings
CREATE INDEX messages_status_idx ON messages (status, updated_at);

-- ─── message_events: the timeline, one row per status event ───────────────────────────────
CREATE TABLE message_events (
  -- minted by the service that emitted the event; the tracker inserts with
  -- ON CONFLICT (event_id, created_at) DO NOTHING, so a redelivered event is recorded once
  event_id   text        NOT NULL,
  message_id text        NOT NULL,
  -- the MESSAGE's created_at (not the event's time): keeps the timeline in the message's month
  created_at timestamptz NOT NULL,
  -- when the event happened
  at         timestamptz NOT NULL,
  -- a lifecycle state (PENDING … DEAD) or a finer step inside one (e.g. QUEUED, RETRY_SCHEDULED);
  -- deliberately not constrained, so a new step never makes the tracker's batch fail
  state      text        NOT NULL,
  attempt    integer     NOT NULL DEFAULT 0,
  service    text        NOT NULL,
  instance   text,
  agent_id   text,
  code       integer,
  reason     text,
  detail     jsonb,
  -- Unique "event_id" must include the partition key (see messages' primary key). An event
  -- always carries its message's created_at, so the pair is as strong as event_id alone.
  PRIMARY KEY (event_id, created_at)
) PARTITION BY RANGE (created_at);

-- GET /v1/messages/{id}/events: the timeline in order
CREATE INDEX message_events_message_idx ON message_events (message_id, at);

-- ─── monthly partitions ───────────────────────────────────────────────────────────────────
-- A DEFAULT partition takes any row no monthly partition covers (a clock far off, a month the
-- maintenance did not create yet), so an insert is never refused for want of a partition.
CREATE TABLE messages_default PARTITION OF messages DEFAULT;
CREATE TABLE message_events_default PARTITION OF message_events DEFAULT;

-- reach_ensure_partitions(from_month, months): creates the monthly partitions
-- <table>_yYYYYmMM of messages and message_events for `months` months starting at the month of
-- `from_month`, skipping those that exist. Returns the names it created. Idempotent, and
-- serialised by a transaction-level advisory lock because every service calls it at start.
--
-- PostgreSQL refuses to create a partition while the DEFAULT partition holds rows of its range.
-- So a new partition is built detached, the default partition's rows for that month are moved
-- into it, and then it is attached: no row is lost and the call never fails because of them.
CREATE FUNCTION reach_ensure_partitions(from_month date, months integer)
RETURNS SETOF text
LANGUAGE plpgsql
AS $fn$
DECLARE
  parent      text;
  part        text;
  lo          timestamptz;
  hi          timestamptz;
  month_start date := date_trunc('month', from_month)::date;
  cols        text;
  i           integer;
BEGIN
  IF months IS NULL OR months < 0 THEN
    RAISE EXCEPTION 'reach_ensure_partitions: months must be >= 0, got %', months;
  END IF;
  -- one creator at a time per database; held until the caller's transaction ends
  PERFORM pg_advisory_xact_lock(8243101772546048002);

  FOR i IN 0 .. months - 1 LOOP
    -- timestamp AT TIME ZONE 'UTC' = that wall-clock time in UTC, whatever the session's zone
    lo := (month_start + make_interval(months => i)) AT TIME ZONE 'UTC';
    hi := (month_start + make_interval(months => i + 1)) AT TIME ZONE 'UTC';
    FOREACH parent IN ARRAY ARRAY['messages', 'message_events'] LOOP
      part := format('%s_y%sm%s', parent,
                     to_char(month_start + make_interval(months => i), 'YYYY'),
                     to_char(month_start + make_interval(months => i), 'MM'));
      CONTINUE WHEN to_regclass(quote_ident(part)) IS NOT NULL;

      -- same columns, defaults, CHECKs and generated columns; indexes come with ATTACH
      EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED)',
                     part, parent);
      -- explicit column list: generated columns cannot be inserted, and it does not depend on
      -- the default partition's physical column order
      SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols
        FROM pg_attribute a
       WHERE a.attrelid = parent::regclass AND a.attnum > 0
         AND NOT a.attisdropped AND a.attgenerated = '';
      EXECUTE format(
        'WITH moved AS (DELETE FROM %I WHERE created_at >= $1 AND created_at < $2 RETURNING %s) '
        'INSERT INTO %I (%s) SELECT %s FROM moved',
        parent || '_default', cols, part, cols, cols)
      USING lo, hi;
      EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                     parent, part, lo, hi);
      RETURN NEXT part;
    END LOOP;
  END LOOP;
END
$fn$;

-- the current month and the next two; services call it again at start (ensurePartitions)
SELECT reach_ensure_partitions(date_trunc('month', now() AT TIME ZONE 'UTC')::date, 3);
