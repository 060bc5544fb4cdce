import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../packages/core/dist/index.js';
import {
  MIGRATIONS_DIR,
  createPgPool,
  ensureDatabase,
  ensurePartitions,
  loadMigrations,
  dropPartitionsBefore,
  listPartitions,
  migrate,
  PARTITIONED_TABLES,
  partitionName,
  purgeInBatches,
  TablePurger,
  quoteIdent,
  type Pool,
} from '../../../packages/store/dist/index.js';
import { stack, uniq } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// Each run works in throwaway databases on the real server, dropped at the end.
function dbUrl(name: string): string {
  const u = new URL(stack.databaseUrl);
  u.pathname = `/${name}`;
  return u.toString();
}
const dbName = (): string => uniq('reach_test').replace(/-/g, '_');

function monthStartUtc(offset: number): Date {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset, 1));
}

function dayStartUtc(offset: number): Date {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + offset));
}

const created: string[] = [];
const pools: Pool[] = [];

function pool(name: string): Pool {
  const p = createPgPool(dbUrl(name), { logger: silentLogger, max: 4 });
  pools.push(p);
  return p;
}

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  const admin = createPgPool(dbUrl('postgres'), { logger: silentLogger, max: 1 });
  try {
    for (const name of created) {
      await admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
    }
  } finally {
    await admin.end();
  }
});

describe('ensureDatabase', () => {
  it('creates a missing database once, and tolerates a concurrent creator', async () => {
    const name = dbName();
    created.push(name);
    const results = await Promise.all([
      ensureDatabase(dbUrl(name), silentLogger),
      ensureDatabase(dbUrl(name), silentLogger),
      ensureDatabase(dbUrl(name), silentLogger),
    ]);
    expect(results.filter((r) => r)).toHaveLength(1);
    expect(await ensureDatabase(dbUrl(name), silentLogger)).toBe(false);
    const p = pool(name);
    const res = await p.query<{ db: string }>('SELECT current_database() AS db');
    expect(res.rows[0]?.db).toBe(name);
  });
});

