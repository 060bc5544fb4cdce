import { describe, expect, it } from 'vitest';
import { byScore, loadRate, scoreCandidates } from '@reach/routing';
import { agent, CONFIG } from './fixtures.js';

const zero = () => 0;

describe('scoring (R-B3)', () => {
  it('uses load as a RATE of max_concurrency, never an absolute count', () => {
    const big = agent('big', { maxConcurrency: 100, currentLoad: 8 });
    const small = agent('small', { maxConcurrency: 4, currentLoad: 3 });
    expect(loadRate(big)).toBeCloseTo(0.08);
    expect(loadRate(small)).toBeCloseTo(0.75);
    const [first] = scoreCandidates([small, big], CONFIG, zero).sort(byScore);
    // 8 running tasks is more than 3, but 8 % of capacity is far less than 75 %.
    expect(first!.agent.agent_id).toBe('big');
  });

  it('reads an agent over its limit as over 100 % and guards a zero max_concurrency', () => {
    expect(loadRate(agent('over', { maxConcurrency: 4, currentLoad: 6 }))).toBeCloseTo(1.5);
    expect(loadRate(agent('zero', { maxConcurrency: 0, currentLoad: 1 }))).toBe(1);
    expect(loadRate(agent('neg', { currentLoad: -3 }))).toBe(0);
  });

  it('weighs priority, health, free capacity and locality with the configured weights', () => {
    const [s] = scoreCandidates([agent('a', { weight: 2, health: 0.5, currentLoad: 5, maxConcurrency: 10, region: 'eu' })], { ...CONFIG, region: 'eu' }, zero);
    expect(s).toMatchObject({ priority: 1, health: 0.5, loadRate: 0.5, locality: 1 });
    expect(s!.score).toBeCloseTo(0.4 * 1 + 0.3 * 0.5 + 0.2 * 0.5 + 0.1 * 1);
  });

  it('normalises metadata.weight to the best weight among the candidates', () => {
    const scored = scoreCandidates([agent('heavy', { weight: 4 }), agent('light', { weight: 1 })], CONFIG, zero);
    expect(scored.map((s) => s.priority)).toEqual([1, 0.25]);
    expect(scored[0]!.score - scored[1]!.score).toBeCloseTo(0.4 * 0.75);
  });

  it('gives locality only to agents in this router’s region, and none when no region is set', () => {
    const agents = [agent('eu', { region: 'eu' }), agent('us', { region: 'us' }), agent('none')];
    expect(scoreCandidates(agents, { ...CONFIG, region: 'eu' }, zero).map((s) => s.locality)).toEqual([1, 0, 0]);
    expect(scoreCandidates(agents, CONFIG, zero).map((s) => s.locality)).toEqual([0, 0, 0]);
  });

  it('clamps health into [0, 1] and adds at most the configured jitter', () => {
    const [s] = scoreCandidates([agent('a', { health: 7 })], CONFIG, zero);
    expect(s!.health).toBe(1);
    const base = scoreCandidates([agent('a')], CONFIG, zero)[0]!.score;
    const jittered = scoreCandidates([agent('a')], { ...CONFIG, jitter: 0.05 }, () => 0.999)[0]!.score;
    expect(jittered - base).toBeGreaterThan(0.049);
    expect(jittered - base).toBeLessThan(0.05);
  });

  it('orders best first with a deterministic tie-break', () => {
    const scored = scoreCandidates([agent('b'), agent('a'), agent('c', { health: 0.1 })], CONFIG, zero).sort(byScore);
    expect(scored.map((s) => s.agent.agent_id)).toEqual(['a', 'b', 'c']);
  });
});
