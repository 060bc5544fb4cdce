import { describe, expect, it } from 'vitest';
import { newId, newMessageId } from '@reach/core';
import type { AgentRecord, DeadLetter, Envelope } from '@reach/envelope';
import { entryFromDeadLetter, entryFromUndecodable, entryJson, historyOf, replayProblem, type EntryRow } from '../../../services/dead-letter/dist/entry.js';
import {
  bulkReplayFromBody,
  decodeCursor,
  encodeCursor,
  listFilterFromQuery,
  parseTimeParam,
  whereClause,
  DEFAULT_RATE_PER_S,
} from '../../../services/dead-letter/dist/filters.js';
import { nextAttempt, replayRecord } from '../../../services/dead-letter/dist/replayer.js';
import { agentServes, lookupKeys, redriveDecision } from '../../../services/dead-letter/dist/redrive-match.js';

const T = Date.UTC(2026, 5, 1, 12);
const ADMIN = 'admin-token-0123456789abcdef';

function env(over: Partial<Envelope> = {}): Envelope {
  return {
    message_id: newMessageId(T),
    message_type: 'task_request',
    capability: 'summarize',
    topic: null,
    target_agent_id: null,
    producer: 'agent-a',
    trace_id: 'trace-1',
    request_id: null,
    idempotency_key: 'k1',
    session_id: null,
    correlation_id: null,
    reply_to: null,
    priority: 'NORMAL',
    tags: [],
    retryable: true,
    timeout_ms: null,
    created_at: T,
    expire_at: T + 60_000,
    schema_version: 1,
    content_type: 'application/json',
    payload: Buffer.from('{"a":1}'),
    headers: {},
    ...over,
  } as Envelope;
}

function dl(over: Partial<DeadLetter> = {}): DeadLetter {
  const e = over.envelope === undefined ? env() : over.envelope;
  return {
    dlq_id: newId('dlq', T),
    message_id: e?.message_id ?? null,
    reason: 'NO_ROUTE',
    code: 2001,
    error: 'no live agent',
    at: T,
    service: 'router',
    source_topic: 'reach.pending.v1',
    source_partition: 3,
    source_offset: 42,
    attempts: 0,
    producer: e?.producer ?? null,
    trace_id: e?.trace_id ?? null,
    history_json: null,
    envelope: e,
    raw_key: null,
    raw_value: null,
    raw_headers: {},
    ...over,
  } as DeadLetter;
}

function row(over: Partial<EntryRow> = {}): EntryRow {
  return {
    dlq_id: 'dlq_1',
    message_id: 'msg_1',
    reason: 'NO_ROUTE',
    code: 2001,
    error: 'x',
    service: 'router',
    source_topic: 'reach.pending.v1',
    source_partition: 1,
    source_offset: '2',
    attempts: 0,
    producer: 'agent-a',
    trace_id: 't',
    capability: 'summarize',
    message_type: 'task_request',
    history: [],
    envelope: Buffer.from([0, 0, 0, 0, 1, 2]),
    envelope_json: { message_id: 'msg_1', capability: 'summarize', expire_at: new Date(T + 60_000).toISOString(), session_id: null },
    status: 'PARKED',
    created_at: new Date(T),
    updated_at: new Date(T),
    replayed_at: null,
    replay_count: 0,
    traceparent: null,
    ...over,
  };
}

function agent(over: Partial<AgentRecord> = {}): AgentRecord {
  return {
    agent_id: 'agent-1',
    status: 'ONLINE',
    lease_expires_at: T + 30_000,
    capabilities: [{ name: 'summarize', version: '2.1', mode: 'handle', tags: [], consumption: 'single', scope_json: null, constraints_json: null }],
    ...over,
  } as AgentRecord;
}