describe('migrate on a fresh database', () => {
  const name = dbName();
  let db: Pool;
  let all: string[];

  beforeAll(async () => {
    created.push(name);
    expect(await ensureDatabase(dbUrl(name), silentLogger)).toBe(true);
    db = pool(name);
    all = (await loadMigrations()).map((m) => m.name);
  });

  it('applies every migration in order, then nothing on the second run', async () => {
    expect(all.length).toBeGreaterThan(0);
    expect(all[0]).toMatch(/^001_/);
    expect(await migrate(db, silentLogger)).toEqual(all);
    expect(await migrate(db, silentLogger)).toEqual([]);
    const rows = await db.query<{ version: number; name: string; checksum: string }>(
      'SELECT version, name, checksum FROM reach_schema_migrations ORDER BY version',
    );
    expect(rows.rows.map((r) => r.name)).toEqual(all);
    for (const r of rows.rows) expect(r.checksum).toMatch(/^[0-9a-f]{64}$/);
  });

  it('creates every table', async () => {
    const res = await db.query<{ relname: string; relkind: string }>(
      `SELECT relname, relkind::text FROM pg_class
        WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')`,
    );
    const kinds = new Map(res.rows.map((r) => [r.relname, r.relkind]));
    expect(kinds.get('messages')).toBe('p');
    expect(kinds.get('message_events')).toBe('p');
    for (const t of ['idempotency_keys', 'dead_letters', 'quotas', 'grants', 'revoked_tokens', 'reach_schema_migrations']) {
      expect(kinds.get(t), t).toBe('r');
    }
  });

  it('keeps only the DEFAULT partitions: the empty monthly ones of 001 are dropped (010)', async () => {
    for (const parent of ['messages', 'message_events'] as const) {
      const res = await db.query<{ child: string }>(
        `SELECT c.relname AS child FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
          WHERE i.inhparent = $1::regclass`,
        [parent],
      );
      expect(res.rows.map((r) => r.child)).toEqual([`${parent}_default`]);
    }
  });

  it('routes rows to the partition of their UTC day, and days not made yet to the default', async () => {
    const insert = (id: string, createdAt: Date) =>
      db.query(
        `INSERT INTO messages (message_id, created_at, message_type, producer, capability, trace_id)
         VALUES ($1, $2, 'task_request', 'agent-a', 'summarize', 'trace-1')`,
        [id, createdAt],
      );
    const today = dayStartUtc(0);
    const farAhead = new Date(dayStartUtc(6).getTime() + 3_600_000);
    await insert('msg_c', farAhead); // before any partition: DEFAULT
    const made = await ensurePartitions(db);
    expect(made.sort()).toEqual([0, 1, 2, 3].flatMap((i) => PARTITIONED_TABLES.map((t) => partitionName(t, dayStartUtc(i)))).sort());
    expect(await ensurePartitions(db)).toEqual([]);
    await insert('msg_a', new Date(today.getTime() + 1_000));
    // the very first instant of tomorrow (UTC) belongs to tomorrow, not today
    await insert('msg_b', dayStartUtc(1));
    await db.query(
      `INSERT INTO message_events (event_id, message_id, created_at, at, state, service)
       VALUES ('evt_1', 'msg_b', $1, now(), 'PENDING', 'ingress')`,
      [dayStartUtc(1)],
    );
    const where = async (table: string, key: string, id: string) =>
      (await db.query<{ part: string }>(`SELECT tableoid::regclass::text AS part FROM ${table} WHERE ${key} = $1`, [id])).rows[0]?.part;
    expect(await where('messages', 'message_id', 'msg_a')).toBe(partitionName('messages', today));
    expect(await where('messages', 'message_id', 'msg_b')).toBe(partitionName('messages', dayStartUtc(1)));
    expect(await where('message_events', 'event_id', 'evt_1')).toBe(partitionName('message_events', dayStartUtc(1)));
    expect(await where('messages', 'message_id', 'msg_c')).toBe('messages_default');
    // making the far day moves the default partition's row into it
    await ensurePartitions(db, { now: farAhead, ahead: 0 });
    expect(await where('messages', 'message_id', 'msg_c')).toBe(partitionName('messages', farAhead));
    const count = await db.query<{ n: string }>('SELECT count(*) AS n FROM messages');
    expect(Number(count.rows[0]?.n)).toBe(3);
  });

  it('derives state_rank from status, so an upsert can refuse to move a message backwards', async () => {
    const at = new Date(monthStartUtc(0).getTime() + 7_200_000);
    const upsert = (status: string, attempt: number) =>
      db.query(
        `INSERT INTO messages (message_id, created_at, message_type, producer, trace_id, status, attempt)
         VALUES ('msg_fwd', $1, 'event', 'agent-a', 'trace-2', $2, $3)
         ON CONFLICT (message_id, created_at) DO UPDATE
            SET status = EXCLUDED.status, attempt = EXCLUDED.attempt, updated_at = now()
          WHERE (messages.attempt, messages.state_rank) < (EXCLUDED.attempt, EXCLUDED.state_rank)`,
        [at, status, attempt],
      );
    const state = async () =>
      (await db.query<{ status: string; state_rank: number; attempt: number }>(`SELECT status, state_rank, attempt FROM messages WHERE message_id = 'msg_fwd'`))
        .rows[0];
    await upsert('DELIVERING', 0);
    expect(await state()).toEqual({ status: 'DELIVERING', state_rank: 2, attempt: 0 });
    await upsert('ROUTED', 0); // late event: ignored
    expect(await state()).toEqual({ status: 'DELIVERING', state_rank: 2, attempt: 0 });
    await upsert('PENDING', 1); // a retry starts a new attempt
    expect(await state()).toEqual({ status: 'PENDING', state_rank: 0, attempt: 1 });
    await upsert('DEAD', 1);
    expect(await state()).toEqual({ status: 'DEAD', state_rank: 3, attempt: 1 });
    await expect(db.query(`UPDATE messages SET status = 'LOST' WHERE message_id = 'msg_fwd'`)).rejects.toMatchObject({ code: '23514' });
  });

  it('enforces one (producer, idempotency_key)', async () => {
    const add = (producer: string, messageId: string) =>
      db.query(
        `INSERT INTO idempotency_keys (producer, idempotency_key, message_id, expires_at)
         VALUES ($1, 'key-1', $2, now() + interval '1 day')`,
        [producer, messageId],
      );
    await add('agent-a', 'msg_1');
    await expect(add('agent-a', 'msg_2')).rejects.toMatchObject({ code: '23505' });
    await add('agent-b', 'msg_3'); // the key is per producer
  });

  it('enforces one wildcard grant per domain pair', async () => {
    const grant = (capability: string | null) =>
      db.query('INSERT INTO grants (from_domain, to_domain, capability) VALUES ($1, $2, $3)', ['a', 'b', capability]);
    await grant(null);
    await expect(grant(null)).rejects.toMatchObject({ code: '23505' });
    await grant('summarize');
    await expect(grant('summarize')).rejects.toMatchObject({ code: '23505' });
  });

  it('refuses to start when an applied migration file was edited', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'reach-migrations-'));
    try {
      await cp(MIGRATIONS_DIR, dir, { recursive: true });
      const first = (await loadMigrations(dir))[0];
      expect(first).toBeDefined();
      const file = join(dir, `${first!.name}.sql`);
      await writeFile(file, `${await readFile(file, 'utf8')}\n-- an innocent-looking edit\n`);
      await expect(migrate(db, silentLogger, { dir })).rejects.toThrow(/checksum/);
      // nothing was recorded or changed by the refused run
      const rows = await db.query('SELECT 1 FROM reach_schema_migrations');
      expect(rows.rowCount).toBe(all.length);
      // the untouched files still pass
      expect(await migrate(db, silentLogger)).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses a tampered checksum recorded in the database', async () => {
    await db.query(`UPDATE reach_schema_migrations SET checksum = 'tampered' WHERE version = 1`);
    await expect(migrate(db, silentLogger)).rejects.toThrow(/checksum/);
  });
});

