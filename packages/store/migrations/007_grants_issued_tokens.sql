-- 007: grants get a stable id and an author; issued agent tokens are recorded, so that an
-- admin can revoke every live token of an agent (SPEC R-A8, R-C2).

-- The grant id is the key of the grant on the compacted reach.grants.v1 and the path of
-- DELETE /v1/grants/{grant_id}: `from|to|capability`, `*` for every capability. Neither `|`
-- nor `*` can occur in a domain or a capability name, so the id is unambiguous; deriving it
-- here keeps it equal to the (from, to, capability) uniqueness of grants_uniq.
ALTER TABLE grants ADD COLUMN created_by text;
ALTER TABLE grants
  ADD COLUMN grant_id text GENERATED ALWAYS AS (from_domain || '|' || to_domain || '|' || coalesce(capability, '*')) STORED;
CREATE UNIQUE INDEX grants_grant_id_uniq ON grants (grant_id);

-- Every token the registry signs (jti), until it would have expired anyway: revoking "all
-- tokens of an agent" copies its live rows into revoked_tokens. Purged by the registry.
CREATE TABLE issued_tokens (
  jti        text        PRIMARY KEY,
  agent_id   text        NOT NULL,
  issued_at  timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX issued_tokens_agent_idx ON issued_tokens (agent_id, expires_at);
CREATE INDEX issued_tokens_expires_idx ON issued_tokens (expires_at);

-- Verifiers follow revocations incrementally (rows revoked since their last look).
CREATE INDEX revoked_tokens_revoked_at_idx ON revoked_tokens (revoked_at);
