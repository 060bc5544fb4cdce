-- 004: admin state — producer quotas (R-D7), cross-domain grants, token revocation.

-- PUT /v1/quotas/{agent_id} (on ingress). An agent without a row gets the configured default
-- [100 msg/s]. Ingress instances load this table at start and pick up changes within 1 s.
CREATE TABLE quotas (
  agent_id   text             PRIMARY KEY,
  rate_per_s double precision NOT NULL CHECK (rate_per_s > 0),
  burst      integer          NOT NULL CHECK (burst > 0),
  updated_at timestamptz      NOT NULL DEFAULT now(),
  -- who changed it (the admin identity or "cli"), for the audit trail
  updated_by text
);

-- PUT /v1/grants, GET /v1/grants (on registry): delivery from one security domain to another
-- is denied (2003 DOMAIN_DENIED) unless a grant allows it.
CREATE TABLE grants (
  id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  from_domain text        NOT NULL,
  to_domain   text        NOT NULL,
  -- null = every capability of to_domain
  capability  text,
  created_at  timestamptz NOT NULL DEFAULT now()
);
-- One grant per (from, to, capability), where "all capabilities" (null) counts as one value:
-- a plain UNIQUE treats NULLs as distinct and would accept the same wildcard grant twice.
-- PUT /v1/grants upserts with ON CONFLICT (from_domain, to_domain, coalesce(capability, '')).
CREATE UNIQUE INDEX grants_uniq ON grants (from_domain, to_domain, coalesce(capability, ''));

-- Revoked agent tokens, checked by ingress and the dispatcher on auth. A row is only needed
-- until the token would have expired anyway, so expires_at drives the purge.
CREATE TABLE revoked_tokens (
  jti        text        PRIMARY KEY,
  agent_id   text        NOT NULL,
  revoked_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX revoked_tokens_agent_idx ON revoked_tokens (agent_id);
CREATE INDEX revoked_tokens_expires_idx ON revoked_tokens (expires_at);
