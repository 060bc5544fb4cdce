import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgPool, type Pool } from '../../../packages/store/dist/index.js';
import { vacuumReadModel } from '../../../services/tracker/dist/vacuum.js';
import { stack } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// The tracker vacuums the read model's partitions itself when the server's autovacuum is off
// (services/tracker/src/vacuum.ts): this machine's PostgreSQL runs without it, and the day's
// `messages` partition held as many dead rows as live ones. A schema of the test's own holds a
// partitioned `messages` with dead rows; the running stack's tables are not touched by the test.
const schema = `vacuum_${randomBytes(3).toString('hex')}`;
let pg: Pool;

beforeAll(async () => {
  pg = createPgPool(stack.databaseUrl, { max: 2 });
  await pg.query(`CREATE SCHEMA ${schema}`);
  await pg.query(`CREATE TABLE ${schema}.messages (id int NOT NULL, v int NOT NULL) PARTITION BY RANGE (id)`);
  await pg.query(`CREATE TABLE ${schema}.messages_p1 PARTITION OF ${schema}.messages FOR VALUES FROM (0) TO (10000)`);
});

afterAll(async () => {
  await pg?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pg?.end();
});

const deadRows = async () =>
  Number(
    (await pg.query<{ n: string }>(`SELECT n_dead_tup AS n FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'messages_p1'`, [schema])).rows[0]?.n ??
      0,
  );

describe('the read model vacuumed by the tracker', () => {
  it('vacuums a partition with more dead rows than autovacuum would allow when autovacuum is off, and does nothing when it is on', async () => {
    await pg.query(`INSERT INTO ${schema}.messages SELECT g, 0 FROM generate_series(1, 1000) g`);
    for (let i = 1; i <= 3; i++) await pg.query(`UPDATE ${schema}.messages SET v = $1`, [i]);
    // The statistics reach pg_stat_user_tables within about a second of the commit.
    await eventually('the dead rows counted', async () => (await deadRows()) >= 2000, 10_000, 200);
    const autovacuum = (await pg.query<{ on: boolean }>(`SELECT current_setting('autovacuum') = 'on' AS on`)).rows[0]!.on;
    const vacuumed = await vacuumReadModel(pg);
    if (autovacuum) {
      expect(vacuumed).toEqual([]);
      return;
    }
    expect(vacuumed).toContain(`${schema}.messages_p1`);
    await eventually('the dead rows gone', async () => (await deadRows()) === 0, 10_000, 200);
    // Nothing left to do: a second round vacuums none of this schema's partitions.
    expect((await vacuumReadModel(pg)).filter((p) => p.startsWith(`${schema}.`))).toEqual([]);
  });
});
