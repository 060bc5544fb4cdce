import { describe, expect, it } from 'vitest';
import { elapsedMs, parentsOf, stageName, stagesOf, traceTree, type TraceEvent, type TraceMessage } from '../../../services/ingress/dist/trace-tree.js';
import { stageLine, treeLines } from '../../../packages/cli/dist/commands/trace.js';

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const at = (ms: number) => new Date(T0 + ms);

function ev(state: string, ms: number, more: Partial<TraceEvent> = {}): TraceEvent {
  return { state, at: at(ms), attempt: 0, service: 'x', code: null, detail: null, ...more };
}

function msg(id: string, createdMs: number, more: Partial<TraceMessage> = {}): TraceMessage {
  return { message_id: id, created_at: at(createdMs), producer: 'sender', agent_id: null, parent_message_id: null, correlation_id: null, ...more };
}

describe('per-stage durations from a timeline', () => {
  it('names the stages of a delivered message: ingest, route, dispatch, agent, result', () => {
    const events = [
      ev('PENDING', 2, { service: 'ingress' }),
      ev('ROUTED', 5, { service: 'router' }),
      ev('DELIVERING', 6, { service: 'dispatcher', detail: { seq: 1 } }),
      ev('DELIVERED', 40, { service: 'dispatcher' }),
      ev('DELIVERED', 41, { service: 'dispatcher', detail: { result: { status: 'ok' } } }),
    ];
    const stages = stagesOf(at(0), events);
    expect(stages.map((s) => [s.stage, s.duration_ms])).toEqual([
      ['ingest', 2],
      ['route', 3],
      ['dispatch', 1],
      ['agent', 34],
      ['result', 1],
    ]);
    expect(stages[1]).toEqual({
      stage: 'route',
      attempt: 0,
      from: 'PENDING',
      to: 'ROUTED',
      started_at: at(2).toISOString(),
      ended_at: at(5).toISOString(),
      duration_ms: 3,
      service: 'router',
    });
    expect(elapsedMs(at(0), events)).toBe(41);
  });

  it('keeps a failed attempt, the retry wait and the next attempt apart', () => {
    const events = [
      ev('PENDING', 0, { service: 'ingress' }),
      ev('ROUTED', 1, { service: 'router' }),
      ev('DELIVERING', 2, { service: 'dispatcher' }),
      // ack deadline missed: the dispatcher opens attempt 1, the retry-scheduler re-publishes it
      ev('PENDING', 1002, { service: 'dispatcher', attempt: 1, code: 3002 }),
      ev('PENDING', 1202, { service: 'retry-scheduler', attempt: 1 }),
      ev('ROUTED', 1204, { service: 'router', attempt: 1 }),
      ev('DELIVERING', 1205, { service: 'dispatcher', attempt: 1, detail: { waiting: 'NORMAL' } }),
      ev('DELIVERING', 1300, { service: 'dispatcher', attempt: 1, detail: { seq: 2, waited_ms: 95 } }),
      ev('DELIVERED', 1310, { service: 'dispatcher', attempt: 1 }),
    ];
    expect(stagesOf(at(0), events).map((s) => `${s.stage}#${s.attempt}:${s.duration_ms}`)).toEqual([
      'ingest#0:0',
      'route#0:1',
      'dispatch#0:1',
      'agent#0:1000',
      'retry_wait#1:200',
      'route#1:2',
      'dispatch#1:1',
      'lane_wait#1:95',
      'agent#1:10',
    ]);
  });

  it('names holds, parking and budget deaths, and skips duplicate events', () => {
    // routing that ends in a hold or parking is routing; the time held or parked comes after
    expect(stageName(ev('PENDING', 0, { service: 'ingress' }), ev('PENDING', 3, { code: 2002, service: 'router' }))).toBe('route');
    expect(stageName(ev('PENDING', 0, { code: 2002, service: 'router' }), ev('ROUTED', 5, { service: 'router' }))).toBe('held');
    expect(stageName(ev('PENDING', 0, { service: 'ingress' }), ev('PENDING', 3, { code: 2001, service: 'router' }))).toBe('route');
    expect(stageName(ev('PENDING', 0, { code: 2001, service: 'router' }), ev('PENDING', 5, { service: 'ingress' }))).toBe('parked');
    // a lane wait that ran out (2002 from the dispatcher) is a failed attempt, then a retry wait
    expect(stageName(ev('PENDING', 0, { code: 2002, service: 'dispatcher', attempt: 1 }), ev('PENDING', 5, { service: 'retry-scheduler', attempt: 1 }))).toBe(
      'retry_wait',
    );
    expect(stageName(ev('PENDING', 0, { service: 'dispatcher', attempt: 1 }), ev('DEAD', 5, { service: 'retry-scheduler', attempt: 1 }))).toBe('retry_wait');
    expect(stageName(ev('PENDING', 0), ev('REJECTED', 1))).toBe('route');
    expect(stageName(ev('ROUTED', 0), ev('ROUTED', 0))).toBeUndefined();
    expect(stageName(ev('PENDING', 0, { service: 'ingress' }), ev('PENDING', 0, { service: 'ingress' }))).toBeUndefined();
    expect(stageName(ev('PENDING', 0, { service: 'router', code: 2002 }), ev('PENDING', 9, { service: 'router', code: 2002 }))).toBeUndefined();
    expect(stageName(ev('DELIVERING', 0), ev('DELIVERING', 1))).toBeUndefined();
    expect(stageName(ev('DELIVERING', 0), ev('DEAD', 1))).toBe('agent');
    expect(stageName(ev('REJECTED', 0), ev('DEAD', 1))).toBe('rejected_to_dead');
  });

  it('times a repeated hold from its first report', () => {
    const events = [
      ev('PENDING', 0, { service: 'ingress' }),
      ev('PENDING', 2, { service: 'router', code: 2002 }),
      ev('PENDING', 1002, { service: 'router', code: 2002 }),
      ev('PENDING', 2002, { service: 'router', code: 2002 }),
      ev('ROUTED', 3003, { service: 'router' }),
    ];
    expect(stagesOf(at(0), events).map((s) => [s.stage, s.duration_ms])).toEqual([
      ['ingest', 0],
      ['route', 2],
      ['held', 3001],
    ]);
  });

  it('starts a fan-out copy at its ROUTED event (no ingest), and has nothing for a message without events', () => {
    const copy = [ev('ROUTED', 10), ev('DELIVERING', 11), ev('DELIVERED', 20)];
    expect(stagesOf(at(0), copy).map((s) => s.stage)).toEqual(['dispatch', 'agent']);
    expect(elapsedMs(at(0), copy)).toBe(10);
    expect(stagesOf(at(0), [])).toEqual([]);
    expect(elapsedMs(at(0), [])).toBeNull();
  });
});

