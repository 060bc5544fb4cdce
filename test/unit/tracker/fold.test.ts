import { describe, expect, it } from 'vitest';
import { newMessageId, messageIdTime } from '@reach/core';
import type { StatusEvent } from '@reach/envelope';
import { resultFromJsonb } from '@reach/store';
import { detailOf, foldBatch, idsWithoutCreatedAt, isAhead, parseDetail, stateRank, unusable } from '../../../services/tracker/dist/fold.js';
import { WRITE_SQL } from '../../../services/tracker/dist/writer.js';
import { isDataError } from '@reach/store';
import { statusEventOf } from '../../helpers/envelope.js';

const T = Date.UTC(2026, 5, 1, 12);
let seq = 0;

function ev(messageId: string, state: StatusEvent['state'], at: number, over: Partial<StatusEvent> = {}): StatusEvent {
  return statusEventOf({ event_id: `evt_${++seq}`, message_id: messageId, state, at, created_at: T - 5, producer: 'agent.p', ...over });
}

describe('state order', () => {
  it('ranks the lifecycle and puts a later attempt ahead of any state of an earlier one', () => {
    expect(['PENDING', 'ROUTED', 'DELIVERING', 'DELIVERED', 'REJECTED', 'DEAD'].map(stateRank)).toEqual([0, 1, 2, 3, 3, 3]);
    expect(isAhead({ attempt: 0, state: 'ROUTED' }, { attempt: 0, state: 'PENDING' })).toBe(true);
    expect(isAhead({ attempt: 1, state: 'PENDING' }, { attempt: 0, state: 'DELIVERED' })).toBe(true);
    expect(isAhead({ attempt: 0, state: 'REJECTED' }, { attempt: 0, state: 'DELIVERED' })).toBe(false);
  });
});

describe('a cancel (DEAD 3007, A2A CancelTask) in the state order', () => {
  const canceled = { attempt: 0, state: 'DEAD', code: 3007 };
  it('beats any state that is not terminal, of any attempt; nothing moves a canceled message on', () => {
    // A retry already under way when the cancel came: its next attempt's PENDING and ROUTED.
    expect(isAhead(canceled, { attempt: 1, state: 'PENDING', code: 3002 })).toBe(true);
    expect(isAhead(canceled, { attempt: 2, state: 'ROUTED', code: null })).toBe(true);
    expect(isAhead({ attempt: 1, state: 'ROUTED', code: null }, canceled)).toBe(false);
    expect(isAhead({ attempt: 1, state: 'DEAD', code: 3005 }, canceled)).toBe(false);
    expect(isAhead({ attempt: 0, state: 'DELIVERED', code: null }, canceled)).toBe(false);
  });
  it('does not beat a terminal state: a DELIVERED that came first stays (the ack that won the race)', () => {
    expect(isAhead(canceled, { attempt: 0, state: 'DELIVERED', code: null })).toBe(false);
    expect(isAhead(canceled, { attempt: 0, state: 'REJECTED', code: 3003 })).toBe(false);
    // Any other DEAD keeps the plain order.
    expect(isAhead({ attempt: 1, state: 'DEAD', code: 3005 }, { attempt: 0, state: 'DELIVERED', code: null })).toBe(true);
  });
  it('folds a batch the same way, whatever the arrival order', () => {
    const late = foldBatch([
      ev('m', 'DEAD', T + 2, { code: 3007 }),
      ev('m', 'PENDING', T + 1, { attempt: 1, code: 3002 }),
      ev('m', 'ROUTED', T + 3, { attempt: 1 }),
    ]);
    expect(late.messages[0]).toMatchObject({ status: 'DEAD', code: 3007, attempt: 0 });
    const first = foldBatch([ev('m', 'ROUTED', T + 1, { attempt: 1 }), ev('m', 'DEAD', T + 2, { code: 3007 })]);
    expect(first.messages[0]).toMatchObject({ status: 'DEAD', code: 3007 });
    const acked = foldBatch([ev('m', 'DELIVERED', T + 1, { detail_json: '{"result":{"status":"ok","payload":1}}' }), ev('m', 'DEAD', T + 2, { code: 3007 })]);
    expect(acked.messages[0]).toMatchObject({ status: 'DELIVERED', code: null });
  });
  it('the database applies the same rule (WRITE_SQL)', () => {
    expect(WRITE_SQL).toContain("NOT (cur.status = 'DEAD' AND cur.code IS NOT DISTINCT FROM 3007)");
    expect(WRITE_SQL).toContain("(excluded.status = 'DEAD' AND excluded.code IS NOT DISTINCT FROM 3007 AND cur.state_rank < 3)");
  });
});

