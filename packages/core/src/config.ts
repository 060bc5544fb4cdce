/**
 * Typed configuration from `REACH_*` environment variables.
 *
 * Every option of every service is declared once in OPTIONS with its default (docs/requirements.md),
 * the recommended production value and its effect; docs/configuration.md is generated from
 * this list. A service asks for the keys it uses. Loading goes through three stages:
 *
 * 1. raw (readRawEnv): the `REACH_*` strings as set, empty = unset; unknown names are rejected
 *    (with a suggestion), deprecated ones accepted with a warning;
 * 2. with defaults (withDefaults): each asked option parsed, or its default; every bad variable
 *    is named in one ConfigError;
 * 3. resolved (resolveConfig): options that depend on each other are checked together
 *    (DEPENDENCIES, the error names every variable involved) by each process that reads them, and the options a service cannot run
 *    without are checked set, which narrows their types: running code gets values it never has
 *    to test or assert (`!`).
 *
 * `process.env` is read here only (processEnv); loaders take an env map.
 */

import { parseBudgetPolicyJson, parseRetryPolicyJson } from './policies.js';
import { parseTokenKeys } from './token.js';

type Kind = 'string' | 'int' | 'number' | 'bool' | 'list' | 'url' | 'enum' | 'secret' | 'duration';

interface OptionBase<T> {
  readonly env: string;
  readonly kind: Kind;
  readonly default: T;
  readonly description: string;
  readonly recommended?: string;
  readonly parse: (raw: string) => T;
}

export type Option<T> = OptionBase<T>;

function fail(env: string, raw: string, expected: string): never {
  throw new ConfigError(`${env}=${JSON.stringify(raw)} is invalid: expected ${expected}`);
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

function int(env: string, def: number, description: string, opts: { min?: number; max?: number; recommended?: string } = {}): Option<number> {
  const { min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER } = opts;
  return {
    env,
    kind: 'int',
    default: def,
    description,
    recommended: opts.recommended,
    parse: (raw) => {
      if (!/^-?\d+$/.test(raw.trim())) fail(env, raw, 'an integer');
      const n = Number(raw);
      if (n < min || n > max) fail(env, raw, `an integer in [${min}, ${max}]`);
      return n;
    },
  };
}

const DURATION_UNITS_S: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** Seconds as the shortest exact `<n><unit>` (604800 → "7d", 90 → "90s"), for defaults in the docs. */
export function formatDuration(seconds: number): string {
  for (const unit of ['d', 'h', 'm'] as const) {
    const per = DURATION_UNITS_S[unit]!;
    if (seconds >= per && seconds % per === 0) return `${seconds / per}${unit}`;
  }
  return `${seconds}s`;
}

/**
 * A duration in whole seconds, written `30s`, `10m`, `12h`, `7d` or as bare seconds. Retention
 * periods are days in production and seconds in tests, so one option takes both.
 */
function duration(env: string, defS: number, description: string, opts: { minS?: number; maxS?: number; recommended?: string } = {}): Option<number> {
  const { minS = 1, maxS = 10 * 366 * 86400 } = opts;
  return {
    env,
    kind: 'duration',
    default: defS,
    description,
    recommended: opts.recommended,
    parse: (raw) => {
      const m = /^(\d+)\s*([smhd]?)$/.exec(raw.trim());
      if (!m) fail(env, raw, 'a duration such as 30s, 10m, 12h, 7d (or seconds)');
      const s = Number(m[1]) * DURATION_UNITS_S[m[2] || 's']!;
      if (s < minS || s > maxS) fail(env, raw, `a duration in [${formatDuration(minS)}, ${formatDuration(maxS)}]`);
      return s;
    },
  };
}

function num(env: string, def: number, description: string, opts: { min?: number; max?: number; recommended?: string } = {}): Option<number> {
  const { min = -Infinity, max = Infinity } = opts;
  return {
    env,
    kind: 'number',
    default: def,
    description,
    recommended: opts.recommended,
    parse: (raw) => {
      const n = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(n)) fail(env, raw, 'a number');
      if (n < min || n > max) fail(env, raw, `a number in [${min}, ${max}]`);
      return n;
    },
  };
}

function str(env: string, def: string, description: string, recommended?: string): Option<string> {
  return { env, kind: 'string', default: def, description, recommended, parse: (raw) => raw };
}

function secret(env: string, description: string, recommended?: string): Option<string | undefined> {
  return {
    env,
    kind: 'secret',
    default: undefined,
    description,
    recommended,
    parse: (raw) => {
      if (raw.length < 16) fail(env, '<hidden>', 'at least 16 characters');
      return raw;
    },
  };
}

/** A secret of any length (a password someone else chose), hidden in every message. */
function password(env: string, description: string): Option<string | undefined> {
  return { env, kind: 'secret', default: undefined, description, parse: (raw) => raw };
}

/** Boolean: true/false, 1/0, yes/no. */
function bool(env: string, def: boolean, description: string, recommended?: string): Option<boolean> {
  return {
    env,
    kind: 'bool',
    default: def,
    description,
    recommended,
    parse: (raw) => {
      const v = raw.trim().toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(v)) return true;
      if (['false', '0', 'no', 'off'].includes(v)) return false;
      fail(env, raw, 'true or false');
    },
  };
}

function url(env: string, def: string, description: string, protocols: readonly string[], recommended?: string): Option<string> {
  return {
    env,
    kind: 'url',
    default: def,
    description,
    recommended,
    parse: (raw) => {
      let u: URL;
      try {
        u = new URL(raw);
      } catch {
        fail(env, raw, `a URL (${protocols.join(' or ')})`);
      }
      if (!protocols.includes(u.protocol)) fail(env, raw, `a URL with scheme ${protocols.join(' or ')}`);
      return raw;
    },
  };
}

