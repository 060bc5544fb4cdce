import { describe, expect, it } from 'vitest';
import { layoutWaterfall, routingDecision, tickStep, type TimelineEvent } from '../../../services/console/web/dist/waterfall.js';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const ev = (state: string, ms: number, attempt = 0, extra: Partial<TimelineEvent> = {}): TimelineEvent => ({
  state,
  at: new Date(T0 + ms).toISOString(),
  attempt,
  service: 'svc',
  agent_id: null,
  code: null,
  reason: null,
  detail: null,
  ...extra,
});

describe('console waterfall layout', () => {
  it('runs each bar until the next event of the message and ends a terminal state with a marker', () => {
    const layout = layoutWaterfall([{ message_id: 'm1', events: [ev('PENDING', 0), ev('ROUTED', 3), ev('DELIVERING', 6), ev('DELIVERED', 65)] }], T0 + 1000);
    expect(layout.rows.map((r) => [r.state, r.offsetMs, r.durationMs])).toEqual([
      ['PENDING', 0, 3],
      ['ROUTED', 3, 3],
      ['DELIVERING', 6, 59],
      ['DELIVERED', 65, 0],
    ]);
    expect(layout.totalMs).toBe(65);
    expect(layout.rows[2]!.leftPct).toBeCloseTo((6 / 65) * 100);
    expect(layout.rows[2]!.widthPct).toBeCloseTo((59 / 65) * 100);
    expect(layout.rows[3]!.terminal).toBe(true);
    expect(layout.rows.some((r) => r.open)).toBe(false);
  });

  it('orders events by time, then attempt, then state rank when they share a millisecond (API order does not matter)', () => {
    const layout = layoutWaterfall([{ message_id: 'm1', events: [ev('DELIVERING', 5), ev('ROUTED', 5), ev('PENDING', 0)] }], T0 + 10);
    expect(layout.rows.map((r) => r.state)).toEqual(['PENDING', 'ROUTED', 'DELIVERING']);
  });

  it('keeps a message that is still moving open until now', () => {
    const layout = layoutWaterfall([{ message_id: 'm1', events: [ev('PENDING', 0), ev('ROUTED', 10)] }], T0 + 110);
    const last = layout.rows[1]!;
    expect(last.open).toBe(true);
    expect(last.durationMs).toBe(100);
    expect(layout.totalMs).toBe(110);
  });

  it('summarises each attempt: start, end, outcome, agent and failure code', () => {
    const layout = layoutWaterfall(
      [
        {
          message_id: 'm1',
          events: [
            ev('PENDING', 0),
            ev('ROUTED', 2, 0, { agent_id: 'a1' }),
            ev('DELIVERING', 4, 0, { agent_id: 'a1' }),
            ev('PENDING', 10_004, 1, { code: 3002, reason: 'ack timeout' }),
            ev('ROUTED', 10_210, 1, { agent_id: 'a2' }),
            ev('DELIVERING', 10_212, 1, { agent_id: 'a2' }),
            ev('DELIVERED', 10_250, 1, { agent_id: 'a2' }),
          ],
        },
      ],
      T0 + 20_000,
    );
    expect(layout.attempts).toEqual([
      { message_id: 'm1', attempt: 0, startMs: T0, endMs: T0 + 10_004, durationMs: 10_004, outcome: 'DELIVERING', agent_id: 'a1', code: null },
      { message_id: 'm1', attempt: 1, startMs: T0 + 10_004, endMs: T0 + 10_250, durationMs: 246, outcome: 'DELIVERED', agent_id: 'a2', code: 3002 },
    ]);
  });

  it('puts fan-out copies under their parent on one shared axis', () => {
    const layout = layoutWaterfall(
      [
        { message_id: 'copy-b', parent_message_id: 'parent', events: [ev('PENDING', 8), ev('DELIVERED', 20)] },
        { message_id: 'parent', events: [ev('PENDING', 0), ev('ROUTED', 5), ev('DELIVERED', 6)] },
        { message_id: 'copy-a', parent_message_id: 'parent', events: [ev('PENDING', 7), ev('DELIVERED', 30)] },
      ],
      T0 + 100,
    );
    expect([...new Set(layout.rows.map((r) => `${r.message_id}:${r.depth}`))]).toEqual(['parent:0', 'copy-b:1', 'copy-a:1']);
    expect(layout.startMs).toBe(T0);
    expect(layout.totalMs).toBe(30);
  });

  it('lays out nothing for no events', () => {
    expect(layoutWaterfall([{ message_id: 'm', events: [] }], T0)).toEqual({ startMs: T0, endMs: T0, totalMs: 0, rows: [], attempts: [], ticks: [] });
  });

  it('picks 1-2-5 tick steps giving about five ticks', () => {
    expect(tickStep(65)).toBe(20);
    expect(tickStep(1000)).toBe(200);
    expect(tickStep(10_250)).toBe(5000);
    expect(tickStep(0)).toBe(0.2);
    const { ticks } = layoutWaterfall([{ message_id: 'm', events: [ev('PENDING', 0), ev('DELIVERED', 65)] }], T0);
    expect(ticks.map((t) => t.ms)).toEqual([0, 20, 40, 60]);
  });
});

describe('console routing decision', () => {
  it('reads the router trace: strategy, rule, chosen, candidates best first, the rest kept', () => {
    const d = routingDecision({
      strategy: 'weighted',
      rule: 'prefer-gpu',
      chosen: 'b',
      candidates: [
        { agent_id: 'a', score: 0.5, load_rate: 0.2 },
        { agent_id: 'b', score: 0.9, load_rate: 0 },
      ],
      candidates_total: 7,
      rejected: { lease: 2 },
    });
    expect(d).toEqual({
      strategy: 'weighted',
      rule: 'prefer-gpu',
      chosen: 'b',
      candidates: [
        { agent_id: 'b', score: 0.9, load_rate: 0 },
        { agent_id: 'a', score: 0.5, load_rate: 0.2 },
      ],
      candidatesTotal: 7,
      extra: { rejected: { lease: 2 } },
    });
  });

  it('is undefined for details that are no routing trace', () => {
    expect(routingDecision({ seq: 1, deadline: 'x' })).toBeUndefined();
    expect(routingDecision(null)).toBeUndefined();
    expect(routingDecision({ strategy: 'broadcast', address: 't', considered: 0 })?.candidates).toEqual([]);
  });
});
