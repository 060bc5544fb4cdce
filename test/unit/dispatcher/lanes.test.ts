import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, seededRandom } from '@reach/core';
import { LaneModel, laneOf, nextLane, type LaneIndex, type PerLane } from '../../../services/dispatcher/dist/lanes.js';

// Priority lanes (R-D9): smooth weighted round robin over the non-empty lanes. The Lua
// promotion script implements the same; test/integration/dispatcher/lanes.test.ts compares them.
const DEFAULT: PerLane = [60, 30, 10];
const NAMES = ['H', 'N', 'L'] as const;

/** A model whose lanes never run dry during `picks` promotions. */
function busy(weights: PerLane, sizes: PerLane = [10_000, 10_000, 10_000]): LaneModel {
  const m = new LaneModel(weights);
  for (const lane of [0, 1, 2] as const) for (let i = 0; i < sizes[lane]; i++) m.push(lane, i);
  return m;
}

function picks(m: LaneModel, n: number): LaneIndex[] {
  return Array.from({ length: n }, () => m.take()!.lane);
}

function counts(lanes: readonly LaneIndex[]): [number, number, number] {
  const c: [number, number, number] = [0, 0, 0];
  for (const l of lanes) c[l]++;
  return c;
}

describe('priority lanes: smooth weighted round robin', () => {
  it('serves 60/30/10 exactly in every round of 10 while all lanes are busy, interleaved', () => {
    const seq = picks(busy(DEFAULT), 1000);
    expect(
      seq
        .slice(0, 10)
        .map((l) => NAMES[l])
        .join(''),
    ).toBe('HNHHNHLHNH');
    for (let round = 0; round < 100; round++) expect(counts(seq.slice(round * 10, round * 10 + 10))).toEqual([6, 3, 1]);
  });

  it('gives each lane exactly its weight per cycle over long runs, for any weights', () => {
    const rand = seededRandom(7);
    for (let t = 0; t < 50; t++) {
      const w: PerLane = [1 + Math.floor(rand() * 100), 1 + Math.floor(rand() * 100), 1 + Math.floor(rand() * 100)];
      const total = w[0] + w[1] + w[2];
      const cycles = 5;
      expect(counts(picks(busy(w), total * cycles))).toEqual([w[0] * cycles, w[1] * cycles, w[2] * cycles]);
    }
  });

  it('never starves LOW: under a sustained HIGH flood LOW gets a slot at least every ⌈total/w_LOW⌉ picks', () => {
    for (const sizes of [
      [10_000, 10_000, 10_000],
      [10_000, 0, 10_000],
    ] as const) {
      const total = DEFAULT[0] + (sizes[1] > 0 ? DEFAULT[1] : 0) + DEFAULT[2];
      const seq = picks(busy(DEFAULT, sizes), 10_000);
      let gap = 0;
      let worst = 0;
      for (const l of seq) {
        gap = l === 2 ? 0 : gap + 1;
        worst = Math.max(worst, gap);
      }
      expect(worst).toBeLessThan(Math.ceil(total / DEFAULT[2]));
    }
  });

  it('gives an idle lane’s share to the busy ones, in proportion to their weights', () => {
    expect(counts(picks(busy(DEFAULT, [10_000, 0, 10_000]), 70 * 10))).toEqual([600, 0, 100]); // HIGH and LOW: 60:10
    expect(counts(picks(busy(DEFAULT, [0, 10_000, 10_000]), 40 * 10))).toEqual([0, 300, 100]); // NORMAL and LOW: 30:10
    expect(counts(picks(busy(DEFAULT, [0, 0, 10_000]), 25))).toEqual([0, 0, 25]); // LOW alone gets everything
  });

  it('picks nothing when every lane is empty, and FIFO within a lane', () => {
    expect(nextLane([0, 0, 0], DEFAULT, [0, 0, 0])).toBeUndefined();
    const m = new LaneModel(DEFAULT);
    for (const [lane, item] of [
      [2, 1],
      [0, 2],
      [2, 3],
      [0, 4],
    ] as const)
      m.push(lane, item);
    const order = Array.from({ length: 4 }, () => m.take()!);
    expect(order.filter((o) => o.lane === 0).map((o) => o.item)).toEqual([2, 4]);
    expect(order.filter((o) => o.lane === 2).map((o) => o.item)).toEqual([1, 3]);
    expect(m.take()).toBeUndefined();
  });

  it('hands an emptied lane’s credit to the busy lanes: their credits always sum to zero and stay small', () => {
    const rand = seededRandom(11);
    const m = new LaneModel(DEFAULT);
    let item = 0;
    let worst = 0;
    for (let step = 0; step < 20_000; step++) {
      // Random arrivals into every lane (lanes run dry and refill), random expiries, promotions.
      const r = rand();
      if (r < 0.45) m.push(Math.floor(rand() * 3) as LaneIndex, item++);
      else if (r < 0.5) {
        const lane = Math.floor(rand() * 3) as LaneIndex;
        if (m.sizes[lane] > 0) m.remove(lane, m.peek(lane)!);
      } else m.take();
      const busy = ([0, 1, 2] as const).filter((i) => m.sizes[i] > 0);
      const sum = busy.reduce((a: number, i) => a + m.credit[i], 0);
      expect(Math.abs(sum)).toBeLessThan(1e-9);
      for (const i of [0, 1, 2] as const) if (m.sizes[i] === 0) expect(m.credit[i]).toBe(0);
      worst = Math.max(worst, ...m.credit.map(Math.abs));
    }
    expect(worst).toBeLessThan(DEFAULT[0] + DEFAULT[1] + DEFAULT[2]);
  });

  it('promotes a HIGH message arriving at a NORMAL/LOW backlog next, whatever came before', () => {
    const rand = seededRandom(5);
    const m = busy(DEFAULT, [0, 10_000, 10_000]);
    for (let arrival = 0; arrival < 500; arrival++) {
      for (let k = Math.floor(rand() * 20); k > 0; k--) m.take();
      m.push(0, -arrival);
      expect(m.take()).toEqual({ lane: 0, item: -arrival });
    }
  });

  it('lets a lane that keeps emptying and refilling take nothing from the shares of the others', () => {
    // HIGH arrives one at a time; NORMAL and LOW stay busy and still split their picks 30:10.
    const rand = seededRandom(3);
    const m = busy(DEFAULT, [0, 10_000, 10_000]);
    const got: LaneIndex[] = [];
    for (let step = 0; step < 4_000; step++) {
      if (m.sizes[0] === 0 && rand() < 0.3) m.push(0, step);
      got.push(m.take()!.lane);
    }
    const [, n, l] = counts(got);
    expect(n / l).toBeCloseTo(3, 1);
  });

  it('maps priorities to lanes, NORMAL for anything unknown', () => {
    expect([laneOf('HIGH'), laneOf('NORMAL'), laneOf('LOW'), laneOf(undefined), laneOf('URGENT')]).toEqual([0, 1, 2, 1, 1]);
  });
});

describe('priority lanes: REACH_PRIORITY_WEIGHTS', () => {
  it('defaults to 60,30,10 and takes three positive integers HIGH,NORMAL,LOW', () => {
    expect(loadConfig(['priorityWeights'], {}).priorityWeights).toEqual([60, 30, 10]);
    expect(loadConfig(['priorityWeights'], { REACH_PRIORITY_WEIGHTS: '5, 3,1' }).priorityWeights).toEqual([5, 3, 1]);
  });

  it.each(['60,30', '60,30,10,5', '0,30,10', '-1,30,10', '1.5,2,3', 'a,b,c', '60,,10'])('refuses %j naming the variable', (raw) => {
    expect(() => loadConfig(['priorityWeights'], { REACH_PRIORITY_WEIGHTS: raw })).toThrow(ConfigError);
    expect(() => loadConfig(['priorityWeights'], { REACH_PRIORITY_WEIGHTS: raw })).toThrow(/REACH_PRIORITY_WEIGHTS/);
  });
});
