-- 012: a message's timeline lives in its own row (issue 27: at most two PostgreSQL rows written
-- per message). Before, every status event was a row of `message_events`: four inserts per
-- delivered message, each with two index entries, beside the `messages` upsert. Now the tracker
-- appends the batch's new events to `messages.timeline` in the same upsert that moves the status:
-- one insert per message, plus one update for each later batch holding events of it.
--
-- An entry is a positional array, the order of message_timeline's columns below (keys repeated
-- in every entry would double its size):
--   [event_id, at (epoch ms), state, attempt, service, instance, agent_id, code, reason, detail]
ALTER TABLE messages ADD COLUMN timeline jsonb NOT NULL DEFAULT '[]';

-- message_timeline: every event of every message, as `message_events` had them. Readers (the
-- events endpoint, A2A, the stuck sweep, chaos checks) query this view; a filter on message_id
-- reaches the primary key of `messages` in each branch.
--
-- The second branch holds the timelines written before this migration. `message_events` is no
-- longer written; retention drops its partitions with those of `messages` (same created_at
-- ranges), so it empties within REACH_RETENTION_MESSAGES. An event of such an older message
-- delivered again after the upgrade (at-least-once) may then show twice in its timeline.
CREATE VIEW message_timeline AS
SELECT m.message_id,
       m.created_at,
       e->>0                                         AS event_id,
       to_timestamp((e->>1)::float8 / 1000)          AS at,
       e->>2                                         AS state,
       (e->>3)::int                                  AS attempt,
       e->>4                                         AS service,
       e->>5                                         AS instance,
       e->>6                                         AS agent_id,
       (e->>7)::int                                  AS code,
       e->>8                                         AS reason,
       CASE WHEN jsonb_typeof(e->9) = 'null' THEN NULL ELSE e->9 END AS detail
  FROM messages m
  CROSS JOIN LATERAL jsonb_array_elements(m.timeline) e
UNION ALL
SELECT message_id, created_at, event_id, at, state, attempt, service, instance, agent_id, code, reason, detail
  FROM message_events;
