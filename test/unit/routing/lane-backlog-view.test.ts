import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { encodeLaneBacklog, routeMessage } from '@reach/routing';
import type { Redis } from '@reach/store';
import { LaneBacklogView } from '../../../services/router/dist/lane-backlog.js';
import { agent, chosen, deps, envelope, hints, indexOf, NOW } from './fixtures.js';

/** A Redis that answers HGETALL of the lane-backlog hash with `fields`. */
const redisWith = (fields: Record<string, string>) => ({ hgetall: () => Promise.resolve(fields) }) as unknown as Redis;

/** Routes `n` records one after another, as a router's batch does; counts per chosen agent. */
async function routeBatch(view: LaneBacklogView, n: number, noteRouted: boolean): Promise<Record<string, number>> {
  const index = indexOf(
    agent('best', { maxConcurrency: 64 }),
    agent('second', { maxConcurrency: 64, currentLoad: 1 }),
    agent('third', { maxConcurrency: 64, currentLoad: 2 }),
  );
  const counts: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const d = await routeMessage(envelope(), hints(), { ...deps(index), backlog: (id) => view.of(id) }, NOW);
    const id = chosen(d)!;
    counts[id] = (counts[id] ?? 0) + 1;
    if (noteRouted) view.routed(id);
  }
  return counts;
}

describe("the router's lane-backlog view", () => {
  it('counts what this router just routed, so one batch is spread over the candidates instead of all going to the best', async () => {
    const view = new LaneBacklogView(redisWith({}), silentLogger);
    await view.refresh(NOW);
    // Without counting its own sends, every record of the batch sees the same report.
    expect(await routeBatch(view, 192, false)).toEqual({ best: 192 });
    const spread = await routeBatch(view, 192, true);
    expect(Object.keys(spread).sort()).toEqual(['best', 'second', 'third']);
    // The least-queued rule keeps every candidate within one round (max_concurrency) of the least.
    expect(Math.max(...Object.values(spread)) - Math.min(...Object.values(spread))).toBeLessThanOrEqual(64 + 1);
  });

  it("adds the dispatcher's report to what was routed in the current and the previous period, and forgets it after that", async () => {
    const view = new LaneBacklogView(redisWith({ best: encodeLaneBacklog(7, Date.now()) }), silentLogger);
    await view.refresh();
    view.routed('best');
    view.routed('best');
    expect(view.of('best')).toBe(9);
    await view.refresh();
    view.routed('best');
    expect(view.of('best')).toBe(10);
    await view.refresh();
    expect(view.of('best')).toBe(8);
    await view.refresh();
    expect(view.of('best')).toBe(7);
    expect(view.of('other')).toBe(0);
  });
});
