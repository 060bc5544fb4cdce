import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  DEPENDENCIES,
  DEPRECATED_ENV,
  OPTIONS,
  describeOptions,
  loadConfig,
  readRawEnv,
  resolveConfig,
  withDefaults,
  type OptionKey,
  type ResolvedConfig,
} from '@reach/core';

// Issue #30 §4, staged and checked config: raw env → with defaults → resolved.

function configError(fn: () => unknown): ConfigError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ConfigError);
  return caught as ConfigError;
}

const ALL_KEYS = Object.keys(OPTIONS) as OptionKey[];

describe('the three stages', () => {
  it('raw: keeps the set REACH_* variables, drops empty ones and foreign names', () => {
    const raw = readRawEnv({ REACH_LOG_LEVEL: 'debug', REACH_REGION: '', PATH: '/bin', REACH_HOME: '/tmp/h' });
    expect(raw.vars).toEqual({ REACH_LOG_LEVEL: 'debug', REACH_HOME: '/tmp/h' });
    expect(raw.warnings).toEqual([]);
    expect(configError(() => readRawEnv({ REACH_LOG_LEVELS: 'debug' })).message).toContain('did you mean REACH_LOG_LEVEL?');
  });

  it('with defaults: parses what is set, fills in the rest, names every bad variable', () => {
    const cfg = withDefaults(['logLevel', 'maxRetries'], readRawEnv({ REACH_MAX_RETRIES: '5' }));
    expect(cfg).toEqual({ logLevel: 'info', maxRetries: 5 });
    const err = configError(() => withDefaults(['logLevel', 'maxRetries'], readRawEnv({ REACH_MAX_RETRIES: 'x', REACH_LOG_LEVEL: 'loud' })));
    expect(err.message).toContain('REACH_MAX_RETRIES');
    expect(err.message).toContain('REACH_LOG_LEVEL');
  });

  it('resolved: a required option must be set, and its type is narrowed', () => {
    const raw = readRawEnv({ REACH_ENROLLMENT_TOKEN: 'enrol-0123456789abcdef' });
    const cfg: ResolvedConfig<'enrollmentToken' | 'logLevel', 'enrollmentToken'> = resolveConfig(
      withDefaults(['enrollmentToken', 'logLevel'], raw),
      ['enrollmentToken'],
      'registry',
    );
    // No `!` and no check: the resolved type of a required secret is string.
    const token: string = cfg.enrollmentToken;
    expect(token).toBe('enrol-0123456789abcdef');
    const unset = readRawEnv({});
    expect(configError(() => resolveConfig(withDefaults(['enrollmentToken'], unset), ['enrollmentToken'], 'registry')).message).toBe(
      'REACH_ENROLLMENT_TOKEN must be set for registry',
    );
    // Not required: the type keeps undefined.
    const optional = resolveConfig(withDefaults(['enrollmentToken'], unset));
    // @ts-expect-error string | undefined is not a string
    const notNarrowed: string = optional.enrollmentToken;
    expect(notNarrowed).toBeUndefined();
  });

  it('the defaults of every option fit together', () => {
    expect(() => loadConfig(ALL_KEYS, {})).not.toThrow();
  });
});

