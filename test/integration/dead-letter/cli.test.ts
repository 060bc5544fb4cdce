import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { reachCli } from '../../helpers/cli.js';
import type { Producer } from 'kafkajs';
import { plainKafka } from '../../helpers/kafka.js';
import { NonRetryableError } from '@reach/core';
import { startTestAgent, stopTestAgents, testClient } from '@reach/sdk/testing';
import { cap, entriesOf, entry, envelope, eventually, message, sendDeadLetter, type Entry } from './dlq-helpers.js';

// `reach dlq list|show|replay|purge` (docs/design.md §5) against the running dead-letter service.
let producer: Producer;

const reach = (...args: string[]) => reachCli(['dlq', ...args]);
// Each `reach` is a child process: ~4.5 s apiece on a saturated 2-core machine (load 20), and
// these tests run a dozen of them.
const MANY_CLI_RUNS_MS = 150_000;

beforeAll(async () => {
  producer = plainKafka().producer();
  await producer.connect();
});
afterEach(stopTestAgents);
afterAll(async () => {
  await producer.disconnect();
});

describe('reach dlq', () => {
  it(
    'list, show, replay (one and by filter, dry run and rate), purge; tables by default, --json, non-zero exit on failure',
    async () => {
      const capability = cap('cli');
      const envs = [0, 1].map(() => envelope(capability));
      const ids = [];
      for (const e of envs) ids.push(await sendDeadLetter(producer, e, 'REJECTED', 3003, 2));
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

      // the entry records attempts 0 and 1 (attempts: 2): the replay is attempt 2
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
    },
    MANY_CLI_RUNS_MS,
  );

  it(
    'replay <id> --dry-run sends nothing: it shows the entry and the attempt a replay would start (issue #25 items 2 and 8)',
    async () => {
      const capability = cap('dry');
      const env = envelope(capability);
      // one attempt 0 made, then rejected for good
      const id = await sendDeadLetter(producer, env, 'REJECTED', 3003, 1);
      await eventually('stored', () => entry(id));

      const dry = await reach('replay', id, '--dry-run');
      expect(dry.code).toBe(0);
      expect(dry.stdout).toContain(`dry run: would replay ${id} (message ${String(env.message_id)}) as attempt 1; nothing sent`);
      expect(dry.stdout).toMatch(/DLQ_ID\s+STATUS\s+REASON/);
      const dryJson = await reach('replay', id, '--dry-run', '--json');
      expect(JSON.parse(dryJson.stdout)).toMatchObject({ dlq_id: id, dry_run: true, attempt: 1, status: 'PARKED', replay_count: 0, capability });
      // nothing was claimed or sent
      expect(await entry(id)).toMatchObject({ status: 'PARKED', replay_count: 0 });

      // the real replay after a single attempt 0 is attempt 1 (it reported and ran attempt 2)
      const real = await reach('replay', id);
      expect(real.code).toBe(0);
      expect(real.stdout).toBe(`replayed ${id} (message ${String(env.message_id)}) as attempt 1\n`);
      await eventually('attempt 1 in the read model', async () => (await message(String(env.message_id)))?.attempt === 1);
      expect(await entry(id)).toMatchObject({ status: 'REPLAYED', replay_count: 1 });
      // a dry run of what cannot be replayed is refused alike
      await reach('purge', id);
      const refused = await reach('replay', id, '--dry-run');
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/409/);
    },
    MANY_CLI_RUNS_MS,
  );

  it(
    'show names the source record of a dead letter the dispatcher wrote: reach.routed.v1 with its partition and offset (issue #25 item 8)',
    async () => {
      const capability = cap('src');
      await startTestAgent({
        handlers: {
          [capability]: async () => {
            throw new NonRetryableError('AGENT_REJECTED', 'never');
          },
        },
      });
      const sent = await testClient().submit({ capability, payload: { n: 1 } });
      const dead = await eventually('the REJECTED dead letter', async () =>
        (await entriesOf(capability, 'REJECTED')).find((e) => e.message_id === sent.message_id),
      );
      const full = (await entry(dead.dlq_id))!;
      expect(full.source).toMatchObject({ topic: 'reach.routed.v1' });
      expect(full.source!.partition).toEqual(expect.any(Number));
      expect(full.source!.offset).toMatch(/^\d+$/);
      const show = await reach('show', dead.dlq_id);
      expect(show.code).toBe(0);
      expect(show.stdout).toMatch(new RegExp(`^source\\s+reach\\.routed\\.v1 partition ${full.source!.partition} offset ${full.source!.offset}$`, 'm'));
    },
    MANY_CLI_RUNS_MS,
  );

  it('fails with a non-zero exit when the token is wrong', async () => {
    const { code, stderr } = await reachCli(['dlq', 'list'], { ...process.env, REACH_ADMIN_TOKEN: 'wrong-token-0123456789' });
    expect(code).toBe(1);
    expect(stderr).toMatch(/1003 AUTH_FAILED/);
  });
});
