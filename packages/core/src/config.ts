/**
 * Typed configuration from `REACH_*` environment variables.
 *
 * Every option of every service is declared once in OPTIONS with its default (from SPEC), the
 * recommended production value and its effect; the README's config reference is generated from
 * this list. A service asks for the keys it uses; loading validates them, rejects unknown
 * `REACH_*` names (with a suggestion) and names the failing variable in its message.
 * Loaders take an env map: nothing reads `process.env` deep inside.
 */

type Kind = 'string' | 'int' | 'bool' | 'list' | 'url' | 'enum' | 'secret';

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

const port = (env: string, def: number, what: string): Option<number> =>
  int(env, def, `TCP port of ${what} (HTTP API, /healthz, /readyz, /metrics).`, { min: 0, max: 65535 });

export const OPTIONS = {
  // ── connections ──────────────────────────────────────────────────────────────────────────
  kafkaBrokers: list('REACH_KAFKA_BROKERS', ['127.0.0.1:9092'], 'Kafka bootstrap brokers, comma-separated host:port.', '3+ brokers'),
  schemaRegistryUrl: url(
    'REACH_SCHEMA_REGISTRY_URL',
    'http://127.0.0.1:8081',
    'Confluent-compatible schema registry. Locally `reach up` runs the development registry here when none answers.',
    ['http:', 'https:'],
    'a replicated Confluent/Apicurio/Karapace registry',
  ),
  databaseUrl: url(
    'REACH_DATABASE_URL',
    'postgres://postgres@127.0.0.1:5432/reach',
    'PostgreSQL for durable records (message state, timeline, dead letters, quotas, grants).',
    ['postgres:', 'postgresql:'],
  ),
  redisUrl: url(
    'REACH_REDIS_URL',
    'redis://127.0.0.1:6379/0',
    'Redis for hot, expiring state (leases, idempotency keys, rate buckets, replay buffers).',
    ['redis:', 'rediss:'],
    'Redis with append-only persistence',
  ),
  // ── process ──────────────────────────────────────────────────────────────────────────────
  logLevel: oneOf('REACH_LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info', 'Minimum level of the JSON logs.'),
  httpHost: str('REACH_HTTP_HOST', '127.0.0.1', 'Interface every service binds its HTTP port to.', '0.0.0.0 in containers'),
  instanceId: str('REACH_INSTANCE_ID', '', 'Identity of this process in logs, presence and client ids; empty = <service>-<hostname>-<pid>.'),
  shutdownTimeoutMs: int('REACH_SHUTDOWN_TIMEOUT_MS', 15000, 'How long a graceful shutdown may take before the process exits anyway.', { min: 100 }),
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
  maxPayloadBytes: int('REACH_MAX_PAYLOAD_BYTES', 262144, 'Largest accepted payload (SPEC R-D10); larger is rejected with 4102.', {
    min: 1024,
    max: 900 * 1024,
  }),
  // ── ports ────────────────────────────────────────────────────────────────────────────────
  ingressPort: port('REACH_INGRESS_PORT', 7410, 'the ingress service'),
  registryPort: port('REACH_REGISTRY_PORT', 7411, 'the registry service'),
  dispatcherPort: port('REACH_DISPATCHER_PORT', 7412, 'the dispatcher (also the WebSocket endpoint /v1/connect)'),
  trackerPort: port('REACH_TRACKER_PORT', 7413, 'the tracker service'),
  deadLetterPort: port('REACH_DEAD_LETTER_PORT', 7414, 'the dead-letter service'),
  routerPort: port('REACH_ROUTER_PORT', 7415, 'the router service'),
  retrySchedulerPort: port('REACH_RETRY_SCHEDULER_PORT', 7416, 'the retry-scheduler service'),
  devSchemaRegistryPort: port('REACH_DEV_SCHEMA_REGISTRY_PORT', 8081, 'the development schema registry that `reach up` runs when no registry answers'),
} as const;

export type Options = typeof OPTIONS;
export type OptionKey = keyof Options;
export type ConfigOf<K extends OptionKey> = {
  readonly [P in K]: Options[P]['default'] extends infer D ? (D extends undefined ? string | undefined : D) : never;
};

const knownEnv = new Set(Object.values(OPTIONS).map((o) => o.env));

/** Names outside this list are not options but are allowed in the environment. */
const NON_OPTION_ENV = new Set(['REACH_HOME']);

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
  const unknown = Object.keys(env).filter((k) => k.startsWith('REACH_') && !knownEnv.has(k) && !NON_OPTION_ENV.has(k));
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

/** Loads and validates the options a service uses. Throws ConfigError naming every bad variable. */
export function loadConfig<K extends OptionKey>(keys: readonly K[], env: Readonly<Record<string, string | undefined>>): ConfigOf<K> {
  checkUnknownEnv(env);
  const out: Record<string, unknown> = {};
  const errors: string[] = [];
  for (const key of keys) {
    const opt = OPTIONS[key] as Option<unknown>;
    const raw = env[opt.env];
    if (raw === undefined || raw === '') {
      out[key] = opt.default;
      continue;
    }
    try {
      out[key] = opt.parse(raw);
    } catch (err) {
      errors.push(err instanceof Error ? err.message : String(err));
    }
  }
  if (errors.length > 0) throw new ConfigError(`invalid configuration:\n  ${errors.join('\n  ')}`);
  return out as ConfigOf<K>;
}

/** Rows for the README's generated config reference. */
export function describeOptions(): Array<{ env: string; default: string; recommended: string; description: string }> {
  return Object.values(OPTIONS).map((o: Option<unknown>) => ({
    env: o.env,
    default: o.default === undefined ? '(unset)' : Array.isArray(o.default) ? o.default.join(',') : String(o.default),
    recommended: o.recommended ?? '',
    description: o.description,
  }));
}
