/**
 * Priority lanes (R-D9): which waiting delivery of an agent gets the next free slot.
 *
 * Each agent has three FIFO lanes, HIGH / NORMAL / LOW, served by smooth weighted round robin
 * over the lanes that are not empty: every pick adds each non-empty lane's weight to its
 * credit, takes the lane with the most credit (ties: the higher priority) and takes the sum of
 * those weights off the chosen lane's credit. While all three lanes stay busy the picks follow
 * the weights exactly (60/30/10 by default: 6 HIGH, 3 NORMAL, 1 LOW in every 10, interleaved),
 * so LOW is never starved; an empty lane takes no part, so its share goes to the others in
 * proportion to their weights.
 *
 * A lane that runs empty hands its credit (a lead or a debt) to the lanes still busy, in
 * proportion to their weights, and restarts at 0 when it fills again. So the busy lanes'
 * credits always sum to zero and stay small: a lane that comes back neither brings a saved-up
 * burst nor a debt, and a HIGH message arriving at a NORMAL/LOW backlog is promoted next; and
 * a lane that keeps emptying and refilling does not shift the others' shares between them.
 *
 * This is the reference the promotion script in buffer-scripts.ts implements in Lua (the
 * integration test compares the two on random sequences); the state lives in Redis per agent.
 */
export const LANES = ['HIGH', 'NORMAL', 'LOW'] as const;
export type Lane = (typeof LANES)[number];
export type LaneIndex = 0 | 1 | 2;
/** One number per lane, in LANES order. */
export type PerLane = readonly [number, number, number];

/** The lane of a priority; anything unknown is NORMAL (tolerant reader). */
export function laneOf(priority: string | null | undefined): LaneIndex {
  return priority === 'HIGH' ? 0 : priority === 'LOW' ? 2 : 1;
}

/**
 * The lane of the next promotion and the credits after it, given each lane's length before the
 * pick; undefined when every lane is empty.
 */
export function nextLane(credits: PerLane, weights: PerLane, queued: PerLane): { lane: LaneIndex; credits: PerLane } | undefined {
  const c = [...credits] as [number, number, number];
  let total = 0;
  let best: LaneIndex | undefined;
  for (const i of [0, 1, 2] as const) {
    if (queued[i] <= 0) continue;
    c[i] += weights[i];
    total += weights[i];
    if (best === undefined || c[i] > c[best]) best = i;
  }
  if (best === undefined) return undefined;
  c[best] -= total;
  if (queued[best] === 1) {
    const after = [...queued] as [number, number, number];
    after[best] = 0;
    return { lane: best, credits: laneEmptied(c, weights, after, best) };
  }
  return { lane: best, credits: c };
}

/**
 * The credits after `lane` ran empty (`queued` = the lengths now): its credit goes to the busy
 * lanes in proportion to their weights, and it restarts at 0. With no busy lane left, all are 0.
 */
export function laneEmptied(credits: PerLane, weights: PerLane, queued: PerLane, lane: LaneIndex): PerLane {
  const c = [...credits] as [number, number, number];
  const left = c[lane];
  c[lane] = 0;
  let busy = 0;
  for (const i of [0, 1, 2] as const) if (i !== lane && queued[i] > 0) busy += weights[i];
  if (busy === 0) return [0, 0, 0];
  // The same operations, in the same order, as the Lua: the two give identical doubles.
  for (const i of [0, 1, 2] as const) if (i !== lane && queued[i] > 0) c[i] = c[i] + (left * weights[i]) / busy;
  return c;
}

/** A whole agent's lanes in memory, for tests and simulations: `take()` is one promotion. */
export class LaneModel {
  private credits: PerLane = [0, 0, 0];
  private readonly queues: [number[], number[], number[]] = [[], [], []];

  constructor(private readonly weights: PerLane) {}

  push(lane: LaneIndex, item: number): void {
    this.queues[lane].push(item);
  }

  /** The oldest item of a lane. */
  peek(lane: LaneIndex): number | undefined {
    return this.queues[lane][0];
  }

  get credit(): PerLane {
    return this.credits;
  }

  get sizes(): PerLane {
    return [this.queues[0].length, this.queues[1].length, this.queues[2].length];
  }

  /** Removes an item before its turn (its wait deadline passed), as the Redis side does. */
  remove(lane: LaneIndex, item: number): boolean {
    const q = this.queues[lane];
    const at = q.indexOf(item);
    if (at < 0) return false;
    q.splice(at, 1);
    if (q.length === 0) this.credits = laneEmptied(this.credits, this.weights, this.sizes, lane);
    return true;
  }

  take(): { lane: LaneIndex; item: number } | undefined {
    const next = nextLane(this.credits, this.weights, this.sizes);
    if (!next) return undefined;
    this.credits = next.credits;
    return { lane: next.lane, item: this.queues[next.lane].shift()! };
  }
}