describe('dead-letter entries', () => {
  it('maps a decoded DeadLetter to a row: source position, envelope JSON and the replay bytes', () => {
    const d = dl({ history_json: JSON.stringify({ candidates: [] }) });
    const r = entryFromDeadLetter(d, Buffer.from('framed'));
    expect(r).toMatchObject({
      dlq_id: d.dlq_id,
      message_id: d.message_id,
      reason: 'NO_ROUTE',
      source_partition: 3,
      source_offset: '42',
      capability: 'summarize',
      message_type: 'task_request',
      producer: 'agent-a',
      created_at: new Date(T).toISOString(),
    });
    expect(r.envelope!.toString()).toBe('framed');
    expect(JSON.parse(r.envelope_json!)).toMatchObject({ message_id: d.message_id, payload: { a: 1 }, expire_at: new Date(T + 60_000).toISOString() });
    expect(JSON.parse(r.history)).toEqual([{ candidates: [] }]);
  });

  it('an entry without a consumed record (HTTP, partition -1) has no source position; a raw one keeps its bytes', () => {
    const r = entryFromDeadLetter(dl({ envelope: null, source_partition: -1, source_offset: -1, raw_value: Buffer.from('junk') }), null);
    expect(r.source_partition).toBeNull();
    expect(r.source_offset).toBeNull();
    expect(r.envelope_json).toBeNull();
    expect(r.envelope!.toString()).toBe('junk');
  });

  it('an undecodable DLQ record is kept raw under its own DLQ position', () => {
    const r = entryFromUndecodable(
      { topic: 'reach.dlq.v1', partition: 2, offset: '7', value: Buffer.from('x'), timestamp: String(T) },
      'dlq_x',
      { code: 4101, message: 'bad' },
      'dead-letter',
    );
    expect(r).toMatchObject({
      reason: 'UNPROCESSABLE',
      source_topic: 'reach.dlq.v1',
      source_partition: 2,
      source_offset: '7',
      created_at: new Date(T).toISOString(),
    });
  });

  it('history is always an array', () => {
    expect(historyOf(null)).toEqual([]);
    expect(historyOf('[1,2]')).toEqual([1, 2]);
    expect(historyOf('{"a":1}')).toEqual([{ a: 1 }]);
    expect(historyOf('not json')).toEqual([{ unparsed: 'not json' }]);
  });

  it('only entries with a decoded envelope, not purged, are replayable', () => {
    expect(replayProblem(row())).toBeUndefined();
    expect(replayProblem(row({ envelope_json: null }))).toMatch(/could not be decoded/);
    expect(replayProblem(row({ status: 'PURGED' }))).toMatch(/purged/);
  });

  it('JSON form: summary without envelope; full with envelope or raw bytes', () => {
    const summary = entryJson(row(), false);
    expect(summary).toMatchObject({ dlq_id: 'dlq_1', name: 'NO_ROUTE', replayable: true, expire_at: new Date(T + 60_000).toISOString() });
    expect(summary).not.toHaveProperty('envelope');
    const raw = entryJson(row({ envelope_json: null, envelope: Buffer.from('zz') }), true);
    expect(raw).toMatchObject({ replayable: false, envelope: null, raw_b64: Buffer.from('zz').toString('base64') });
  });
});

describe('filters', () => {
  it('times are RFC 3339 or epoch ms', () => {
    expect(parseTimeParam('2026-06-01T12:00:00Z', 'since')).toBe(T);
    expect(parseTimeParam(String(T), 'since')).toBe(T);
    expect(parseTimeParam(T, 'since')).toBe(T);
    expect(parseTimeParam(undefined, 'since')).toBeUndefined();
    expect(() => parseTimeParam('yesterday', 'since')).toThrow(/since/);
  });

  it('list query: reason upper-cased, limit bounded, cursor round-trips', () => {
    const c = encodeCursor(new Date(T), 'dlq_9');
    expect(decodeCursor(c)).toEqual({ at: T, id: 'dlq_9' });
    const { filter, limit } = listFilterFromQuery(new URLSearchParams({ reason: 'no_route', capability: 'summarize@2', limit: '5', cursor: c }));
    expect(filter).toMatchObject({ reason: 'NO_ROUTE', capability: 'summarize@2', before: { at: T, id: 'dlq_9' } });
    expect(limit).toBe(5);
    expect(() => listFilterFromQuery(new URLSearchParams({ limit: '0' }))).toThrow(/limit/);
    expect(() => listFilterFromQuery(new URLSearchParams({ status: 'WHATEVER' }))).toThrow(/status/);
    expect(() => listFilterFromQuery(new URLSearchParams({ cursor: 'garbage' }))).toThrow(/cursor/);
  });

  it('bulk body: defaults, unknown fields and an empty filter refused', () => {
    const r = bulkReplayFromBody({ reason: 'REJECTED', dry_run: true });
    expect(r).toMatchObject({ dryRun: true, ratePerS: DEFAULT_RATE_PER_S, limit: 1000, filter: { reason: 'REJECTED' } });
    expect(bulkReplayFromBody({ ids: ['dlq_1'], rate_per_s: 5 }).ratePerS).toBe(5);
    expect(() => bulkReplayFromBody({})).toThrow(/at least one/);
    expect(() => bulkReplayFromBody({ reason: 'X', colour: 'red' })).toThrow(/colour/);
    expect(() => bulkReplayFromBody({ reason: 'X', rate_per_s: 0 })).toThrow(/rate_per_s/);
    expect(() => bulkReplayFromBody({ reason: 'X', dry_run: 'yes' })).toThrow(/dry_run/);
    expect(() => bulkReplayFromBody({ ids: [] })).toThrow(/ids/);
  });

  it('WHERE: purged hidden unless asked; capability by base name unless pinned; numbered parameters', () => {
    const w = whereClause({ reason: 'NO_ROUTE', capability: 'summarize', since: T }, 3);
    expect(w.sql).toBe(`reason = $3 AND split_part(capability, '@', 1) = $4 AND status <> 'PURGED' AND created_at >= $5::timestamptz`);
    expect(w.params).toEqual(['NO_ROUTE', 'summarize', new Date(T).toISOString()]);
    expect(whereClause({ capability: 'summarize@2', status: 'PURGED' }).sql).toBe('capability = $1 AND status = $2');
  });
});