function list(env: string, def: readonly string[], description: string, recommended?: string): Option<readonly string[]> {
  return {
    env,
    kind: 'list',
    default: def,
    description,
    recommended,
    parse: (raw) => {
      const items = raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      if (items.length === 0) fail(env, raw, 'a comma-separated, non-empty list');
      return items;
    },
  };
}

function oneOf<const T extends string>(env: string, values: readonly T[], def: T, description: string, recommended?: string): Option<T> {
  return {
    env,
    kind: 'enum',
    default: def,
    description,
    recommended,
    parse: (raw) => {
      if (!(values as readonly string[]).includes(raw)) fail(env, raw, `one of ${values.join(', ')}`);
      return raw as T;
    },
  };
}

/** A JSON option checked at load by `check` (which throws naming the field); the raw text is kept. */
function json(env: string, def: string, description: string, check: (raw: string) => unknown): Option<string> {
  return {
    env,
    kind: 'string',
    default: def,
    description,
    parse: (raw) => {
      try {
        check(raw);
      } catch (err) {
        fail(env, raw, (err as Error).message);
      }
      return raw;
    },
  };
}

/** Three positive integers, comma-separated (the HIGH,NORMAL,LOW priority lanes). */
function weights(env: string, def: readonly [number, number, number], description: string): Option<readonly [number, number, number]> {
  return {
    env,
    kind: 'list',
    default: def,
    description,
    parse: (raw) => {
      const parts = raw.split(',').map((s) => s.trim());
      if (parts.length !== 3 || !parts.every((p) => /^\d+$/.test(p) && Number(p) >= 1 && Number(p) <= 1_000_000))
        fail(env, raw, 'three positive integers HIGH,NORMAL,LOW (e.g. 60,30,10)');
      return parts.map(Number) as unknown as readonly [number, number, number];
    },
  };
}

const port = (env: string, def: number, what: string): Option<number> =>
  int(env, def, `TCP port of ${what} (HTTP API, /healthz, /readyz, /metrics).`, { min: 0, max: 65535 });

