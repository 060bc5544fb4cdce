import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { plainKafka, registryClient } from '../../helpers/kafka.js';
import { adminToken, uniq, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';
import { sendStatus, statusEvent } from '../../helpers/status-event.js';

// Issue #4 point 4: "no message is ever stuck in a non-terminal state beyond its budget plus
// one sweep interval". A lone status event (as if every later stage had lost the message) is
// written to reach.status.v1 for a fresh message whose created_at lies before its budget; the
// retry-scheduler's sweeper must declare it DEAD 3005 within one sweep (REACH_STUCK_SWEEP_MS,
// 5 s) past budget + grace (REACH_STUCK_GRACE_MS, 2 s), plus the tracker's lag, with a
// BUDGET_EXCEEDED dead letter. A parked NO_ROUTE message (PENDING 2001, no expire_at) is not
// stuck: it waits for an agent.
const SWEEP_MS = 5_000;
const GRACE_MS = 2_000;
// Tracker batches and the dead-letter service's ingest, on a busy shared stack.
const LAG_MS = 8_000;
const TASK_REQUEST_BUDGET_MS = 30_000; // REACH_BUDGET_POLICY default

const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
});

afterAll(async () => {
  await producer?.disconnect();
});

interface Status {
  status: string;
  code?: number | null;
  attempt?: number;
}

async function statusOf(id: string): Promise<Status | undefined> {
  const res = await fetch(`${urls.ingress}/v1/messages/${id}`, { headers: { authorization: `Bearer ${adminToken()}` } });
  return res.ok ? ((await res.json()) as Status) : undefined;
}

/** The one status event a stage would have written before losing track of the message. */
async function loneStatus(o: { state: 'PENDING' | 'DELIVERING'; createdAt: number; code?: number; agentId?: string }): Promise<string> {
  const event = statusEvent(o);
  await sendStatus(producer, registry, event);
  return event.message_id;
}

async function deadLetter(messageId: string, since: number): Promise<Record<string, unknown> | undefined> {
  const res = await fetch(`${urls.deadLetter}/v1/dlq?reason=BUDGET_EXCEEDED&since=${since}&limit=1000`, {
    headers: { authorization: `Bearer ${adminToken()}` },
  });
  if (!res.ok) throw new Error(`GET /v1/dlq answered ${res.status}`);
  const body = (await res.json()) as { entries: Array<Record<string, unknown>> };
  return body.entries.find((e) => e.message_id === messageId);
}

describe('stuck-message sweeper (issue #4 point 4, R-D2)', () => {
  for (const state of ['PENDING', 'DELIVERING'] as const) {
    it(`a message left ${state} past its budget is declared DEAD 3005 within one sweep, with a BUDGET_EXCEEDED dead letter`, async () => {
      const since = Date.now() - 1_000;
      // Its budget (30 s for task_request) and the grace ended a while ago.
      const createdAt = Date.now() - TASK_REQUEST_BUDGET_MS - GRACE_MS - 10_000;
      const id = await loneStatus({ state, createdAt, ...(state === 'DELIVERING' ? { agentId: uniq('it.lost-agent') } : {}) });
      // First the tracker shows it as the lone event left it …
      await eventually(`${id} ${state}`, async () => ((await statusOf(id))?.status === state ? true : undefined), LAG_MS);
      // … then, within one sweep interval (it is already past budget + grace) plus the lag, DEAD.
      const dead = await eventually(
        `${id} DEAD`,
        async () => {
          const s = await statusOf(id);
          return s?.status === 'DEAD' ? s : undefined;
        },
        SWEEP_MS + GRACE_MS + LAG_MS,
      );
      expect(dead.code).toBe(3005);
      const entry = await eventually(`a dead letter of ${id}`, () => deadLetter(id, since), LAG_MS);
      expect(entry).toMatchObject({ reason: 'BUDGET_EXCEEDED', code: 3005, service: 'retry-scheduler' });
    });
  }

  it('a message still within its budget is left alone until the budget ends, then declared DEAD', async () => {
    // Budget ends 3 s from now: a sweep before budget + grace must not touch it.
    const createdAt = Date.now() - TASK_REQUEST_BUDGET_MS + 3_000;
    const budgetEnd = createdAt + TASK_REQUEST_BUDGET_MS;
    const id = await loneStatus({ state: 'DELIVERING', createdAt, agentId: uniq('it.slow-agent') });
    const dead = await eventually(
      `${id} DEAD`,
      async () => {
        const s = await statusOf(id);
        return s?.status === 'DEAD' ? { ...s, seenAt: Date.now() } : undefined;
      },
      budgetEnd - Date.now() + GRACE_MS + SWEEP_MS + LAG_MS,
    );
    expect(dead.code).toBe(3005);
    expect(dead.seenAt).toBeGreaterThanOrEqual(budgetEnd + GRACE_MS);
  });

  it('a parked NO_ROUTE message (PENDING 2001, no expire_at) is not swept', async () => {
    const old = Date.now() - TASK_REQUEST_BUDGET_MS - GRACE_MS - 10_000;
    const parked = await loneStatus({ state: 'PENDING', createdAt: old, code: 2001 });
    // Written after the parked one: once the sweeper has ended this one, it has also seen the parked one.
    const stuck = await loneStatus({ state: 'PENDING', createdAt: old });
    await eventually(`${stuck} DEAD`, async () => ((await statusOf(stuck))?.status === 'DEAD' ? true : undefined), SWEEP_MS + GRACE_MS + LAG_MS);
    expect(await statusOf(parked)).toMatchObject({ status: 'PENDING', code: 2001 });
  });

  it('a backlog of stuck messages larger than one page ends DEAD within one sweep, not a page per sweep', async () => {
    // An outage's backlog: 2,000 messages left PENDING past their budget (a page is 500; one
    // page per sweep would take four sweeps, 20 s).
    const createdAt = Date.now() - TASK_REQUEST_BUDGET_MS - GRACE_MS - 10_000;
    const events = Array.from({ length: 2_000 }, () => statusEvent({ state: 'PENDING', createdAt, capability: 'rel_stuck_backlog' }));
    for (let i = 0; i < events.length; i += 500) await sendStatus(producer, registry, ...events.slice(i, i + 500));
    const ids = events.map((e) => e.message_id);
    const last = ids[ids.length - 1]!;
    await eventually(`${last} PENDING`, async () => ((await statusOf(last))?.status === 'PENDING' ? true : undefined), LAG_MS);
    await eventually(
      'all 2,000 DEAD',
      async () => {
        const states = await Promise.all(ids.filter((_, i) => i % 50 === 0 || i === ids.length - 1).map(async (id) => (await statusOf(id))?.status));
        return states.every((s) => s === 'DEAD') ? true : undefined;
      },
      SWEEP_MS + GRACE_MS + LAG_MS,
    );
  });
});
