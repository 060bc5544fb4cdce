import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { NonRetryableError, newId, signToken } from '@reach/core';
import { startTestAgent, stopTestAgents, testClient } from '@reach/sdk/testing';
import { adminToken, stack, tokenSecret, uniq, urls } from '../../helpers/env.js';
import { plainKafka, registryClient, TopicTap } from '../../helpers/kafka.js';
import { createPgPool, type Pool } from '../../../packages/store/dist/index.js';
import { api, cap, entriesOf, entry, envelope, eventually, message, sendDeadLetter, sendToIngress, type Entry } from './dlq-helpers.js';

// The dead-letter service against the running stack (R-D11, R-B10; docs/design.md §3 dead-letter
// admin API): reach.dlq.v1 → PostgreSQL, list/show, replay (one, by filter) as a new attempt
// of the same message, automatic redrive when an agent appears, purge, auth, the stale sweep.
const client = testClient();
let producer: Producer;
let db: Pool;

beforeAll(async () => {
  producer = plainKafka().producer();
  await producer.connect();
  db = createPgPool(stack.databaseUrl, { max: 2 });
});
afterEach(stopTestAgents);
afterAll(async () => {
  await producer.disconnect();
  await db.end();
});

describe('dead-letter store and admin API', () => {
  it('a garbage record on reach.ingress.v1 is stored raw via the DLQ, listed and shown, and cannot be replayed (409)', async () => {
    const tap = await new TopicTap<{ dlq_id: string; raw_value: Buffer | null; reason: string }>(plainKafka(), 'reach.dlq.v1').open();
    const marker = `garbage-${randomBytes(6).toString('hex')}`;
    try {
      await producer.send({ topic: 'reach.ingress.v1', acks: -1, messages: [{ key: marker, value: Buffer.from(`\x07not avro ${marker}`) }] });
      const dl = await tap.waitFor((r) => r.value?.raw_value?.toString('utf8').includes(marker) === true);
      const id = dl.value!.dlq_id;
      const stored = await eventually('the raw entry in PostgreSQL', () => entry(id));
      expect(stored).toMatchObject({ dlq_id: id, status: 'PARKED', reason: 'INVALID', code: 4101, message_id: null, replayable: false, envelope: null });
      expect(Buffer.from(stored.raw_b64!, 'base64').toString('utf8')).toContain(marker);
      expect(stored.source).toMatchObject({ topic: 'reach.ingress.v1' });

      const listed = await api<{ entries: Entry[] }>('GET', `/v1/dlq?reason=INVALID&since=${Date.now() - 120_000}&limit=1000`);
      expect(listed.status).toBe(200);
      expect(listed.body.entries.map((e) => e.dlq_id)).toContain(id);

      const replay = await api<{ error: { message: string } }>('POST', `/v1/dlq/${id}/replay`);
      expect(replay.status).toBe(409);
      expect(replay.body.error.message).toMatch(/could not be decoded|cannot be replayed/);
    } finally {
      await tap.close();
    }
  });

  it('stores a re-read dead letter once (same dlq_id)', async () => {
    const capability = cap('dup');
    const env = envelope(capability);
    const id = await sendDeadLetter(producer, env, 'REJECTED', 3003);
    // the same record again, as after a crash of its producer before the commit, then a marker
    // on the same key (same partition): once the marker is stored, the copy was handled too
    await sendDeadLetter(producer, env, 'REJECTED', 3003, 0, id);
    const marker = await sendDeadLetter(producer, env, 'REJECTED', 3003);
    await eventually('the marker', () => entry(marker));
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM dead_letters WHERE dlq_id = $1', [id]);
    expect(rows[0]!.n).toBe(1);
    expect((await entriesOf(capability)).map((e) => e.dlq_id).sort()).toEqual([id, marker].sort());
  });

  // Regression: source positions repeat after a topic is recreated or a cluster rebuilt (offsets
  // start again at 0); a unique index on them silently dropped new dead letters.
  it('stores two different dead letters that name the same source position (regression: source position is not unique)', async () => {
    const capability = cap('samepos');
    const position = { partition: 2, offset: 4242 };
    const a = await sendDeadLetter(producer, envelope(capability), 'REJECTED', 3003, 0, undefined, position);
    const b = await sendDeadLetter(producer, envelope(capability), 'REJECTED', 3003, 0, undefined, position);
    await eventually('both entries', async () => ((await entriesOf(capability)).length === 2 ? true : undefined));
    expect((await entriesOf(capability)).map((e) => e.dlq_id).sort()).toEqual([a, b].sort());
  });

  it('parks a no-route message with expire_at and redrives it when an SDK agent offering the capability registers → DELIVERED as a new attempt', async () => {
    const capability = cap('later');
    const sent = await client.submit({ capability, payload: { hello: 'later' }, expire_at: Date.now() + 120_000 });
    const parked = await eventually('the parked NO_ROUTE entry', async () => (await entriesOf(capability, 'NO_ROUTE'))[0]);
    expect(parked).toMatchObject({ message_id: sent.message_id, status: 'PARKED', code: 2001 });

    const agent = await startTestAgent({ handlers: { [capability]: async (m) => ({ got: m.payload }) } });
    const delivered = await eventually(
      'DELIVERED after the redrive',
      async () => {
        const m = await message(sent.message_id);
        return m?.status === 'DELIVERED' ? m : undefined;
      },
      45_000,
    );
    expect(delivered.attempt).toBeGreaterThanOrEqual(1);
    expect(delivered.agent_id).toBe(agent.agentId);
    expect(agent.received.map((m) => m.message_id)).toContain(sent.message_id);
    const after = await entry(parked.dlq_id);
    expect(after).toMatchObject({ status: 'REPLAYED', replay_count: 1 });
    expect(after!.history!.some((h) => h.event === 'REPLAYED' && h.cause === 'redrive')).toBe(true);
  });

  it('a parked message whose expire_at passes before any agent appears becomes DEAD (EXPIRED), never redriven', async () => {
    const capability = cap('gone');
    const env = envelope(capability, { expire_at: Date.now() + 60_000 });
    const id = await sendDeadLetter(producer, env, 'NO_ROUTE', 2001);
    await eventually('stored', () => entry(id));
    // expire it in place (the clock cannot be moved): the envelope's expire_at is in the past now
    await db.query(`UPDATE dead_letters SET envelope_json = jsonb_set(envelope_json, '{expire_at}', to_jsonb($2::text)) WHERE dlq_id = $1`, [
      id,
      new Date(Date.now() - 1000).toISOString(),
    ]);
    await startTestAgent({ handlers: { [capability]: async () => 'too late' } });
    const dead = await eventually(
      'DEAD',
      async () => {
        const e = await entry(id);
        return e?.status === 'DEAD' ? e : undefined;
      },
      45_000,
    );
    expect(dead.history!.some((h) => h.event === 'DEAD' && h.why === 'EXPIRED')).toBe(true);
    expect(dead.replay_count).toBe(0);
  });

  it('replays a REJECTED message by hand to an agent that now accepts it: a new attempt of the same message, DELIVERED', async () => {
    const capability = cap('picky');
    const rejecting = await startTestAgent({
      handlers: {
        [capability]: async () => {
          throw new NonRetryableError('AGENT_REJECTED', 'not today');
        },
      },
    });
    const env = envelope(capability, { idempotency_key: uniq('idem') });
    await sendToIngress(producer, env);
    const messageId = String(env.message_id);
    await eventually('REJECTED', async () => (await message(messageId))?.status === 'REJECTED');
    await rejecting.stop();
    // the stage that gives up on a rejected message dead-letters it (reason REJECTED)
    const id = await sendDeadLetter(producer, env, 'REJECTED', 3003, 0);
    await eventually('stored', () => entry(id));

    const accepting = await startTestAgent({ handlers: { [capability]: async () => ({ ok: true }) } });
    // a dry run (issue #25 item 2) answers the attempt it would start and sends nothing
    const dry = await api<{ attempt: number; dry_run: boolean; status: string; replay_count: number }>('POST', `/v1/dlq/${id}/replay`, { dry_run: true });
    expect(dry).toMatchObject({ status: 200, body: { dry_run: true, attempt: 1, status: 'PARKED', replay_count: 0 } });
    expect((await api('POST', `/v1/dlq/${id}/replay`, { dry_run: 'yes' })).status).toBe(400);
    expect((await api('POST', `/v1/dlq/${id}/replay`, { rate_per_s: 1 })).status).toBe(400);
    expect(await entry(id)).toMatchObject({ status: 'PARKED', replay_count: 0 });
    const r = await api<{ dlq_id: string; message_id: string; status: string; attempt: number }>('POST', `/v1/dlq/${id}/replay`);
    expect(r.status).toBe(200);
    // the read model shows attempt 0, REJECTED: the replay is attempt 1
    expect(r.body).toMatchObject({ dlq_id: id, message_id: messageId, status: 'REPLAYED', attempt: 1 });
    const done = await eventually('DELIVERED', async () => {
      const m = await message(messageId);
      return m?.status === 'DELIVERED' ? m : undefined;
    });
    expect(done.attempt).toBe(r.body.attempt);
    expect(done.agent_id).toBe(accepting.agentId);
    expect(await entry(id)).toMatchObject({ status: 'REPLAYED', replay_count: 1 });
  });

  it('ingress honours reach-attempt only with the admin token: an agent cannot jump its message to a later attempt', async () => {
    const reg = (await fetch(`${urls.registry}/v1/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${adminToken()}` },
      body: JSON.stringify({ agent_type: 'dlq_producer', capabilities: [], metadata: { max_concurrency: 1 } }),
    }).then((r) => r.json())) as { agent_id: string; token: string };
    const registry = registryClient();
    const env = envelope(cap('jump'), { producer: reg.agent_id });
    const value = await registry.encode(await registry.getLatestSchemaId('reach.ingress.v1-value'), env);
    await producer.send({
      topic: 'reach.ingress.v1',
      acks: -1,
      messages: [{ key: String(env.message_id), value, headers: { 'reach-token': reg.token, 'reach-attempt': '7' } }],
    });
    const m = await eventually('the message in the read model', () => message(String(env.message_id)));
    expect(m.attempt).toBe(0);
  });

  it('bulk replay by reason and capability: dry_run only counts; a real run replays at the given rate', async () => {
    const capability = cap('bulk');
    const envs = [0, 1, 2].map(() => envelope(capability));
    const ids = [];
    for (const e of envs) ids.push(await sendDeadLetter(producer, e, 'RETRIES_EXHAUSTED', 3004, 2));
    await eventually('all stored', async () => (await entriesOf(capability)).length === 3);

    const dry = await api('POST', '/v1/dlq/replay', { reason: 'RETRIES_EXHAUSTED', capability, dry_run: true });
    expect(dry).toMatchObject({ status: 200, body: { matched: 3, replayed: 0, skipped: 0, dry_run: true } });
    for (const id of ids) expect((await entry(id))!.status).toBe('PARKED');

    const run = await api('POST', '/v1/dlq/replay', { reason: 'RETRIES_EXHAUSTED', capability, rate_per_s: 5 });
    expect(run).toMatchObject({ status: 200, body: { matched: 3, replayed: 3, skipped: 0, dry_run: false } });
    for (const id of ids) expect(await entry(id)).toMatchObject({ status: 'REPLAYED', replay_count: 1 });
    // each went back through ingress as attempt 2 (the entries record attempts 0 and 1)
    for (const e of envs) {
      const m = await eventually('the replayed attempt in the read model', async () => {
        const s = await message(String(e.message_id));
        return s && s.attempt >= 2 ? s : undefined;
      });
      expect(m.attempt).toBe(2);
    }
    // replayed entries are not matched again
    const again = await api('POST', '/v1/dlq/replay', { reason: 'RETRIES_EXHAUSTED', capability, dry_run: true });
    expect(again.body).toMatchObject({ matched: 0 });

    const bad = await api('POST', '/v1/dlq/replay', {});
    expect(bad.status).toBe(400);
  });

  it('purge keeps the row for audit as PURGED; it is no longer listed or replayable', async () => {
    const capability = cap('purge');
    const id = await sendDeadLetter(producer, envelope(capability), 'REJECTED', 3003);
    await eventually('stored', () => entry(id));
    const del = await api('DELETE', `/v1/dlq/${id}`);
    expect(del).toMatchObject({ status: 200, body: { dlq_id: id, status: 'PURGED' } });
    expect(await entry(id)).toMatchObject({ status: 'PURGED', replayable: false });
    expect((await entriesOf(capability)).map((e) => e.dlq_id)).not.toContain(id);
    const purgedList = await api<{ entries: Entry[] }>('GET', `/v1/dlq?capability=${capability}&status=PURGED`);
    expect(purgedList.body.entries.map((e) => e.dlq_id)).toEqual([id]);
    expect((await api('POST', `/v1/dlq/${id}/replay`)).status).toBe(409);
    expect((await api('DELETE', `/v1/dlq/${newId('dlq')}`)).status).toBe(404);
    expect((await api('GET', `/v1/dlq/${newId('dlq')}`)).status).toBe(404);
  });

  it('needs the admin token: 401 without or with a bad token, 403 with an agent token', async () => {
    const agentToken = signToken(
      { sub: uniq('agent'), jti: uniq('jti'), iat: Math.floor(Date.now() / 1000), exp: Math.floor(Date.now() / 1000) + 600, dom: 'default' },
      tokenSecret(),
    );
    for (const [method, path] of [
      ['GET', '/v1/dlq'],
      ['GET', `/v1/dlq/${newId('dlq')}`],
      ['POST', `/v1/dlq/${newId('dlq')}/replay`],
      ['POST', '/v1/dlq/replay'],
      ['DELETE', `/v1/dlq/${newId('dlq')}`],
    ] as const) {
      expect((await api(method, path, undefined, null)).status, `${method} ${path} without a token`).toBe(401);
      expect((await api(method, path, undefined, 'not-a-token-at-all')).status, `${method} ${path} with a bad token`).toBe(401);
      const forbidden = await api<{ error: { code: number } }>(method, path, undefined, agentToken);
      expect(forbidden.status, `${method} ${path} with an agent token`).toBe(403);
      expect(forbidden.body.error.code).toBe(1003);
    }
  });

  it('pages the list newest first with a cursor', async () => {
    const capability = cap('page');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await sendDeadLetter(producer, envelope(capability), 'REJECTED', 3003));
    await eventually('all stored', async () => (await entriesOf(capability)).length === 3);
    const first = await api<{ entries: Entry[]; next_cursor: string }>('GET', `/v1/dlq?capability=${capability}&limit=2`);
    expect(first.body.entries).toHaveLength(2);
    const second = await api<{ entries: Entry[]; next_cursor: string | null }>(
      'GET',
      `/v1/dlq?capability=${capability}&limit=2&cursor=${first.body.next_cursor}`,
    );
    expect(second.body.entries).toHaveLength(1);
    expect(second.body.next_cursor).toBeNull();
    const all = [...first.body.entries, ...second.body.entries].map((e) => e.dlq_id);
    expect(new Set(all)).toEqual(new Set(ids));
  });
});