export const OPTIONS = {
  // ── connections ──────────────────────────────────────────────────────────────────────────
  kafkaBrokers: list('REACH_KAFKA_BROKERS', ['127.0.0.1:9092'], 'Kafka bootstrap brokers, comma-separated host:port.', '3+ brokers'),
  schemaRegistryUrl: url(
    'REACH_SCHEMA_REGISTRY_URL',
    'http://127.0.0.1:8081',
    'Confluent-compatible schema registry. Locally `reach up` runs the development registry here when none answers. Basic auth as userinfo (https://user:pass@host), a private CA through REACH_CA_FILE.',
    ['http:', 'https:'],
    'a replicated Confluent/Apicurio/Karapace registry',
  ),
  databaseUrl: url(
    'REACH_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/reach',
    'PostgreSQL for durable records (message state, timeline, dead letters, quotas, grants). Password and TLS in the URL: postgres://user:pass@host/db?sslmode=verify-full&sslrootcert=/path/ca.pem.',
    ['postgres:', 'postgresql:'],
  ),
  redisUrl: url(
    'REACH_REDIS_URL',
    'redis://127.0.0.1:6379/0',
    'Redis for hot, expiring state (leases, idempotency keys, rate buckets, replay buffers). Password and TLS in the URL: redis://:pass@host/0, rediss://user:pass@host:6380/0?ca_file=/path/ca.pem.',
    ['redis:', 'rediss:'],
    'Redis with append-only persistence',
  ),
  // ── transport security (docs/transport-security.md) ──────────────────────────────────────
  kafkaSaslMechanism: oneOf(
    'REACH_KAFKA_SASL_MECHANISM',
    ['', 'plain', 'scram-sha-256', 'scram-sha-512'],
    '',
    'SASL mechanism for Kafka; empty = no SASL. Needs REACH_KAFKA_SASL_USERNAME and REACH_KAFKA_SASL_PASSWORD.',
    'scram-sha-512 (with REACH_KAFKA_TLS)',
  ),
  kafkaSaslUsername: str('REACH_KAFKA_SASL_USERNAME', '', 'Kafka SASL user name.'),
  kafkaSaslPassword: password('REACH_KAFKA_SASL_PASSWORD', 'Kafka SASL password (never logged).'),
  kafkaTls: bool('REACH_KAFKA_TLS', false, 'Connect to the Kafka brokers over TLS (the broker certificate is verified).', 'true'),
  kafkaCaFile: str(
    'REACH_KAFKA_CA_FILE',
    '',
    "PEM file of the CA that signed the brokers' certificates, for REACH_KAFKA_TLS; empty = REACH_CA_FILE, else the system store.",
  ),
  caFile: str(
    'REACH_CA_FILE',
    '',
    'PEM bundle of extra CAs this process trusts for its outgoing TLS connections: schema registry, Redis (rediss://), the console to the services, `reach` to the stack. Empty = the system store (NODE_EXTRA_CA_CERTS also works).',
  ),
  tlsCert: str(
    'REACH_TLS_CERT',
    '',
    "PEM certificate (chain) file: when set with REACH_TLS_KEY, the HTTP port (and the dispatcher's WebSocket) serves HTTPS/WSS only.",
    'set in production',
  ),
  tlsKey: str('REACH_TLS_KEY', '', 'PEM private key file of REACH_TLS_CERT.', 'set in production'),
  tlsClientCa: str(
    'REACH_TLS_CLIENT_CA',
    '',
    'PEM CA file for mutual TLS of admin calls: when set (with REACH_TLS_CERT), a request carrying the admin token must also present a client certificate signed by this CA, else 401 (1003). Agents need no certificate.',
    'set when admin calls come over a network',
  ),
  tlsClientCert: str(
    'REACH_TLS_CLIENT_CERT',
    '',
    'PEM client certificate file `reach` (and the test kit) presents to the services, for mutual TLS of admin calls (REACH_TLS_CLIENT_CA).',
  ),
  tlsClientKey: str('REACH_TLS_CLIENT_KEY', '', 'PEM private key file of REACH_TLS_CLIENT_CERT.'),
  // ── process ──────────────────────────────────────────────────────────────────────────────
  logLevel: oneOf('REACH_LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info', 'Minimum level of the JSON logs.'),
  httpHost: str('REACH_HTTP_HOST', '127.0.0.1', 'Interface every service binds its HTTP port to.', '0.0.0.0 in containers'),
  instanceId: str('REACH_INSTANCE_ID', '', 'Identity of this process in logs, presence and client ids; empty = <service>-<hostname>-<pid>.'),
  memberFile: str(
    'REACH_MEMBER_FILE',
    '',
    "File where this process keeps its Kafka consumer-group member ids, so a crash is followed by an immediate LeaveGroup for them (by `reach up`'s supervisor, or by the process when it starts again) instead of a 6 s session wait. Empty = off. `reach up` sets it per process; under an orchestrator, a path on a volume that survives restarts.",
    '.reach/run/<process>.members.json (set by reach up)',
  ),
  shutdownTimeoutMs: int('REACH_SHUTDOWN_TIMEOUT_MS', 15000, 'How long a graceful shutdown may take before the process exits anyway.', { min: 100 }),
  otlpEndpoint: url(
    'REACH_OTLP_ENDPOINT',
    '',
    'OpenTelemetry OTLP/HTTP (JSON) endpoint for per-stage spans, e.g. http://collector:4318 (`/v1/traces` is appended unless given). Empty = tracing off: the OpenTelemetry SDK is not even loaded; W3C traceparent is still carried end to end. OTEL_BSP_* variables tune the batch exporter.',
    ['http:', 'https:'],
    'your collector (e.g. http://otel-collector:4318) when you run one',
  ),
  adminToken: secret(
    'REACH_ADMIN_TOKEN',
    'Bearer token for admin endpoints. Unset: `reach up` generates one into .reach/admin-token.',
    'a random 32+ byte value from a secret store',
  ),
  // ── topics ───────────────────────────────────────────────────────────────────────────────
  topicPartitions: int('REACH_TOPIC_PARTITIONS', 6, 'Partitions of each pipeline topic; bounds the useful replicas of each consuming service.', {
    min: 1,
    max: 1000,
    recommended: '12–48',
  }),
  topicReplicationFactor: int('REACH_TOPIC_REPLICATION_FACTOR', 1, 'Replication factor of every Agent-Reach topic.', { min: 1, max: 7, recommended: '3' }),
  // ── limits ───────────────────────────────────────────────────────────────────────────────
  maxPayloadBytes: int('REACH_MAX_PAYLOAD_BYTES', 262144, 'Largest accepted payload (R-D10); larger is rejected with 4102.', {
    min: 1024,
    max: 900 * 1024,
  }),
  // ── auth ───────────────────────────────────────────────────────────────────────────────
  tokenSecret: secret(
    'REACH_TOKEN_SECRET',
    'HMAC key that signs agent tokens; registry, ingress and dispatcher share it. With REACH_TOKEN_SECRETS set it is the legacy key: it only verifies tokens without a kid. Unset: `reach up` generates one into .reach/token-secret.',
    'a random 32+ byte value from a secret store',
  ),
  tokenSecrets: {
    env: 'REACH_TOKEN_SECRETS',
    kind: 'secret',
    default: undefined as string | undefined,
    description:
      'Signing key ring `kid1:secret1,kid2:secret2` (first = current: signs new tokens; the others still verify). Tokens carry the kid; tokens without one verify against REACH_TOKEN_SECRET. Takes precedence over REACH_TOKEN_SECRET for signing.',
    recommended: 'two keys during a rotation, one otherwise',
    parse: (raw: string) => {
      try {
        parseTokenKeys(raw);
      } catch (err) {
        throw new ConfigError(`REACH_TOKEN_SECRETS is invalid: ${(err as Error).message}`);
      }
      return raw;
    },
  } satisfies Option<string | undefined>,
  tokenSecretsFile: str(
    'REACH_TOKEN_SECRETS_FILE',
    '',
    'File holding the key ring in the REACH_TOKEN_SECRETS format (commas or one key per line); re-read every REACH_TOKEN_SECRETS_RELOAD_MS, so a rotation needs no restart. Wins over REACH_TOKEN_SECRETS.',
    'a mounted Secret',
  ),
  tokenSecretsReloadMs: int('REACH_TOKEN_SECRETS_RELOAD_MS', 5000, 'How often REACH_TOKEN_SECRETS_FILE is re-read.', { min: 100, max: 3_600_000 }),
  tokenTtlS: int(
    'REACH_TOKEN_TTL_S',
    3600,
    'Lifetime of an agent token (R-C2); the SDK renews it at 80 % by re-registering, on its open connection. Seconds-long values are for tests.',
    { min: 5, max: 7 * 86400 },
  ),
  enrollmentToken: secret('REACH_ENROLLMENT_TOKEN', 'When set, POST /v1/agents needs it (or the admin token) as its bearer token.', 'set in production'),
  // ── registry ─────────────────────────────────────────────────────────────────────────────
  agentTtlS: int('REACH_AGENT_TTL_S', 60, 'Default lease TTL of an agent that does not give ttl_s (R-A4); heartbeats are due every TTL/2.', {
    min: 2,
    max: 3600,
  }),
  missedHeartbeats: int('REACH_MISSED_HEARTBEATS', 2, 'Consecutive missed heartbeats before an agent is OFFLINE (R-A4).', { min: 1, max: 10 }),
  cooldownQos: num(
    'REACH_COOLDOWN_QOS',
    0.3,
    'QoS score below which an agent enters COOLDOWN: no new work (R-A5). Judged as if its slots were free: a full agent is held for by the routers (saturation), not put in COOLDOWN.',
    { min: 0, max: 1 },
  ),
  maxCapabilities: int('REACH_MAX_CAPABILITIES', 10, 'More capabilities than this in one descriptor are refused with 4104 (R-A2).', { min: 1, max: 1000 }),
  capabilityDictionary: str('REACH_CAPABILITY_DICTIONARY', '', 'Optional comma-separated allow-list of capability names; unknown names are refused (R-A2).'),
  // ── routing ──────────────────────────────────────────────────────────────────────────────
  region: str('REACH_REGION', '', 'Region of this router instance, for the locality term of scoring (R-B3).'),
  weightPriority: num('REACH_ROUTE_WEIGHT_PRIORITY', 0.4, 'Scoring weight of the agent priority/weight term (R-B3).', { min: 0, max: 1 }),
  weightHealth: num('REACH_ROUTE_WEIGHT_HEALTH', 0.3, 'Scoring weight of recent success rate (R-B3).', { min: 0, max: 1 }),
  weightLoad: num('REACH_ROUTE_WEIGHT_LOAD', 0.2, 'Scoring weight of free capacity, 1 − load/max_concurrency (R-B3).', { min: 0, max: 1 }),
  weightLocality: num('REACH_ROUTE_WEIGHT_LOCALITY', 0.1, 'Scoring weight of being in the same region (R-B3).', { min: 0, max: 1 }),
  routeJitter: num('REACH_ROUTE_JITTER', 0.05, 'Largest random jitter added to a score (R-B3).', { min: 0, max: 1 }),
  hotspotCandidates: int('REACH_ROUTE_HOTSPOT_CANDIDATES', 20, 'Above this many candidates, pick at random among the best few (R-B4).', { min: 1 }),
  hotspotTopK: int('REACH_ROUTE_TOP_K', 5, 'How many of the best candidates the anti-hotspot rule picks from (R-B4).', { min: 1 }),
  saturation: num('REACH_SATURATION', 0.8, 'Load rate above which an agent counts as saturated; all candidates saturated → wait or 2002 (R-B7).', {
    min: 0.05,
    max: 1,
  }),
  saturationRetryMs: int('REACH_SATURATION_RETRY_MS', 250, 'How long a message held for saturation waits before it is routed again.', { min: 10, max: 60000 }),
  rulesFile: str(
    'REACH_RULES_FILE',
    '',
    'ReachRule file (YAML, R-B11; see docs/rules.md) the router compiles at start and reloads within 1 s of a change; empty = no rules. `reach up` uses .reach/rules.yaml.',
    'a mounted ConfigMap, e.g. /etc/reach/rules.yaml',
  ),
  stickyTtlS: int('REACH_STICKY_TTL_S', 1800, 'How long a session stays bound to its agent without traffic (R-B6).', { min: 1 }),
  // ── circuit breakers and auto-eject (R-D8, R-D13; @reach/circuits) ─────────────────
  circuitErrorRate: num('REACH_CIRCUIT_ERROR_RATE', 0.5, "A target agent's circuit opens when its failure rate over the window is above this (R-D8).", {
    min: 0,
    max: 1,
  }),
  circuitWindowMs: int('REACH_CIRCUIT_WINDOW_MS', 60000, 'Rolling window of the circuit failure rate (R-D8).', { min: 60 }),
  circuitMinVolume: int('REACH_CIRCUIT_MIN_VOLUME', 10, 'Fewer outcomes than this in the window never open a circuit.', { min: 1 }),
  circuitOpenMs: int('REACH_CIRCUIT_OPEN_MS', 120000, 'How long an opened circuit stays OPEN before one half-open probe is let through (R-D8).', {
    min: 100,
  }),
  circuitProbeTimeoutMs: int('REACH_CIRCUIT_PROBE_TIMEOUT_MS', 30000, 'A half-open probe without an outcome after this long may be sent again by any router.', {
    min: 100,
  }),
  circuitRefreshMs: int('REACH_CIRCUIT_REFRESH_MS', 500, 'How often a router refreshes its local map of open circuits from Redis (at most 1 s).', {
    min: 50,
    max: 1000,
  }),
  ejectSuccessRate: num('REACH_EJECT_SUCCESS_RATE', 0.5, 'An agent whose success rate over the eject window is below this is ejected from candidacy (R-D13).', {
    min: 0,
    max: 1,
  }),
  ejectWindowMs: int('REACH_EJECT_WINDOW_MS', 300000, 'The "recent" window of auto-eject (R-D13: 5 min).', { min: 300 }),
  ejectMinVolume: int('REACH_EJECT_MIN_VOLUME', 20, 'Fewer outcomes than this in the eject window never eject an agent.', { min: 1 }),
  ejectProbes: int('REACH_EJECT_PROBES', 3, 'Successful half-open probes in a row that re-admit an ejected agent.', { min: 1, max: 100 }),
  // ── delivery ─────────────────────────────────────────────────────────────────────────────
  ackTimeoutMs: int('REACH_ACK_TIMEOUT_MS', 10000, 'How long a delivery waits for its ack before the attempt fails (the dispatch part of the budget, R-D2).', {
    min: 100,
  }),
  // ── retries and time budgets (R-D2, R-D3) ──────────────────────────────────────────
  retryBaseMs: int('REACH_RETRY_BASE_MS', 200, 'Backoff base: retry n waits min(base·2^n, max)·(0.8…1.2) (R-D3).', { min: 1, max: 3_600_000 }),
  retryMaxMs: int('REACH_RETRY_MAX_MS', 4000, 'Largest backoff before jitter (R-D3).', { min: 1, max: 3_600_000 }),
  maxRetries: int('REACH_MAX_RETRIES', 3, 'Retries after the first attempt: a message is attempted at most 1 + this many times (R-D3).', {
    min: 0,
    max: 100,
  }),
  retryPolicy: json(
    'REACH_RETRY_POLICY',
    '{}',
    'Per message_type retry overrides, JSON: {"task_request":{"max_retries":5,"base_ms":500,"max_ms":8000}}.',
    parseRetryPolicyJson,
  ),
  budgetMs: int('REACH_BUDGET_MS', 45000, 'End-to-end time budget of a message: ingest + route + dispatch + retries (R-D2); past it → DEAD 3005.', {
    min: 100,
  }),
  budgetPolicy: json(
    'REACH_BUDGET_POLICY',
    '{"task_request":30000,"health_check":5000}',
    'Per message_type end-to-end budgets in ms, JSON; other types use REACH_BUDGET_MS (R-D2).',
    parseBudgetPolicyJson,
  ),
  deadlineSweepMs: int(
    'REACH_DEADLINE_SWEEP_MS',
    100,
    'How soon after one another each dispatcher may look for deliveries past their ack deadline (3002): sweeps run when the next deadline is due, at least this far apart, and at most 1 s apart when nothing is due.',
    {
      min: 10,
      max: 10000,
    },
  ),
  stuckSweepMs: int('REACH_STUCK_SWEEP_MS', 5000, 'How often the retry-scheduler declares DEAD (3005) messages stuck past their budget.', {
    min: 100,
    max: 600000,
  }),
  stuckGraceMs: int('REACH_STUCK_GRACE_MS', 2000, 'How long past its budget a non-terminal message may stay before the stuck sweep ends it.', {
    min: 0,
  }),
  replayTtlS: int('REACH_REPLAY_TTL_S', 1800, 'How long un-acked deliveries stay replayable for a reconnecting agent (R-C6, ≥ 15 min).', { min: 900 }),
  wsPingIntervalMs: int('REACH_WS_PING_INTERVAL_MS', 15000, 'Application ping interval on agent WebSockets (R-C3).', { min: 100 }),
  wsIdleTimeoutMs: int('REACH_WS_IDLE_TIMEOUT_MS', 30000, 'A WebSocket silent this long is closed with 4008 (R-C3).', { min: 200 }),
  wsReconnectGraceMs: int(
    'REACH_WS_RECONNECT_GRACE_MS',
    2000,
    'How long an agent whose socket died may take to reconnect and get its un-acked deliveries replayed; after that they fail over to another candidate at once (1002) instead of waiting for their ack deadline (R-C12: traffic flows on the other agents within 3 s).',
    { min: 0 },
  ),
  wsAuthTimeoutMs: int('REACH_WS_AUTH_TIMEOUT_MS', 10000, 'A socket that has not sent hello within this time is closed (R-C5).', { min: 100 }),
  wsMaxFrameBytes: int('REACH_WS_MAX_FRAME_BYTES', 524288, 'Largest inbound WebSocket frame; larger closes with 4013 (R-C5).', { min: 1024 }),
  wsMaxBufferedBytes: int(
    'REACH_WS_MAX_BUFFERED_BYTES',
    4194304,
    'Outbound buffer limit per connection (R-C5): deliveries are sent only while less than half of it waits unread, so it holds at most half plus one frame; a control frame sent while more than the limit waits closes the connection as slow (1013).',
    { min: 65536 },
  ),
  wsSlowAfterMs: int(
    'REACH_WS_SLOW_AFTER_MS',
    3000,
    'An agent whose outbound buffer stays over half of REACH_WS_MAX_BUFFERED_BYTES without draining for this long, while deliveries wait for it, is closed as slow (1013); its un-acked deliveries are replayed on reconnect or fail over after the grace (R-C5).',
    { min: 100 },
  ),
  httpPushTimeoutMs: int('REACH_HTTP_PUSH_TIMEOUT_MS', 15000, 'Timeout of an HTTP push to an agent endpoint (R-C8).', { min: 100 }),
  httpPushIdleMs: int('REACH_HTTP_PUSH_IDLE_MS', 60000, 'Idle time of pooled keep-alive connections to agent endpoints (R-C8).', { min: 1000 }),
  priorityWeights: weights(
    'REACH_PRIORITY_WEIGHTS',
    [60, 30, 10],
    'Weights of the HIGH,NORMAL,LOW lanes in which deliveries waiting for a free slot of an agent (max_concurrency) are served (R-D9): smooth weighted round robin over the non-empty lanes, so LOW is never starved.',
  ),
  // ── ingress ──────────────────────────────────────────────────────────────────────────────
  idempotencyTtlS: int(
    'REACH_IDEMPOTENCY_TTL_S',
    86400,
    'How long an idempotency key is remembered in Redis (R-D5, 300 s … 24 h); PostgreSQL keeps it as the fallback.',
    { min: 300, max: 30 * 86400 },
  ),
  maxWaitMs: int('REACH_MAX_WAIT_MS', 60000, 'Largest ?wait_ms a sender may ask for on POST /v1/messages (and longest a blocking A2A SendMessage waits).', {
    min: 0,
  }),
  a2aPublicUrl: str(
    'REACH_A2A_PUBLIC_URL',
    '',
    "Base URL the A2A Agent Cards advertise (docs/a2a.md); empty: the request's own scheme and Host.",
    'the public https address of ingress behind a load balancer',
  ),
  a2aProbeMs: int(
    'REACH_A2A_PROBE_MS',
    10000,
    'How often the registry probes each A2A agent (its Agent Card and a GetTask); a probe that succeeds renews its lease, so one that stops answering goes OFFLINE at its lease deadline (docs/a2a.md).',
    { min: 500 },
  ),
  a2aStreamMaxMs: int(
    'REACH_A2A_STREAM_MAX_MS',
    600000,
    'Longest one A2A SSE response lasts; the client then resumes with Last-Event-ID or SubscribeToTask, losing nothing (docs/a2a.md).',
    { min: 1000 },
  ),
  quotaDefaultRate: num(
    'REACH_QUOTA_DEFAULT_RATE',
    100,
    'Messages per second a producer may submit without an override (R-D7); PUT /v1/quotas/{agent_id} or `reach quota set` overrides it per agent.',
    { min: 0.001, max: 1_000_000 },
  ),
  quotaDefaultBurst: int(
    'REACH_QUOTA_DEFAULT_BURST',
    200,
    'Token-bucket size of the default quota: how many messages a producer may send at once after idling.',
    {
      min: 1,
      max: 10_000_000,
    },
  ),
  quotaRefreshMs: int(
    'REACH_QUOTA_REFRESH_MS',
    500,
    'How often each ingress instance reloads quota overrides from PostgreSQL (at most 1 s: changes apply everywhere within it).',
    {
      min: 50,
      max: 1000,
    },
  ),
  // ── access control (issue #13: least privilege) ───────────────────────────────────────────
  readsSameDomain: bool(
    'REACH_READS_SAME_DOMAIN',
    false,
    "Let every agent of a message's producer domain read the message, its timeline and its trace (GET /v1/messages/…, /v1/traces/…); off: only the admin, the producer and the agents that handled it or were targeted. See docs/access-control.md.",
  ),
  authFailureLimit: int(
    'REACH_AUTH_FAILURE_LIMIT',
    100,
    'Failed authentications (HTTP 401, WebSocket hello refused) one source address may cause per window on one service instance; past it every credentialed request from that address gets 429 4129 RATE_LIMITED (details.reason auth_failures) with Retry-After until the window ends (brute-force protection).',
    { min: 1, max: 1_000_000 },
  ),
  authFailureWindowS: int('REACH_AUTH_FAILURE_WINDOW_S', 60, 'The window of REACH_AUTH_FAILURE_LIMIT, in seconds.', { min: 1, max: 86400 }),
  dlqFloodSample: int(
    'REACH_DLQ_FLOOD_SAMPLE',
    3,
    'Kafka-ingress refusals kept in full per producer, error code and second; the rest of that second are folded into one dead letter with their count (issue #13: refusals do not flood the DLQ).',
    { min: 1, max: 10_000 },
  ),
  // ── tracker ──────────────────────────────────────────────────────────────────────────────
  trackerBatchSize: int('REACH_TRACKER_BATCH_SIZE', 1000, 'Status events written to PostgreSQL per batch.', { min: 1, max: 20000 }),
  // ── retention (issue 26: bounded storage; docs/storage.md) ──────────────────────────────
  retentionMessages: duration(
    'REACH_RETENTION_MESSAGES',
    7 * 86400,
    'How long the read model (PostgreSQL `messages`, each row with its timeline) keeps a message, counted from its created_at. The tracker drops whole partitions once all their rows are older (never row by row), so a message stays up to one REACH_PARTITION_INTERVAL longer.',
  ),
  partitionInterval: duration(
    'REACH_PARTITION_INTERVAL',
    86400,
    'Time span of one partition of `messages` (and of `message_events`, which holds the timelines written before migration 012) (aligned to the UTC epoch: 1d = UTC days). The tracker creates the current one and three ahead. Seconds-long values are for tests; change it only on an empty read model or expect a gap in the DEFAULT partition until the old partitions age out.',
    { minS: 5, maxS: 31 * 86400 },
  ),
  retentionDeadLetters: duration(
    'REACH_RETENTION_DEAD_LETTERS',
    30 * 86400,
    'How long the dead-letter service keeps a dead letter (any status), counted from when it was stored; older ones are deleted in small batches.',
  ),
  retentionAudit: duration(
    'REACH_RETENTION_AUDIT',
    400 * 86400,
    'How long the registry keeps the audit trail of admin actions (`audit_log`); older rows are deleted in small batches.',
  ),
  // ── dead-letter ──────────────────────────────────────────────────────────────────────────
  dlqStaleAfterS: int(
    'REACH_DLQ_STALE_AFTER_S',
    86400,
    'A dead letter PARKED longer than this with no consumer becomes DEAD and raises an alert (R-D11, 24 h).',
    { min: 1 },
  ),
  // ── console ──────────────────────────────────────────────────────────────────────────────
  consoleUpstreams: json(
    'REACH_CONSOLE_UPSTREAMS',
    '{}',
    'Base URLs the web console proxies to and checks, JSON by service, e.g. {"ingress":"http://ingress:7410"}; a service not named is reached on REACH_HTTP_HOST and its REACH_*_PORT.',
    (raw) => {
      const o = JSON.parse(raw) as unknown;
      if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new Error('a JSON object of service name → URL');
      const names = ['ingress', 'registry', 'dispatcher', 'tracker', 'dead-letter', 'router', 'retry-scheduler'];
      for (const [k, v] of Object.entries(o)) {
        if (!names.includes(k)) throw new Error(`${k} is not a service (${names.join(', ')})`);
        if (typeof v !== 'string' || !/^https?:\/\/[^/]/.test(v)) throw new Error(`${k}: an http(s) URL`);
      }
    },
  ),
  // ── ports ────────────────────────────────────────────────────────────────────────────────
  ingressPort: port('REACH_INGRESS_PORT', 7410, 'the ingress service'),
  registryPort: port('REACH_REGISTRY_PORT', 7411, 'the registry service'),
  dispatcherPort: port('REACH_DISPATCHER_PORT', 7412, 'the dispatcher (also the WebSocket endpoint /v1/connect)'),
  trackerPort: port('REACH_TRACKER_PORT', 7413, 'the tracker service'),
  deadLetterPort: port('REACH_DEAD_LETTER_PORT', 7414, 'the dead-letter service'),
  routerPort: port('REACH_ROUTER_PORT', 7415, 'the router service'),
  retrySchedulerPort: port('REACH_RETRY_SCHEDULER_PORT', 7416, 'the retry-scheduler service'),
  consolePort: port('REACH_CONSOLE_PORT', 7420, 'the web console (the page and its /api proxy)'),
  devSchemaRegistryPort: port('REACH_DEV_SCHEMA_REGISTRY_PORT', 8081, 'the development schema registry that `reach up` runs when no registry answers'),
} as const;