describe('replay', () => {
  it('a replay is the attempt after every attempt made: attempts counts them, the read model and history number them', () => {
    // one attempt 0 made (issue #25: this was replayed as attempt 2)
    expect(nextAttempt(1, 0)).toBe(1);
    expect(nextAttempt(1, null)).toBe(1);
    // parked before any delivery: the read model shows attempt 0
    expect(nextAttempt(0, 0)).toBe(1);
    expect(nextAttempt(0, null)).toBe(1);
    // attempts 0 and 1 failed
    expect(nextAttempt(2, null)).toBe(2);
    expect(nextAttempt(2, 1)).toBe(2);
    // the read model already shows a later attempt
    expect(nextAttempt(1, 4)).toBe(5);
    // a second replay before the read model shows the first
    expect(
      nextAttempt(1, 0, [
        { attempt: 0, code: 3003 },
        { event: 'REPLAYED', attempt: 1, cause: 'manual' },
      ]),
    ).toBe(2);
    expect(nextAttempt(1, 0, [{ event: 'REPLAYED', attempt: 'x' }, { event: 'DEAD' }])).toBe(1);
  });

  it('the replay record: stored bytes to reach.ingress.v1 with the admin token and the attempt, keyed like ingress', () => {
    const r = replayRecord(row(), ADMIN, 3);
    expect(r).toMatchObject({ topic: 'reach.ingress.v1', key: 'msg_1', headers: { 'reach-token': ADMIN, 'reach-attempt': '3' } });
    expect(r.value).toEqual(row().envelope);
    expect(replayRecord(row({ envelope_json: { message_id: 'msg_1', session_id: 's-1' } }), ADMIN, 1).key).toBe('s-1');
    // No stored trace context: no traceparent header (ingress starts a root span of the trace id).
    expect(r.headers).not.toHaveProperty('traceparent');
  });

  it('the replay record continues the trace context it is given (the replay span, or the stored one)', () => {
    const tp = `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`;
    expect(replayRecord(row(), ADMIN, 2, tp).headers).toEqual({ 'reach-token': ADMIN, 'reach-attempt': '2', traceparent: tp });
    expect(replayRecord(row(), ADMIN, 2, null).headers).toEqual({ 'reach-token': ADMIN, 'reach-attempt': '2' });
  });
});

describe('redrive matching', () => {
  const pinned = row({ capability: 'summarize@2', envelope_json: { capability: 'summarize@2', expire_at: new Date(T + 60_000).toISOString() } });

  it('a handle capability matches exactly, a pinned @major must match the version', () => {
    expect(redriveDecision(row(), [agent()], T)).toBe('replay');
    expect(redriveDecision(pinned, [agent()], T)).toBe('replay');
    expect(redriveDecision(pinned, [agent({ capabilities: [{ ...agent().capabilities[0]!, version: '3.0' }] })], T)).toBe('wait');
    expect(redriveDecision(row({ capability: 'summarize_text' }), [agent()], T)).toBe('wait');
  });

  it('only agents that take new work count; subscribe capabilities do not serve a capability', () => {
    expect(redriveDecision(row(), [agent({ status: 'COOLDOWN' })], T)).toBe('wait');
    expect(redriveDecision(row(), [agent({ lease_expires_at: T - 1 })], T)).toBe('wait');
    expect(redriveDecision(row(), [agent({ capabilities: [{ ...agent().capabilities[0]!, mode: 'subscribe' }] })], T)).toBe('wait');
  });

  it('topics match subscribers; target agents match by id', () => {
    const sub = agent({ capabilities: [{ ...agent().capabilities[0]!, name: 'news', mode: 'subscribe' }] });
    expect(agentServes(sub, { capability: null, topic: 'news', targetAgentId: null }, T)).toBe(true);
    expect(agentServes(agent(), { capability: null, topic: null, targetAgentId: 'agent-1' }, T)).toBe(true);
    expect(agentServes(agent(), { capability: null, topic: null, targetAgentId: 'agent-2' }, T)).toBe(false);
    expect(lookupKeys([agent(), sub])).toEqual({ capabilityBases: ['summarize'], topics: ['news'], agentIds: ['agent-1', 'agent-1'] });
  });

  it('an entry past its expire_at expires instead of being redriven', () => {
    expect(redriveDecision(row(), [agent()], T + 60_000)).toBe('expired');
  });
});
