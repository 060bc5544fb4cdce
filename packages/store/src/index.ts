export * from './pg.js';
export * from './migrate.js';
export * from './partitions.js';
export * from './redis.js';
export type { Pool, PoolClient, PoolConfig, QueryResult, QueryResultRow } from 'pg';
export * from './read-model.js';
export * from './refused-rows.js';
export * from './retention.js';
export * from './storage.js';