export type Options = typeof OPTIONS;
export type OptionKey = keyof Options;
/** The value type of one option: its default's type (a secret without a default: string | undefined). */
export type OptionValue<P extends OptionKey> = Options[P]['default'] extends infer D ? (D extends undefined ? string | undefined : D) : never;
/** Stage 2, with defaults: every asked option has a value of its declared type. */
export type ConfigOf<K extends OptionKey> = {
  readonly [P in K]: OptionValue<P>;
};
/** Stage 3, resolved: the required options (R) are known to be set, so their types exclude undefined. */
export type ResolvedConfig<K extends OptionKey, R extends K = never> = ConfigOf<K> & { readonly [P in R]: Exclude<OptionValue<P>, undefined> };

const knownEnv = new Set(Object.values(OPTIONS).map((o) => o.env));

/** Names outside this list are not options but are allowed in the environment. */
const NON_OPTION_ENV = new Set(['REACH_HOME']);

/**
 * Options that were removed but are still accepted, with why: starting with one set only logs
 * a warning, so a deployment that copied it from the reference keeps starting.
 */
export const DEPRECATED_ENV: Readonly<Record<string, string>> = {
  // The parts of R-D2's budget were documented but never read (issue #30): the end-to-end
  // budget (REACH_BUDGET_MS, REACH_BUDGET_POLICY) and the ack timeout (REACH_ACK_TIMEOUT_MS) are
  // what bound a message; the parts were only a breakdown of the defaults.
  REACH_BUDGET_INGEST_MS: 'it never had an effect: REACH_BUDGET_MS (per type REACH_BUDGET_POLICY) bounds a message end to end',
  REACH_BUDGET_ROUTE_MS: 'it never had an effect: REACH_BUDGET_MS (per type REACH_BUDGET_POLICY) bounds a message end to end',
  REACH_BUDGET_DISPATCH_MS: 'it never had an effect: REACH_ACK_TIMEOUT_MS bounds one attempt, REACH_BUDGET_MS the message',
  REACH_BUDGET_RETRIES_MS: 'it never had an effect: REACH_BUDGET_MS (per type REACH_BUDGET_POLICY) bounds a message end to end',
};