describe('the trace tree', () => {
  const request = msg('m1', 0, { agent_id: 'worker', producer: 'sender' });
  const copyA = msg('m2', 1, { parent_message_id: 'm3', agent_id: 'sub-a' });
  const topic = msg('m3', 1, { producer: 'worker' }); // published by worker's handler
  const reply = msg('m4', 30, { producer: 'worker', correlation_id: 'm1', agent_id: 'sender' });
  const unrelated = msg('m5', 50, { producer: 'someone-else' });
  const events: Record<string, TraceEvent[]> = {
    m1: [ev('PENDING', 0), ev('ROUTED', 0), ev('DELIVERING', 1, { detail: { seq: 1 } }), ev('DELIVERED', 30)],
    m2: [ev('ROUTED', 2), ev('DELIVERING', 3), ev('DELIVERED', 9)],
    m3: [ev('PENDING', 1), ev('ROUTED', 2)],
    m4: [ev('PENDING', 30), ev('ROUTED', 31), ev('DELIVERING', 31), ev('DELIVERED', 33)],
    m5: [ev('PENDING', 50)],
  };
  const eventsOf = (id: string) => events[id] ?? [];

  it('links fan-out copies, replies and messages sent by a handler', () => {
    const parents = parentsOf([request, copyA, topic, reply, unrelated], eventsOf);
    expect(Object.fromEntries(parents)).toEqual({
      m2: { parent: 'm3', link: 'fanout' },
      m3: { parent: 'm1', link: 'sent_by_handler' },
      m4: { parent: 'm1', link: 'reply' },
    });
  });

  it('builds a forest in message order, every message exactly once', () => {
    expect(traceTree([request, copyA, topic, reply, unrelated], eventsOf)).toEqual([
      {
        message_id: 'm1',
        link: 'root',
        children: [
          { message_id: 'm3', link: 'sent_by_handler', children: [{ message_id: 'm2', link: 'fanout', children: [] }] },
          { message_id: 'm4', link: 'reply', children: [] },
        ],
      },
      { message_id: 'm5', link: 'root', children: [] },
    ]);
  });

  it('never links a message to one delivered after it was created, nor to itself', () => {
    const early = msg('e1', 0, { producer: 'worker' });
    const later = msg('e2', 5, { agent_id: 'worker' });
    const self = msg('e3', 10, { producer: 'a', agent_id: 'a', parent_message_id: 'e3', correlation_id: 'e3' });
    const ev2: Record<string, TraceEvent[]> = { e1: [ev('PENDING', 0)], e2: [ev('DELIVERING', 6)], e3: [ev('DELIVERING', 11)] };
    expect(parentsOf([early, later, self], (id) => ev2[id] ?? []).size).toBe(0);
  });

  it('breaks a cycle of bad links instead of losing messages', () => {
    const a = msg('c1', 0, { correlation_id: 'c2' });
    const b = msg('c2', 0, { correlation_id: 'c1' });
    const tree = traceTree([a, b], () => []);
    expect(tree).toEqual([{ message_id: 'c1', link: 'root', children: [{ message_id: 'c2', link: 'reply', children: [] }] }]);
  });
});

describe('reach trace output', () => {
  it('prints the tree indented, each message with its stages', () => {
    const body = {
      messages: [
        {
          message_id: 'm1',
          message_type: 'task_request',
          capability: 'cap',
          status: 'DELIVERED',
          agent_id: 'worker',
          elapsed_ms: 40,
          stages: [
            { stage: 'route', attempt: 0, duration_ms: 2 },
            { stage: 'agent', attempt: 1, duration_ms: 30 },
          ],
        },
        { message_id: 'm4', message_type: 'task_result', target_agent_id: 'sender', status: 'DELIVERED', elapsed_ms: 3, stages: [] },
      ],
      tree: [{ message_id: 'm1', link: 'root', children: [{ message_id: 'm4', link: 'reply', children: [] }] }],
    };
    expect(stageLine(body.messages[0]!.stages)).toBe('route 2 ms · agent#1 30 ms');
    expect(treeLines(body)).toEqual([
      'm1  task_request → cap  DELIVERED @ worker  40 ms',
      '│  route 2 ms · agent#1 30 ms',
      '└─ (reply) m4  task_result → agent:sender  DELIVERED  3 ms',
    ]);
  });
});