describe('dependent options are checked together', () => {
  // [valid env, invalid env, the variables the error must name]
  const cases: Array<[string, Record<string, string>, Record<string, string>, string[]]> = [
    ['ack timeout ≤ budget', { REACH_ACK_TIMEOUT_MS: '45000' }, { REACH_ACK_TIMEOUT_MS: '45001' }, ['REACH_ACK_TIMEOUT_MS', 'REACH_BUDGET_MS']],
    ['retry base ≤ retry max', { REACH_RETRY_BASE_MS: '4000' }, { REACH_RETRY_BASE_MS: '4001' }, ['REACH_RETRY_BASE_MS', 'REACH_RETRY_MAX_MS']],
    [
      'retry max < budget',
      { REACH_RETRY_MAX_MS: '9999', REACH_BUDGET_MS: '10000' },
      { REACH_RETRY_MAX_MS: '10000', REACH_BUDGET_MS: '10000' },
      ['REACH_RETRY_MAX_MS', 'REACH_BUDGET_MS'],
    ],
    [
      'deadline sweep ≤ ack timeout',
      { REACH_DEADLINE_SWEEP_MS: '500', REACH_ACK_TIMEOUT_MS: '500' },
      { REACH_DEADLINE_SWEEP_MS: '501', REACH_ACK_TIMEOUT_MS: '500' },
      ['REACH_DEADLINE_SWEEP_MS', 'REACH_ACK_TIMEOUT_MS'],
    ],
    [
      'ping interval < idle timeout',
      { REACH_WS_PING_INTERVAL_MS: '300', REACH_WS_IDLE_TIMEOUT_MS: '1000' },
      { REACH_WS_PING_INTERVAL_MS: '30000' },
      ['REACH_WS_PING_INTERVAL_MS', 'REACH_WS_IDLE_TIMEOUT_MS'],
    ],
    [
      'largest payload < largest frame',
      { REACH_MAX_PAYLOAD_BYTES: '524287' },
      { REACH_MAX_PAYLOAD_BYTES: '65536', REACH_WS_MAX_FRAME_BYTES: '65536' },
      ['REACH_MAX_PAYLOAD_BYTES', 'REACH_WS_MAX_FRAME_BYTES'],
    ],
    [
      'partition interval ≤ message retention',
      { REACH_RETENTION_MESSAGES: '60s', REACH_PARTITION_INTERVAL: '10s' },
      { REACH_RETENTION_MESSAGES: '12h' },
      ['REACH_PARTITION_INTERVAL', 'REACH_RETENTION_MESSAGES'],
    ],
    [
      'A2A probe < default lease',
      { REACH_A2A_PROBE_MS: '9999', REACH_AGENT_TTL_S: '10' },
      { REACH_A2A_PROBE_MS: '10000', REACH_AGENT_TTL_S: '10' },
      ['REACH_A2A_PROBE_MS', 'REACH_AGENT_TTL_S'],
    ],
  ];

  it.each(cases)('%s', (_name, valid, invalid, names) => {
    expect(() => loadConfig(ALL_KEYS, valid)).not.toThrow();
    const err = configError(() => loadConfig(ALL_KEYS, invalid));
    expect(err.message).toMatch(/^inconsistent configuration:/);
    for (const name of names) expect(err.message).toContain(name);
  });

  it('has a case above for every declared dependency', () => {
    expect(cases).toHaveLength(DEPENDENCIES.length);
  });

  it('is checked by each process that reads all of its options, not by one that reads only some', () => {
    const env = { REACH_ACK_TIMEOUT_MS: '20000', REACH_BUDGET_MS: '15000' };
    const err = configError(() => loadConfig(['ackTimeoutMs', 'budgetMs'], env));
    expect(err.message).toContain('REACH_ACK_TIMEOUT_MS=20000 must be ≤ REACH_BUDGET_MS=15000');
    // the router reads both
    expect(configError(() => loadConfig(['logLevel', 'budgetMs', 'ackTimeoutMs'], { REACH_ACK_TIMEOUT_MS: '50000' })).message).toContain(
      'REACH_BUDGET_MS=45000',
    );
    expect(loadConfig(['ackTimeoutMs'], env).ackTimeoutMs).toBe(20000);
    expect(() => loadConfig(['logLevel'], env)).not.toThrow();
  });

  it('names every inconsistent pair at once, durations as written', () => {
    const err = configError(() => loadConfig(ALL_KEYS, { REACH_WS_PING_INTERVAL_MS: '40000', REACH_RETENTION_MESSAGES: '1h' }));
    expect(err.message).toContain('REACH_WS_PING_INTERVAL_MS=40000 must be < REACH_WS_IDLE_TIMEOUT_MS=30000');
    expect(err.message).toContain('REACH_PARTITION_INTERVAL=1d must be ≤ REACH_RETENTION_MESSAGES=1h');
  });

  it('reports an option that is invalid on its own by its parse error, before any dependency', () => {
    const err = configError(() => loadConfig(['ackTimeoutMs', 'budgetMs'], { REACH_BUDGET_MS: 'soon' }));
    expect(err.message).toContain('REACH_BUDGET_MS="soon" is invalid');
    expect(err.message).not.toContain('inconsistent');
  });
});