function editDistance(a: string, b: string): number {
  const dp = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = dp[0]!;
    dp[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = dp[j]!;
      dp[j] = Math.min(dp[j]! + 1, dp[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return dp[b.length]!;
}

/** Rejects `REACH_*` variables that are no option at all (typos must not silently fall back to defaults). */
export function checkUnknownEnv(env: Readonly<Record<string, string | undefined>>): void {
  const unknown = Object.keys(env).filter((k) => k.startsWith('REACH_') && !knownEnv.has(k) && !NON_OPTION_ENV.has(k) && !(k in DEPRECATED_ENV));
  if (unknown.length === 0) return;
  const hints = unknown.map((k) => {
    let best = '';
    let bestD = Infinity;
    for (const known of knownEnv) {
      const d = editDistance(k, known);
      if (d < bestD) [best, bestD] = [known, d];
    }
    return bestD <= 4 ? `${k} (did you mean ${best}?)` : k;
  });
  throw new ConfigError(`unknown configuration variable(s): ${hints.join(', ')}`);
}

/** This process's environment: the one place service code reads `process.env`. */
export function processEnv(): Readonly<Record<string, string | undefined>> {
  return process.env;
}

/** Stage 1: the `REACH_*` variables as set (an empty one counts as unset), and the warnings about them. */
export interface RawEnv {
  readonly vars: Readonly<Record<string, string>>;
  /** One line per deprecated variable that is set. */
  readonly warnings: readonly string[];
}

/** Stage 1: keeps the set `REACH_*` variables; throws ConfigError on unknown names. */
export function readRawEnv(env: Readonly<Record<string, string | undefined>>): RawEnv {
  checkUnknownEnv(env);
  const vars: Record<string, string> = {};
  const warnings: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('REACH_') || value === undefined || value === '') continue;
    const why = DEPRECATED_ENV[name];
    if (why !== undefined) warnings.push(`${name} is deprecated and ignored: ${why}`);
    else vars[name] = value;
  }
  return { vars, warnings };
}

/** Stage 2: the asked options parsed, or their defaults. Throws ConfigError naming every bad variable. */
export function withDefaults<K extends OptionKey>(keys: readonly K[], raw: RawEnv): ConfigOf<K> {
  const out: Record<string, unknown> = {};
  const errors: string[] = [];
  for (const key of keys) {
    const opt = OPTIONS[key] as Option<unknown>;
    const value = raw.vars[opt.env];
    try {
      out[key] = value === undefined ? opt.default : opt.parse(value);
    } catch (err) {
      errors.push(err instanceof Error ? err.message : String(err));
    }
  }
  if (errors.length > 0) throw new ConfigError(`invalid configuration:\n  ${errors.join('\n  ')}`);
  return out as ConfigOf<K>;
}

/**
 * Two or more options that only work together. `check` gets their values and returns what is
 * wrong (naming every variable involved), or undefined.
 */
export interface Dependency {
  readonly keys: readonly OptionKey[];
  /** The rule, in variable names, and why it must hold (for docs/configuration.md). */
  readonly rule: string;
  readonly why: string;
  readonly check: (v: { readonly [P in OptionKey]: OptionValue<P> }) => string | undefined;
}

const envOf = (key: OptionKey) => OPTIONS[key].env;

/** An option's value as its variable would be written (durations as 30s, 1d). */
function shown(key: OptionKey, value: unknown): string {
  return OPTIONS[key].kind === 'duration' ? formatDuration(value as number) : String(value);
}

/** a < b (strict) or a ≤ b: two options of the same unit. */
function ordered(a: OptionKey, b: OptionKey, strict: boolean, why: string): Dependency {
  return {
    keys: [a, b],
    rule: `${envOf(a)} ${strict ? '<' : '≤'} ${envOf(b)}`,
    why,
    check: (v) => {
      const x = v[a] as number;
      const y = v[b] as number;
      if (strict ? x < y : x <= y) return undefined;
      return `${envOf(a)}=${shown(a, x)} must be ${strict ? '<' : '≤'} ${envOf(b)}=${shown(b, y)}: ${why}`;
    },
  };
}

/** The options checked together at load (issue #30); each has a unit test with a valid and an invalid combination. */
export const DEPENDENCIES: readonly Dependency[] = [
  ordered('ackTimeoutMs', 'budgetMs', false, 'one attempt cannot wait for its ack longer than the whole message may take (R-D2)'),
  ordered('retryBaseMs', 'retryMaxMs', false, 'the first backoff would already be capped by the largest (R-D3)'),
  ordered('retryMaxMs', 'budgetMs', true, 'a backoff as long as the whole budget ends every retry DEAD 3005 before it is attempted (R-D2, R-D3)'),
  ordered('deadlineSweepMs', 'ackTimeoutMs', false, 'a missed ack would be noticed more than one ack timeout late (3002)'),
  ordered('wsPingIntervalMs', 'wsIdleTimeoutMs', true, 'a healthy but quiet socket would be closed as idle (4008) between two pings (R-C3)'),
  ordered('maxPayloadBytes', 'wsMaxFrameBytes', true, 'a frame carrying the largest accepted payload would be refused with 4013 (R-C5, R-D10)'),
  ordered(
    'partitionInterval',
    'retentionMessages',
    false,
    'the read model drops whole partitions, so it cannot keep messages for less than one partition (storage.md)',
  ),
  {
    keys: ['a2aProbeMs', 'agentTtlS', 'missedHeartbeats'],
    rule: 'REACH_A2A_PROBE_MS < REACH_MISSED_HEARTBEATS × REACH_AGENT_TTL_S / 2 (the lease, in ms)',
    why: "a probe renews an A2A agent's lease, so an agent without ttl_s would go OFFLINE between two probes (docs/a2a.md)",
    check: (v) => {
      const leaseMs = (v.missedHeartbeats * v.agentTtlS * 1000) / 2;
      if (v.a2aProbeMs < leaseMs) return undefined;
      return `REACH_A2A_PROBE_MS=${v.a2aProbeMs} must be < the lease of REACH_AGENT_TTL_S=${v.agentTtlS} (REACH_MISSED_HEARTBEATS=${v.missedHeartbeats} × TTL/2 = ${leaseMs} ms): a probe renews an A2A agent's lease, so an agent without ttl_s would go OFFLINE between two probes (docs/a2a.md)`;
    },
  },
];

/**
 * Stage 3: checks the dependencies whose options were all asked for (every dependency is read
 * whole by the service it matters to), then that the required options are set. Throws
 * ConfigError naming the variables; `service` names the process in the message about required
 * options.
 */
export function resolveConfig<K extends OptionKey, R extends K = never>(
  config: ConfigOf<K>,
  required: readonly R[] = [],
  service?: string,
): ResolvedConfig<K, R> {
  const asked = config as Partial<Record<OptionKey, unknown>>;
  const errors: string[] = [];
  for (const dep of DEPENDENCIES) {
    if (!dep.keys.every((k) => k in asked)) continue;
    const problem = dep.check(asked as Parameters<Dependency['check']>[0]);
    if (problem !== undefined) errors.push(problem);
  }
  if (errors.length > 0) throw new ConfigError(`inconsistent configuration:\n  ${errors.join('\n  ')}`);
  const unset = required.filter((k) => asked[k] === undefined || asked[k] === '');
  if (unset.length > 0) throw new ConfigError(`${unset.map((k) => OPTIONS[k].env).join(', ')} must be set${service ? ` for ${service}` : ''}`);
  return config as ResolvedConfig<K, R>;
}

/**
 * All three stages at once: loads and validates the options a process uses. Throws ConfigError
 * naming every bad variable. Deprecation warnings are dropped (runService logs them).
 */
export function loadConfig<K extends OptionKey>(keys: readonly K[], env: Readonly<Record<string, string | undefined>>): ConfigOf<K> {
  const raw = readRawEnv(env);
  return resolveConfig(withDefaults(keys, raw));
}

/** Rows for the generated config reference, docs/configuration.md. */
export function describeOptions(): Array<{ env: string; default: string; recommended: string; description: string }> {
  return Object.values(OPTIONS).map((o: Option<unknown>) => ({
    env: o.env,
    default:
      o.default === undefined
        ? '(unset)'
        : Array.isArray(o.default)
          ? o.default.join(',')
          : o.kind === 'duration'
            ? formatDuration(o.default as number)
            : String(o.default),
    recommended: o.recommended ?? '',
    description: o.description,
  }));
}
