import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reachCli } from '../../helpers/cli.js';
import type { Producer } from 'kafkajs';
import { plainKafka } from '../../helpers/kafka.js';
import { cap, entry, envelope, eventually, message, sendDeadLetter, type Entry } from './dlq-helpers.js';

// `reach dlq list|show|replay|purge` (DESIGN §5) against the running dead-letter service.
let producer: Producer;

const reach = (...args: string[]) => reachCli(['dlq', ...args]);

beforeAll(async () => {
  producer = plainKafka().producer();
  await producer.connect();
});
afterAll(async () => {
  await producer.disconnect();
});

describe('reach dlq', () => {
  it('list, show, replay (one and by filter, dry run and rate), purge; tables by default, --json, non-zero exit on failure', async () => {
    const capability = cap('cli');
    const envs = [0, 1].map(() => envelope(capability));
    const ids = [];
    for (const e of envs) ids.push(await sendDeadLetter(producer, e, 'REJECTED', 3003, 1));
    for (const id of ids) await eventually('stored', () => entry(id));

    const list = await reach('list', '--capability', capability, '--reason', 'REJECTED', '--json');
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as { entries: Entry[] }).entries.map((e) => e.dlq_id).sort()).toEqual([...ids].sort());
    const table = await reach('list', '--capability', capability, '--since', new Date(Date.now() - 60_000).toISOString(), '--limit', '10');
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^DLQ_ID\s+STATUS\s+REASON/);
    for (const id of ids) expect(table.stdout).toContain(id);

    const show = await reach('show', ids[0]!);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain('REJECTED');
    expect(show.stdout).toContain(String(envs[0]!.message_id));
    const showJson = JSON.parse((await reach('show', ids[0]!, '--json')).stdout) as Entry;
    expect(showJson).toMatchObject({ dlq_id: ids[0], status: 'PARKED', replayable: true });

    const dry = await reach('replay', '--capability', capability, '--reason', 'REJECTED', '--dry-run', '--json');
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ matched: 2, replayed: 0, dry_run: true });

    const one = await reach('replay', ids[0]!, '--json');
    expect(one.code).toBe(0);
    expect(JSON.parse(one.stdout)).toMatchObject({ dlq_id: ids[0], status: 'REPLAYED', attempt: 2 });
    await eventually('attempt 2 in the read model', async () => ((await message(String(envs[0]!.message_id)))?.attempt ?? 0) >= 2);

    const bulk = await reach('replay', '--capability', capability, '--rate', '20');
    expect(bulk.code).toBe(0);
    expect(bulk.stdout).toMatch(/MATCHED\s+REPLAYED\s+SKIPPED\s+DRY_RUN\n1\s+1\s+0\s+false/);
    expect((await entry(ids[1]!))!.status).toBe('REPLAYED');

    const purge = await reach('purge', ids[1]!);
    expect(purge.code).toBe(0);
    expect(purge.stdout).toContain('PURGED');

    const missing = await reach('show', 'dlq_00000000000000000000000000');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/NOT_FOUND/);
    const refused = await reach('replay', ids[1]!);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/409/);
    expect((await reach('replay')).code).toBe(2);
    expect((await reach('bogus')).code).toBe(2);
  });

  it('fails with a non-zero exit when the token is wrong', async () => {
    const { code, stderr } = await reachCli(['dlq', 'list'], { ...process.env, REACH_ADMIN_TOKEN: 'wrong-token-0123456789' });
    expect(code).toBe(1);
    expect(stderr).toMatch(/1003 AUTH_FAILED/);
  });
});
