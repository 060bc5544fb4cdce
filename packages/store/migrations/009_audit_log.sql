-- 009: the audit trail of admin actions (issue #13): who did what, when, and with what result.
-- Append-only; every service that serves an admin action inserts its rows (an audit record is
-- written where the action happened), the registry answers GET /v1/audit from it.
CREATE TABLE audit_log (
  audit_id  text        PRIMARY KEY,
  at        timestamptz NOT NULL DEFAULT now(),
  -- "admin", "agent:<id>", "enrollment", "anonymous", "invalid-token", or a process ("router:<instance>")
  actor     text        NOT NULL,
  -- the caller's source address (null for actions a process took by itself)
  source    text,
  service   text        NOT NULL,
  instance  text        NOT NULL,
  -- e.g. dlq.replay, dlq.replay_filter, dlq.purge, quota.set, quota.reset, grant.put, grant.revoke,
  -- token.revoke_agent, token.revoke, agent.delete, rules.reload
  action    text        NOT NULL,
  -- what was acted on: a dead letter, agent, grant or token id, a rules file
  target    text,
  -- the request: method, path, and the JSON body (truncated) — never a credential
  request   jsonb,
  -- the HTTP status of the answer (0 for actions without one)
  status    integer     NOT NULL,
  -- ok | denied (401/403) | failed
  result    text        NOT NULL,
  -- the answer's error, or what the action reported
  detail    jsonb
);
CREATE INDEX audit_log_at ON audit_log (at DESC, audit_id DESC);
CREATE INDEX audit_log_action_at ON audit_log (action, at DESC);