describe('the per-stage budget options (removed: never read)', () => {
  const removed = ['REACH_BUDGET_INGEST_MS', 'REACH_BUDGET_ROUTE_MS', 'REACH_BUDGET_DISPATCH_MS', 'REACH_BUDGET_RETRIES_MS'];

  it('are no option any more, nor in the generated reference', () => {
    const envs = describeOptions().map((r) => r.env);
    for (const name of removed) expect(envs).not.toContain(name);
    expect(Object.keys(DEPRECATED_ENV).sort()).toEqual([...removed].sort());
  });

  it('are accepted with a deprecation warning each, and change nothing', () => {
    const env = Object.fromEntries(removed.map((n) => [n, '1']));
    const raw = readRawEnv(env);
    expect(raw.vars).toEqual({});
    expect(raw.warnings).toHaveLength(4);
    for (const name of removed) expect(raw.warnings.some((w) => w.startsWith(`${name} is deprecated and ignored`))).toBe(true);
    expect(loadConfig(ALL_KEYS, env)).toEqual(loadConfig(ALL_KEYS, {}));
  });

  it('a near miss of one is still refused as unknown', () => {
    expect(configError(() => loadConfig(['budgetMs'], { REACH_BUDGET_ROUTES_MS: '1' })).message).toContain(
      'unknown configuration variable(s): REACH_BUDGET_ROUTES_MS',
    );
  });
});

// ── source scans: services/*/src and packages/*/src ─────────────────────────────────────────
const root = join(import.meta.dirname, '..', '..', '..');
const CONFIG_MODULE = join(root, 'packages', 'core', 'src', 'config.ts');
function sources(): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.ts') && path !== CONFIG_MODULE) out.set(path.slice(root.length + 1), readFileSync(path, 'utf8'));
    }
  };
  for (const top of ['services', 'packages']) {
    for (const pkg of readdirSync(join(root, top))) {
      const src = join(root, top, pkg, 'src');
      try {
        if (statSync(src).isDirectory()) walk(src);
      } catch {
        // a package without sources
      }
    }
  }
  return out;
}
const SOURCES = sources();
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('every declared option is read somewhere', () => {
  it.each(Object.entries(OPTIONS).map(([key, o]) => [o.env, key] as const))('%s', (env, key) => {
    // Asked for: its key in some loadConfig / service option list, or its variable named
    // (the CLI passes some on to the processes it starts).
    const asked = [...SOURCES.values()].some((t) => t.includes(`'${key}'`) || t.includes(env));
    // And read: a property access, a destructuring, or the port of a service definition
    // (runService reads config[def.port]).
    const read = new RegExp(`\\.${escape(key)}\\b|[{,]\\s*${escape(key)}\\s*[:,}]|\\bport: '${escape(key)}'`);
    const used = [...SOURCES.values()].some((t) => read.test(t));
    expect({ asked, used }, `${env} (${key}) is declared in packages/core/src/config.ts but nothing reads it`).toEqual({ asked: true, used: true });
  });
});

describe('running code sees resolved values only', () => {
  it('applies no non-null assertion (!) to a config value', () => {
    const keys = Object.keys(OPTIONS).map(escape).join('|');
    // ctx.config.adminToken!, or a destructured adminToken! (not `!=`)
    const asserted = new RegExp(`\\b(${keys})!(?!=)`, 'g');
    const found = [...SOURCES].flatMap(([path, text]) => [...text.matchAll(asserted)].map((m) => `${path}: ${m[0]}`));
    expect(found).toEqual([]);
  });
});