describe('concurrent migrate', () => {
  it('lets several processes migrate one fresh database at once, applying each migration once', async () => {
    const name = dbName();
    created.push(name);
    await ensureDatabase(dbUrl(name), silentLogger);
    // separate pools = separate sessions, as separate services would have
    const runners = [pool(name), pool(name), pool(name)];
    const results = await Promise.all(runners.map((p) => migrate(p, silentLogger)));
    const all = (await loadMigrations()).map((m) => m.name);
    expect(results.flat().sort()).toEqual([...all].sort());
    expect(results.filter((r) => r.length > 0)).toHaveLength(1);
    const rows = await runners[0]!.query<{ version: number }>('SELECT version FROM reach_schema_migrations');
    expect(rows.rowCount).toBe(all.length);
    // ensurePartitions from several trackers at once is equally safe: each partition made once
    const now = new Date();
    const made = await Promise.all(runners.map((p) => ensurePartitions(p, { now })));
    expect(made.flat().sort()).toEqual([0, 1, 2, 3].flatMap((i) => PARTITIONED_TABLES.map((t) => partitionName(t, dayStartUtc(i)))).sort());
  });
});

describe('retention of the read model (issue 26)', () => {
  it('drops whole partitions older than the cutoff and keeps the newer ones and their rows', async () => {
    const name = dbName();
    created.push(name);
    await ensureDatabase(dbUrl(name), silentLogger);
    const db = pool(name);
    await migrate(db, silentLogger);
    const step = 10;
    const t0 = new Date(Math.floor(Date.now() / 10_000) * 10_000 - 60_000); // a 10 s boundary a minute ago
    await ensurePartitions(db, { intervalS: step, now: t0, ahead: 5 });
    expect((await listPartitions(db)).filter((p) => p.table === 'messages').map((p) => p.partition)).toEqual(
      [0, 1, 2, 3, 4, 5].map((i) => partitionName('messages', new Date(t0.getTime() + i * 10_000), step)),
    );
    const insert = (id: string, at: number) =>
      db.query(
        `INSERT INTO messages (message_id, created_at, message_type, producer, capability, trace_id)
         VALUES ($1, $2, 'task_request', 'agent-a', 'summarize', 'trace-1')`,
        [id, new Date(at)],
      );
    await insert('msg_old', t0.getTime() + 1_000);
    await insert('msg_edge', t0.getTime() + 19_999);
    await insert('msg_new', t0.getTime() + 20_000);
    await insert('msg_stray', t0.getTime() - 3_600_000); // no partition: DEFAULT
    // every row of the first two partitions is older than t0 + 20 s
    const { dropped, busy } = await dropPartitionsBefore(db, new Date(t0.getTime() + 25_000));
    expect(busy).toEqual([]);
    expect(dropped.sort()).toEqual([0, 1].flatMap((i) => PARTITIONED_TABLES.map((t) => partitionName(t, new Date(t0.getTime() + i * 10_000), step))).sort());
    // the DEFAULT partition is emptied row-wise, in batches
    expect(await purgeInBatches(db, { table: 'messages_default', where: 'created_at < $1', cutoff: new Date(t0.getTime() + 25_000), batch: 1 })).toBe(1);
    const left = await db.query<{ message_id: string }>('SELECT message_id FROM messages ORDER BY message_id');
    expect(left.rows.map((r) => r.message_id)).toEqual(['msg_new']);
    expect(await dropPartitionsBefore(db, new Date(t0.getTime() + 25_000))).toEqual({ dropped: [], busy: [] });
  });

  it('keeps a monthly partition of 001 that holds rows, and makes daily ones only where it ends', async () => {
    const name = dbName();
    created.push(name);
    await ensureDatabase(dbUrl(name), silentLogger);
    const db = pool(name);
    const dir = await mkdtemp(join(tmpdir(), 'reach-migrations-009-'));
    try {
      await cp(MIGRATIONS_DIR, dir, { recursive: true });
      const all = await loadMigrations(dir);
      for (const m of all.filter((m) => m.version >= 10)) await rm(join(dir, `${m.name}.sql`));
      await migrate(db, silentLogger, { dir });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const thisMonth = monthStartUtc(0);
    await db.query(
      `INSERT INTO messages (message_id, created_at, message_type, producer, capability, trace_id)
       VALUES ('msg_kept', $1, 'task_request', 'agent-a', 'summarize', 'trace-1')`,
      [new Date(thisMonth.getTime() + 1_000)],
    );
    await migrate(db, silentLogger);
    const monthly = `messages_y${thisMonth.toISOString().slice(0, 4)}m${thisMonth.toISOString().slice(5, 7)}`;
    const parts = await listPartitions(db);
    expect(parts.map((p) => p.partition)).toEqual([monthly]);
    // the last day of the month and the first of the next: only the latter gets a daily partition
    // of messages (message_events' empty monthly partition was dropped, so it gets both)
    const nextMonth = monthStartUtc(1);
    const lastDay = new Date(nextMonth.getTime() - 3_600_000);
    const made = await ensurePartitions(db, { now: lastDay, ahead: 1 });
    expect(made.sort()).toEqual(
      [partitionName('messages', nextMonth), partitionName('message_events', lastDay), partitionName('message_events', nextMonth)].sort(),
    );
    expect((await db.query('SELECT message_id FROM messages')).rows).toEqual([{ message_id: 'msg_kept' }]);
  });
});

describe('TablePurger', () => {
  // The CI server runs with autovacuum off: without a vacuum of its own, a table purged in
  // batches kept every dead row (the soak's idempotency_keys: 70,000 live rows, 650,000 dead).
  it('deletes old rows in batches and vacuums the table once a fifth of it was purged', async () => {
    const name = dbName();
    created.push(name);
    await ensureDatabase(dbUrl(name), silentLogger);
    const db = pool(name);
    await db.query('CREATE TABLE purged (id int PRIMARY KEY, at timestamptz NOT NULL)');
    await db.query('INSERT INTO purged SELECT i, now() - make_interval(mins => i) FROM generate_series(1, 5000) AS i');
    await db.query('ANALYZE purged');
    const vacuums = async () =>
      Number((await db.query<{ n: string }>("SELECT vacuum_count AS n FROM pg_stat_user_tables WHERE relname = 'purged'")).rows[0]?.n ?? 0);
    const purger = new TablePurger(db, { table: 'purged', where: 'at < $1', batch: 100 });
    // 500 rows (10 %) and then 1,000 more (over 20 % of the 4,500 left, and ≥ 1,000 since the last vacuum)
    expect(await purger.purge(new Date(Date.now() - 4_500.5 * 60_000))).toBe(500);
    expect(await vacuums()).toBe(0);
    expect(await purger.purge(new Date(Date.now() - 3_500.5 * 60_000))).toBe(1_000);
    await eventually('the vacuum counted', async () => ((await vacuums()) === 1 ? true : undefined), 5_000);
    expect(Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM purged')).rows[0]!.n)).toBe(3_500);
  });
});
