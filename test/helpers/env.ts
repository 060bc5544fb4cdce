import { randomBytes } from 'node:crypto';

/**
 * Where the integration tests find the running stack: the same REACH_* variables the services
 * read, with the same defaults. Every test names its own topics, groups and agents with a
 * random suffix so one stack serves the whole suite.
 */
export const stack = {
  brokers: (process.env.REACH_KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
  schemaRegistryUrl: process.env.REACH_SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081',
  databaseUrl: process.env.REACH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/reach',
  redisUrl: process.env.REACH_REDIS_URL ?? 'redis://127.0.0.1:6379/0',
};

export function uniq(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}
