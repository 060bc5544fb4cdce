import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { ResultWaiter } from '../../../services/ingress/dist/result-waiter.js';
import { RecentMessages } from '../../../services/ingress/dist/recent.js';
import type { EventRow, MessageRow } from '../../../services/ingress/dist/read-model.js';
import { messageRow } from './message-row.js';

function row(id: string, over: Partial<MessageRow> = {}): MessageRow {
  return messageRow({ message_id: id, ...over });
}

const FAST = { firstMs: 1, factor: 2, maxMs: 8 };

describe('ResultWaiter', () => {
  it('resolves when the result appears, reading every due message in one query', async () => {
    const state = new Map<string, MessageRow>([
      ['a', row('a')],
      ['b', row('b')],
    ]);
    const queries: string[][] = [];
    const waiter = new ResultWaiter(
      async (ids) => {
        queries.push([...ids]);
        return new Map(ids.filter((id) => state.has(id)).map((id) => [id, state.get(id)!]));
      },
      silentLogger,
      FAST,
    );
    const a = waiter.wait('a', 10_000);
    const b = waiter.wait('b', 10_000);
    await new Promise((r) => setTimeout(r, 20));
    state.set('a', row('a', { status: 'DELIVERED', result: { status: 'ok' } }));
    state.set('b', row('b', { status: 'REJECTED', code: 2001 }));
    expect(await a).toEqual({ row: state.get('a'), timedOut: false });
    expect(await b).toEqual({ row: state.get('b'), timedOut: false });
    expect(queries.some((q) => q.length === 2)).toBe(true);
    expect(waiter.pending).toBe(0);
  });

  it('times out with the last state seen, and survives failing queries', async () => {
    let calls = 0;
    const waiter = new ResultWaiter(
      async (ids) => {
        calls++;
        if (calls % 2 === 0) throw new Error('pg is down');
        return new Map(ids.map((id) => [id, row(id, { status: 'DELIVERING' })]));
      },
      silentLogger,
      FAST,
    );
    const out = await waiter.wait('c', 60);
    expect(out.timedOut).toBe(true);
    expect(out.row?.status).toBe('DELIVERING');
    expect(calls).toBeGreaterThan(2);
  });

  it('looks once more at the deadline: wait 0 is a single look', async () => {
    let calls = 0;
    const waiter = new ResultWaiter(
      async () => {
        calls++;
        return new Map();
      },
      silentLogger,
      FAST,
    );
    expect(await waiter.wait('d', 0)).toEqual({ row: undefined, timedOut: true });
    expect(calls).toBe(1);
  });

  it('ends every wait on close', async () => {
    const waiter = new ResultWaiter(async () => new Map(), silentLogger, { firstMs: 1000, factor: 1, maxMs: 1000 });
    const w = waiter.wait('e', 60_000);
    waiter.close();
    expect(await w).toEqual({ row: undefined, timedOut: true });
    expect(await waiter.wait('f', 60_000)).toEqual({ row: undefined, timedOut: true });
  });
});

describe('RecentMessages', () => {
  const event = (id: string): EventRow => ({
    message_id: id,
    state: 'PENDING',
    at: new Date(0),
    attempt: 0,
    service: 'ingress',
    instance: 'i',
    agent_id: null,
    code: null,
    reason: null,
    detail: null,
  });

  it('remembers for a while, then forgets', () => {
    const recent = new RecentMessages(10, 1000);
    recent.remember(row('a'), event('a'), 0);
    expect(recent.get('a', 999)?.message.message_id).toBe('a');
    expect(recent.get('a', 1000)).toBeUndefined();
  });

  it('keeps at most maxEntries, dropping the oldest', () => {
    const recent = new RecentMessages(2, 60_000);
    for (const id of ['a', 'b', 'c']) recent.remember(row(id), event(id), 0);
    expect(recent.size).toBe(2);
    expect(recent.get('a', 1)).toBeUndefined();
    expect(recent.get('c', 1)?.events).toHaveLength(1);
  });
});
