import { Client, Pool, type PoolClient, type PoolConfig } from 'pg';
import { redactUrl, redactUrlsIn, silentLogger, type Logger } from '@reach/core';

/**
 * The one place Agent-Reach creates PostgreSQL connections. Services hold one long-lived pool
 * each; only migrations and `ensureDatabase` use a single client.
 */
export interface PgPoolOptions {
  logger?: Logger;
  /** Connections per process. Small by default: services batch their writes (tracker) or read
   *  little (ingress queries), and a 2-core box running seven services must not exhaust the
   *  server's `max_connections` (100 by default). */
  max?: number;
  /** Close a connection idle this long, so a quiet service gives its connections back. */
  idleTimeoutMs?: number;
  /** Fail fast when the server is unreachable instead of queueing callers forever. */
  connectionTimeoutMs?: number;
  /** Server-side cap on one statement; 0 = none. Guards the pool against a runaway query. */
  statementTimeoutMs?: number;
  /** Shown in pg_stat_activity, so an operator can tell which service holds a connection. */
  applicationName?: string;
}

/**
 * Statements this process sent through its pools (pool.query and checked-out clients alike),
 * exported as `reach_<service>_pg_statements_total`: `pnpm bench` divides them by the messages
 * delivered. The server's own statistics count transactions and rows, not statements.
 */
let statements = 0;

export function pgStatementCount(): number {
  return statements;
}

function countStatements(client: PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    statements++;
    return query(...args);
  };
}

export function createPgPool(url: string, opts: PgPoolOptions = {}): Pool {
  const logger = (opts.logger ?? silentLogger).child({ component: 'pg' });
  const config: PoolConfig = {
    connectionString: url,
    max: opts.max ?? 10,
    idleTimeoutMillis: opts.idleTimeoutMs ?? 30_000,
    connectionTimeoutMillis: opts.connectionTimeoutMs ?? 5_000,
    application_name: opts.applicationName ?? 'agent-reach',
    // TCP keep-alive notices a dead server (or a dropped NAT entry) on idle connections.
    keepAlive: true,
    // Every statement here is short (a batch upsert, index lookups): compiling one with JIT costs
    // far more than running it. The tracker's write over a batch of 300 messages ran in 16 ms
    // and took 1.5 s to JIT-compile (its set-returning jsonb functions are estimated at 100 rows
    // each, which lifts the plan over jit_above_cost), and the read model fell behind.
    options: '-c jit=off',
  };
  if (opts.statementTimeoutMs !== undefined && opts.statementTimeoutMs > 0) {
    config.statement_timeout = opts.statementTimeoutMs;
  }
  const pool = new Pool(config);
  pool.on('connect', countStatements);
  // An idle client whose connection dies (server restart, network cut) is reported on the
  // pool; without a listener Node treats it as an unhandled 'error' event and kills the
  // process. The pool already discards that client, and the next query opens a new one.
  pool.on('error', (err) => {
    logger.warn({ err: errorSummary(err) }, 'pg: idle connection failed; it was discarded');
  });
  return pool;
}

/**
 * Creates the database named in `url` when it does not exist, so a fresh machine needs no
 * manual `createdb`. Returns true when this call created it.
 *
 * It first tries the target itself (no extra privileges needed when it exists), and only on
 * "database does not exist" connects to the `postgres` maintenance database of the same server.
 * Several services start at once, so another process may create it between our check and our
 * CREATE: both the "already exists" error and the unique-violation PostgreSQL raises on its
 * catalog in that race count as success.
 */
export async function ensureDatabase(url: string, logger: Logger): Promise<boolean> {
  const target = new URL(url);
  const dbName = decodeURIComponent(target.pathname.replace(/^\//, ''));
  if (dbName === '') throw new Error(`database URL ${redactUrl(url)} names no database`);

  if (await databaseReachable(url)) return false;

  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5_000 });
  // A connection-level error after connect must not become an unhandled 'error' event.
  client.on('error', (err) => logger.warn({ err: errorSummary(err) }, 'pg: maintenance connection failed'));
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName]);
    if ((found.rowCount ?? 0) > 0) return false;
    // CREATE DATABASE takes no bind parameters; the name is quoted as an identifier instead.
    await client.query(`CREATE DATABASE ${quoteIdent(dbName)}`);
    logger.info({ database: dbName }, 'pg: created database');
    return true;
  } catch (err) {
    const code = pgErrorCode(err);
    if (code === PG_ERROR.DUPLICATE_DATABASE || code === PG_ERROR.UNIQUE_VIOLATION) {
      logger.debug({ database: dbName }, 'pg: database was created concurrently');
      return false;
    }
    throw err;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** True when the target database accepts a connection; false only when it does not exist. */
async function databaseReachable(url: string): Promise<boolean> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return true;
  } catch (err) {
    if (pgErrorCode(err) === PG_ERROR.INVALID_CATALOG_NAME) return false;
    throw err;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** SQLSTATE codes the store and its callers branch on. */
export const PG_ERROR = {
  UNIQUE_VIOLATION: '23505',
  DUPLICATE_DATABASE: '42P04',
  INVALID_CATALOG_NAME: '3D000',
} as const;

/** The SQLSTATE of a PostgreSQL error, or undefined for anything else. */
export function pgErrorCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = (err as { code: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

export function isUniqueViolation(err: unknown): boolean {
  return pgErrorCode(err) === PG_ERROR.UNIQUE_VIOLATION;
}

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** The URL without its password, for logs and error messages (kept here for existing importers). */
export { redactUrl };

function errorSummary(err: unknown): Record<string, unknown> {
  if (err instanceof Error) return { message: redactUrlsIn(err.message), code: pgErrorCode(err) };
  return { message: redactUrlsIn(String(err)) };
}