describe('the stale sweep', () => {
  let child: ChildProcess | undefined;
  afterEach(() => {
    child?.kill('SIGTERM');
    child = undefined;
  });

  it('marks PARKED entries older than REACH_DLQ_STALE_AFTER_S DEAD, alerts (log and reach.alerts.v1) and counts reach_dead_letter_stale_total', async () => {
    const id = newId('dlq');
    const alerts = await new TopicTap<{ kind: string; severity: string; labels: Record<string, string> }>(plainKafka(), 'reach.alerts.v1').open();
    const capability = cap('stale');
    await db.query(
      `INSERT INTO dead_letters (dlq_id, reason, code, error, service, capability, status, created_at)
       VALUES ($1, 'NO_ROUTE', 2001, 'nobody came', 'test', $2, 'PARKED', now() - interval '23 hours 50 minutes')`,
      [id, capability],
    );
    // A parked row whose expire_at no timestamptz cast can read (the doors accepted an expiry
    // past the year 9999 until 6 December): the sweep used to fail on it at every run, so no
    // entry was ever swept again (CI, 6 December). It must be skipped, and stay PARKED.
    const odd = newId('dlq');
    await db.query(
      `INSERT INTO dead_letters (dlq_id, reason, code, error, service, capability, status, envelope_json, created_at)
       VALUES ($1, 'NO_ROUTE', 2001, 'nobody came', 'test', $2, 'PARKED', $3, now())`,
      [odd, capability, JSON.stringify({ expire_at: new Date(8.64e15).toISOString() })],
    );
    // A second instance (the sweep runs at start and every minute) that counts 23 h 45 min as
    // stale. The entry is 23 h 50 min old: past this instance's limit, within the stack's 24 h, so
    // the stack's own dead-letter, whose minute sweep can fire right after the insert (CI,
    // 5 December: it took the entry 0.2 s after it was written, and this instance found nothing),
    // leaves it alone. The window is narrow so that entries other tests left PARKED in a shared
    // database hours ago are not swept with it: the alert event names at most 20 ids.
    const lines: Array<Record<string, unknown>> = [];
    const raw: string[] = [];
    child = spawn(process.execPath, ['services/dead-letter/dist/main.js'], {
      env: {
        ...process.env,
        REACH_DEAD_LETTER_PORT: '0',
        REACH_INSTANCE_ID: uniq('dead-letter-sweep'),
        REACH_ADMIN_TOKEN: adminToken(),
        REACH_TOKEN_SECRET: tokenSecret(),
        REACH_DLQ_STALE_AFTER_S: '85500',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    // Whole lines only: a chunk of the pipe can end inside a line, and one half line in `lines`
    // made every JSON.parse below throw, so the check never matched (CI, twice on 5 December).
    let partial = '';
    child.stdout!.on('data', (b: Buffer) => {
      const parts = (partial + b.toString('utf8')).split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts.filter(Boolean)) {
        raw.push(line);
        // A line that is not JSON (none is expected) is kept for the failure message, not parsed.
        try {
          lines.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          /* kept in raw */
        }
      }
    });
    let exit = 'still running';
    child.on('exit', (code, signal) => (exit = `exited ${code ?? signal}`));
    const alert = await eventually('the alert line', async () => lines.find((l) => l.dlq_id === id && l.alert)).catch((err: Error) => {
      // What the instance said is the only clue to an intermittent miss: print it with the failure.
      throw new Error(`${err.message}; the second instance ${exit}; its stdout:\n${[...raw, partial].join('\n')}`);
    });
    expect(alert).toMatchObject({ level: 'warn', alert: 'DEAD_LETTER_STALE', reason: 'NO_ROUTE', stale_after_s: 85500 });
    expect(String(alert.msg)).toMatch(/ALERT/);
    const dead = await entry(id);
    expect(dead).toMatchObject({ status: 'DEAD' });
    expect(dead!.history!.some((h) => h.event === 'DEAD' && h.why === 'STALE')).toBe(true);
    expect(await entry(odd)).toMatchObject({ status: 'PARKED' });
    await db.query('DELETE FROM dead_letters WHERE dlq_id = $1', [odd]);
    expect(lines.filter((l) => l.msg === 'dead-letter sweep failed; retried shortly')).toEqual([]);

    const port = await eventually('the second instance port', async () => lines.find((l) => l.msg === 'http listening')?.port as number | undefined);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const stale = /^reach_dead_letter_stale_total (\d+)/m.exec(metrics);
    expect(Number(stale?.[1])).toBeGreaterThanOrEqual(1);
    try {
      const event = await alerts.waitFor((r) => r.value?.kind === 'DEAD_LETTER_STALE' && (r.value.labels.dlq_ids ?? '').split(',').includes(id));
      expect(event.value).toMatchObject({ severity: 'P2' });
    } finally {
      await alerts.close();
    }
  });
});
