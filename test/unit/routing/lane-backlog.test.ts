import { describe, expect, it } from 'vitest';
import { decodeLaneBacklog, encodeLaneBacklog, LANE_BACKLOG_MAX_AGE_MS, routeMessage, staleLaneBacklog } from '@reach/routing';
import { agent, chosen, deps, envelope, hints, indexOf, NOW } from './fixtures.js';

const backlogOf =
  (waiting: Record<string, number>) =>
  (id: string): number =>
    waiting[id] ?? 0;

describe('lane backlog reports', () => {
  it('reads fresh reports of agents with deliveries waiting, and drops stale, empty or malformed ones', () => {
    const fields = {
      busy: encodeLaneBacklog(12, NOW - 100),
      old: encodeLaneBacklog(5, NOW - LANE_BACKLOG_MAX_AGE_MS - 1),
      empty: encodeLaneBacklog(0, NOW),
      junk: 'x:y',
    };
    expect(decodeLaneBacklog(fields, NOW)).toEqual(new Map([['busy', 12]]));
    expect(staleLaneBacklog(fields, NOW, 10_000)).toEqual(['junk']);
    expect(staleLaneBacklog(fields, NOW + 20_000, 10_000).sort()).toEqual(['busy', 'empty', 'junk', 'old']);
  });
});

describe('routeMessage with a lane backlog', () => {
  it('gives new work to a candidate with nothing waiting, even when the backlogged one scores better', async () => {
    const index = indexOf(agent('queued', { currentLoad: 0 }), agent('clear', { currentLoad: 5 }));
    for (let i = 0; i < 20; i++) {
      const d = await routeMessage(envelope(), hints(), { ...deps(index), backlog: backlogOf({ queued: 30 }) }, NOW);
      expect(chosen(d)).toBe('clear');
      if (d.kind === 'routed') expect(d.trace.candidates.find((c) => c.agent_id === 'queued')).toMatchObject({ waiting: 30 });
    }
    // Without the report the better score wins, as before.
    expect(chosen(await routeMessage(envelope(), hints(), deps(index), NOW))).toBe('queued');
  });

  it('with every candidate queued, picks among the shortest queues in rounds of max_concurrency; honours a preference', async () => {
    const index = indexOf(agent('capped', { currentLoad: 0, maxConcurrency: 2 }), agent('wide', { currentLoad: 5, maxConcurrency: 200 }));
    // capped: 8 waiting = 4 rounds; wide: 50 waiting = 0.25 rounds.
    const queued = { ...deps(index), backlog: backlogOf({ capped: 8, wide: 50 }) };
    for (let i = 0; i < 10; i++) expect(chosen(await routeMessage(envelope(), hints(), queued, NOW))).toBe('wide');
    // Within one round of each other: the score decides, as without a report.
    const close = { ...deps(index), backlog: backlogOf({ capped: 1, wide: 100 }) };
    expect(chosen(await routeMessage(envelope(), hints(), close, NOW))).toBe('capped');
    expect(chosen(await routeMessage(envelope(), hints({ preferredAgent: 'capped' }), queued, NOW))).toBe('capped');
  });
});
