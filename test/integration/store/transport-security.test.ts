import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgPool, createRedis, ensureDatabase, migrate, type Pool } from '../../../packages/store/dist/index.js';
import { makePki, type Pki } from '../../helpers/pki.js';
import { startPrivatePostgres, startPrivateRedis, type PrivatePostgres, type PrivateRedis } from '../../helpers/private-servers.js';
import { recordingLogger } from '../../helpers/recording-logger.js';

// PostgreSQL and Redis with passwords and TLS, reached through their URLs only (docs/transport-
// security.md), with the same store clients the services use. Private servers on spare ports
// (12432, 12379/12380, below the kernel's ephemeral ports): the machine's own run without passwords.
const PG_PASSWORD = 'pg-Pa55word-for-tests';
const REDIS_PASSWORD = 'redis-Pa55word-for-tests';

let pki: Pki;
let pg: PrivatePostgres;
let redis: PrivateRedis;

beforeAll(async () => {
  pki = makePki();
  pg = startPrivatePostgres(pki, { port: 12432, user: 'reach', password: PG_PASSWORD });
  redis = await startPrivateRedis(pki, { port: 12379, tlsPort: 12380, password: REDIS_PASSWORD });
}, 60_000);

afterAll(async () => {
  await redis?.stop();
  pg?.stop();
  pki?.remove();
});

describe('PostgreSQL: password user over TLS (postgres://user:pass@…?sslmode=verify-full&sslrootcert=…)', () => {
  it('migrates a database and answers over an encrypted, password-authenticated connection', async () => {
    const { logger, text } = recordingLogger();
    const url = pg.url('reach_tls');
    expect(await ensureDatabase(url, logger)).toBe(true);
    const pool: Pool = createPgPool(url, { logger });
    try {
      await migrate(pool, logger);
      const r = await pool.query<{ ssl: boolean; user: string; tables: number }>(
        `SELECT s.ssl, current_user AS user, (SELECT count(*)::int FROM pg_tables WHERE tablename = 'messages') AS tables
           FROM pg_stat_ssl s WHERE s.pid = pg_backend_pid()`,
      );
      expect(r.rows[0]).toEqual({ ssl: true, user: 'reach', tables: 1 });
    } finally {
      await pool.end();
    }
    expect(text()).not.toContain(PG_PASSWORD);
  });

  it('a wrong password is refused (28P01), and neither the error nor the log shows a password', async () => {
    const { logger, text } = recordingLogger();
    const wrong = pg.url('postgres').replace(encodeURIComponent(PG_PASSWORD), 'not-the-password');
    const pool = createPgPool(wrong, { logger });
    try {
      const err = await pool.query('SELECT 1').catch((e: unknown) => e as { code?: string; message: string });
      expect(err).toMatchObject({ code: '28P01' });
      expect((err as Error).message).not.toContain('not-the-password');
    } finally {
      await pool.end();
    }
    expect(text()).not.toContain('not-the-password');
  });

  it('without TLS the server refuses the connection; with a CA that did not sign its certificate the client does', async () => {
    const plain = createPgPool(pg.url('postgres').replace(/sslmode=verify-full/, 'sslmode=disable'));
    await expect(plain.query('SELECT 1')).rejects.toThrow(/no encryption|pg_hba/);
    await plain.end();
    const untrusted = createPgPool(pg.url('postgres', pki.strangerCaCert));
    await expect(untrusted.query('SELECT 1')).rejects.toThrow(/certificate/);
    await untrusted.end();
  });
});

describe('Redis: requirepass and TLS (redis://:pass@…, rediss://:pass@…?ca_file=…)', () => {
  it('authenticates with the password in the URL', async () => {
    const client = createRedis(`redis://:${REDIS_PASSWORD}@127.0.0.1:${redis.port}/0`, recordingLogger().logger);
    try {
      expect(await client.set('reach:tls-test', 'v', 'EX', 60)).toBe('OK');
      expect(await client.get('reach:tls-test')).toBe('v');
    } finally {
      await client.quit();
    }
  });

  it('without the password every command is refused (NOAUTH)', async () => {
    const client = createRedis(`redis://127.0.0.1:${redis.port}/0`, recordingLogger().logger, { maxRetriesPerRequest: 0 });
    try {
      await expect(client.get('reach:tls-test')).rejects.toThrow(/NOAUTH/);
    } finally {
      client.disconnect();
    }
  });

  it('rediss:// with ca_file talks TLS to the TLS port, and logs no password', async () => {
    const { logger, text } = recordingLogger();
    const url = `rediss://:${REDIS_PASSWORD}@127.0.0.1:${redis.tlsPort}/1?ca_file=${encodeURIComponent(pki.caCert)}`;
    const client = createRedis(url, logger, { connectionName: 'reach-tls-test' });
    try {
      expect(await client.ping()).toBe('PONG');
      // The server sees this connection on its TLS port.
      const me = (await client.client('INFO')) as string;
      expect(me).toMatch(new RegExp(`laddr=127\\.0\\.0\\.1:${redis.tlsPort}`));
    } finally {
      await client.quit();
    }
    expect(text()).not.toContain(REDIS_PASSWORD);
  });

  it('rediss:// refuses a server whose certificate the given CA did not sign', async () => {
    const { logger, lines } = recordingLogger();
    const url = `rediss://:${REDIS_PASSWORD}@127.0.0.1:${redis.tlsPort}/1?ca_file=${encodeURIComponent(pki.strangerCaCert)}`;
    const client = createRedis(url, logger, { maxRetriesPerRequest: 0, lazyConnect: true });
    try {
      await expect(client.connect()).rejects.toThrow();
    } finally {
      client.disconnect();
    }
    // The reason is the connection error createRedis logs (once, at warn).
    expect(lines.filter((l) => l.level === 'warn').map((l) => l.line)).toEqual([expect.stringMatching(/certificate/)]);
    expect(lines.map((l) => l.line).join('\n')).not.toContain(REDIS_PASSWORD);
  });
});