describe('foldBatch', () => {
  it('folds each message to its most advanced event, whatever the arrival order, and keeps every event', () => {
    const b = foldBatch([
      ev('m1', 'DELIVERED', T + 3, { agent_id: 'a1' }),
      ev('m2', 'PENDING', T),
      ev('m1', 'PENDING', T),
      ev('m1', 'ROUTED', T + 1, { agent_id: 'a1', detail_json: '{"rule":"r7","chosen":"a1"}' }),
    ]);
    expect(b.messages.map((m) => [m.message_id, m.status, m.updated_at, m.agent_id, m.rule])).toEqual([
      ['m1', 'DELIVERED', T + 3, 'a1', 'r7'],
      ['m2', 'PENDING', T, null, null],
    ]);
    expect(b.events).toHaveLength(4);
    expect(b.events.every((e) => e.created_at === T - 5)).toBe(true);
  });

  it('keeps the first of equally advanced events (as the database does) and the first result', () => {
    const b = foldBatch([
      ev('m', 'DELIVERED', T + 1, { agent_id: 'first', detail_json: '{"result":{"status":"ok","payload":1}}' }),
      ev('m', 'REJECTED', T + 2, { agent_id: 'second', code: 3003 }),
      ev('m', 'DELIVERED', T + 3, { detail_json: '{"result":{"status":"ok","payload":2}}' }),
    ]);
    expect(b.messages[0]).toMatchObject({ status: 'DELIVERED', agent_id: 'first', code: null, result: '{"status":"ok","payload":1}' });
  });

  it("a later PENDING of the same attempt says why the message waits: the router's parked 2001 replaces ingress's bare PENDING (issue #25)", () => {
    const parked = foldBatch([ev('m', 'PENDING', T + 1), ev('m', 'PENDING', T + 2, { code: 2001, reason: 'parked', service: 'router' })]);
    expect(parked.messages[0]).toMatchObject({ status: 'PENDING', code: 2001, reason: 'parked', updated_at: T + 2 });
    // an earlier PENDING arriving later does not hide it; nor does a PENDING of an earlier attempt
    const late = foldBatch([ev('m', 'PENDING', T + 2, { code: 2002, reason: 'held' }), ev('m', 'PENDING', T + 1)]);
    expect(late.messages[0]).toMatchObject({ code: 2002, reason: 'held' });
    const old = foldBatch([ev('m', 'PENDING', T + 1, { attempt: 1 }), ev('m', 'PENDING', T + 2, { attempt: 0, code: 2001 })]);
    expect(old.messages[0]).toMatchObject({ attempt: 1, code: null });
    // only PENDING is refined: terminal states keep the first
    const done = foldBatch([ev('m', 'DEAD', T + 1, { code: 3005 }), ev('m', 'DEAD', T + 2, { code: 3006 })]);
    expect(done.messages[0]).toMatchObject({ code: 3005 });
  });

  it('drops an event delivered twice in one batch to one timeline row', () => {
    const e = ev('m', 'PENDING', T);
    expect(foldBatch([e, { ...e }]).events).toHaveLength(1);
  });

  it('takes created_at from the events, else the read model, else the message id, else the event time', () => {
    const id = newMessageId(T - 60_000);
    expect(foldBatch([ev(id, 'ROUTED', T, { created_at: null }), ev(id, 'PENDING', T, { created_at: T - 7 })]).messages[0]!.created_at).toBe(T - 7);
    expect(idsWithoutCreatedAt([ev(id, 'ROUTED', T, { created_at: null }), ev('other', 'PENDING', T)])).toEqual([id]);
    expect(foldBatch([ev(id, 'ROUTED', T, { created_at: null })], new Map([[id, T - 99]])).messages[0]!.created_at).toBe(T - 99);
    expect(foldBatch([ev(id, 'ROUTED', T, { created_at: null })]).messages[0]!.created_at).toBe(messageIdTime(id));
    expect(foldBatch([ev('not-a-ulid', 'ROUTED', T, { created_at: null })]).messages[0]!.created_at).toBe(T);
  });

  it('fills metadata from any event of the message when the winner lacks it', () => {
    const b = foldBatch([ev('m', 'PENDING', T, { session_id: 's1' }), ev('m', 'DELIVERED', T + 1, { producer: null, message_type: null, trace_id: null })]);
    expect(b.messages[0]).toMatchObject({ producer: 'agent.p', message_type: 'task_request', trace_id: 'trace', session_id: 's1' });
    // Unknown NOT NULL identity fields are '' (the upsert fills them in once some event has them).
    expect(foldBatch([ev('n', 'DELIVERED', T, { producer: null })]).messages[0]!.producer).toBe('');
  });

  it('makes every value storable: no NUL, bounded text, valid priority, times and ints in range', () => {
    const b = foldBatch([
      ev('m', 'PENDING', 8.7e15, {
        reason: `a\u0000b${'x'.repeat(10_000)}`,
        priority: 'URGENT',
        code: 2 ** 40,
        attempt: -3,
        expire_at: -5,
        detail_json: '{"k\\u0000":"v\\u0000"}',
      }),
    ]);
    const [m] = b.messages;
    expect(m!.reason!.startsWith('ab')).toBe(true);
    expect(m!.reason!.length).toBe(4000);
    expect(m).toMatchObject({ priority: 'NORMAL', code: null, attempt: 0, expire_at: null });
    expect(b.events[0]!.detail).toBe('{"k":"v"}');
    expect(b.events[0]!.at).toBeLessThan(8.7e15);
  });

  it('keeps detail that is not JSON as {raw}', () => {
    expect(parseDetail('oops')).toEqual({ raw: 'oops' });
    expect(parseDetail(null)).toBeNull();
    expect(parseDetail('[1,"a\\u0000"]')).toEqual([1, 'a']);
  });

  it('stores clean detail text as it came, and only re-serialises what had to be scrubbed', () => {
    const clean = '{"candidates":[{"agent":"a","score":0.71}],"big":12345678901234567890}';
    expect(detailOf(clean).json).toBe(clean);
    expect(detailOf(clean).value).toMatchObject({ candidates: [{ agent: 'a' }] });
    expect(detailOf('{"k":"a\\u0000b"}')).toEqual({ value: { k: 'ab' }, json: '{"k":"ab"}', unscrubbed: { k: 'a\u0000b' } });
    expect(detailOf('oops')).toEqual({ value: { raw: 'oops' }, json: '{"raw":"oops"}', unscrubbed: { raw: 'oops' } });
    expect(detailOf('null')).toEqual({ value: null, json: null, unscrubbed: null });
  });

  it('keeps a result holding NUL as the agent sent it (JSON text in a jsonb string); the timeline copy is scrubbed', () => {
    const result = { status: 'ok', payload: { 'k\u0000': 'a\u0000b' } };
    const b = foldBatch([ev('m', 'DELIVERED', T, { detail_json: JSON.stringify({ result }) })]);
    const stored = b.messages[0]!.result!;
    expect(typeof JSON.parse(stored)).toBe('string');
    expect(resultFromJsonb(JSON.parse(stored))).toEqual(result);
    expect(b.events[0]!.detail).toBe('{"result":{"status":"ok","payload":{"k":"ab"}}}');
    const plain = foldBatch([ev('n', 'DELIVERED', T, { detail_json: JSON.stringify({ result: { status: 'ok', payload: 1 } }) })]);
    expect(plain.messages[0]!.result).toBe('{"status":"ok","payload":1}');
  });

  it('refuses ids no index can hold', () => {
    expect(unusable(ev('m', 'PENDING', T))).toBeUndefined();
    expect(unusable(ev('', 'PENDING', T))).toMatch(/message_id/);
    expect(unusable(ev('x'.repeat(300), 'PENDING', T))).toMatch(/message_id/);
    expect(unusable(ev('m', 'PENDING', T, { event_id: '' }))).toMatch(/event_id/);
  });
});

