-- 011: A2A ListTasks (docs/a2a.md) lists a caller's tasks, most recently updated first, a page
-- at a time. A task is a message with an idempotency key (an A2A message's messageId is its
-- key), so the index is partial like messages_idempotency_idx: traffic without keys pays nothing.
CREATE INDEX messages_keyed_by_producer_idx ON messages (producer, updated_at DESC, message_id DESC)
  WHERE idempotency_key IS NOT NULL;
