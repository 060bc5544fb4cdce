import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

/**
 * Where the integration tests find the running stack: the same REACH_* variables the services
 * read, with the same defaults. Every test names its own topics, groups and agents with a
 * random suffix so one stack serves the whole suite.
 */
export const stack = {
  brokers: (process.env.REACH_KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
  // the development registry on its moved port for a second stack (docs/local-stack.md), as localStack() finds it
  schemaRegistryUrl: process.env.REACH_SCHEMA_REGISTRY_URL ?? `http://127.0.0.1:${process.env.REACH_DEV_SCHEMA_REGISTRY_PORT ?? 8081}`,
  databaseUrl: process.env.REACH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/reach',
  redisUrl: process.env.REACH_REDIS_URL ?? 'redis://127.0.0.1:6379/0',
};

export function uniq(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

/** The token-signing secret of the running stack (REACH_TOKEN_SECRET or the generated one). */
export function tokenSecret(): string {
  if (process.env.REACH_TOKEN_SECRET) return process.env.REACH_TOKEN_SECRET;
  const home = process.env.REACH_HOME ?? join(process.cwd(), '.reach');
  return readFileSync(join(home, 'token-secret'), 'utf8').trim();
}

/** The admin token of the running stack: REACH_ADMIN_TOKEN, or the one `reach up` generated. */
export function adminToken(): string {
  if (process.env.REACH_ADMIN_TOKEN) return process.env.REACH_ADMIN_TOKEN;
  const home = process.env.REACH_HOME ?? join(process.cwd(), '.reach');
  return readFileSync(join(home, 'admin-token'), 'utf8').trim();
}

/** A service port of the running stack: its REACH_*_PORT variable, else the docs/design.md §3 default. */
const port = (name: string, def: number) => Number(process.env[name] || def);

/** Base URLs of the services of the running stack (REACH_*_PORT, else docs/design.md §3 default ports). */
export const urls = {
  ingress: `http://127.0.0.1:${port('REACH_INGRESS_PORT', 7410)}`,
  registry: `http://127.0.0.1:${port('REACH_REGISTRY_PORT', 7411)}`,
  dispatcher: `http://127.0.0.1:${port('REACH_DISPATCHER_PORT', 7412)}`,
  tracker: `http://127.0.0.1:${port('REACH_TRACKER_PORT', 7413)}`,
  deadLetter: `http://127.0.0.1:${port('REACH_DEAD_LETTER_PORT', 7414)}`,
  router: `http://127.0.0.1:${port('REACH_ROUTER_PORT', 7415)}`,
  retryScheduler: `http://127.0.0.1:${port('REACH_RETRY_SCHEDULER_PORT', 7416)}`,
  ws: `ws://127.0.0.1:${port('REACH_DISPATCHER_PORT', 7412)}/v1/connect`,
};