describe('writer', () => {
  it('tells row errors (isolate the record) from dependency errors (retry the batch)', () => {
    expect(isDataError({ code: '22P02' })).toBe(true);
    expect(isDataError({ code: '23514' })).toBe(true);
    expect(isDataError({ code: '54000' })).toBe(true);
    expect(isDataError({ code: '08006' })).toBe(false);
    expect(isDataError({ code: '40P01' })).toBe(false);
    expect(isDataError(new Error('ECONNREFUSED'))).toBe(false);
  });

  it('writes a batch in one statement whose parameters do not grow with the batch', () => {
    expect(WRITE_SQL.match(/\$\d+/g)!.length).toBe(25);
    // Forward only: a later (attempt, state_rank) — apart from a cancel, which nothing moves on (see above).
    expect(WRITE_SQL).toMatch(
      /WHERE \(NOT \(cur\.status = 'DEAD' AND cur\.code IS NOT DISTINCT FROM 3007\) AND \(\(excluded\.status = 'DEAD' AND excluded\.code IS NOT DISTINCT FROM 3007 AND cur\.state_rank < 3\) OR \(excluded\.attempt, excluded\.state_rank\) > \(cur\.attempt, cur\.state_rank\)\)\)/,
    );
    // one row per message: its new events are appended to its timeline, a known event id skipped
    expect(WRITE_SQL).not.toContain('message_events');
    expect(WRITE_SQL).toContain('timeline = cur.timeline || COALESCE((SELECT jsonb_agg(n.e) FROM');
    expect(WRITE_SQL).toContain('WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(cur.timeline) c WHERE c->0 = e->0)');
  });

  it("gives each message row its batch's events as positional timeline entries, each event once", () => {
    const id = newMessageId();
    const pending = ev(id, 'PENDING', T + 1);
    const folded = foldBatch([
      pending,
      ev(id, 'DELIVERED', T + 3, { agent_id: 'agent.a', detail_json: '{"result":{"status":"ok"}}' }),
      { ...pending },
      ev(id, 'DEAD', T + 4, { code: 3005, reason: 'budget "spent"' }),
    ]);
    expect(folded.messages).toHaveLength(1);
    const entries = JSON.parse(folded.messages[0]!.timeline) as unknown[][];
    expect(entries.map((e) => e[0])).toEqual([pending.event_id, `evt_${seq - 1}`, `evt_${seq}`]);
    expect(entries[1]).toEqual([
      `evt_${seq - 1}`,
      T + 3,
      'DELIVERED',
      0,
      pending.service,
      pending.instance ?? null,
      'agent.a',
      null,
      null,
      { result: { status: 'ok' } },
    ]);
    expect(entries[2]!.slice(7, 9)).toEqual([3005, 'budget "spent"']);
  });
});
