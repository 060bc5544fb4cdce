import { describe, expect, it } from 'vitest';
import { levelsOff, rssFlat, type Sample } from '@reach/soak';

const sample = (atS: number, rss: Record<string, number>, pgTotal = 0): Sample => ({
  atS,
  rss,
  rssSplit: {},
  pg: {},
  pgIndexes: 0,
  pgTotal,
  redisUsedMemory: 0,
  redisDbBytes: 0,
  redisKeys: 0,
  redisKeysWithoutTtl: 0,
  kafkaLogBytes: null,
  consumerLag: 0,
  openCircuits: [],
  accepted: 0,
  terminal: 0,
});
const MiB = 1048576;

describe('soak verdict', () => {
  it('calls RSS flat when every process stays within 10 % after warm-up, ignoring the warm-up', () => {
    const s = [sample(0, { router: 50 * MiB }), sample(60, { router: 100 * MiB }), sample(120, { router: 105 * MiB }), sample(180, { router: 109 * MiB })];
    expect(rssFlat(s, 60).ok).toBe(true);
    expect(rssFlat(s, 0).ok).toBe(false);
    const growing = [...s, sample(240, { router: 120 * MiB })];
    expect(rssFlat(growing, 60)).toMatchObject({ ok: false, detail: expect.stringContaining('router 20.0 %') });
    expect(rssFlat(s, 1000).ok).toBeNull();
  });

  it('names where the widest RSS spread moved: private, huge-page or file-backed memory', () => {
    const at = (atS: number, anon: number, file: number) => ({
      ...sample(atS, { registry: (anon + file) * MiB }),
      rssSplit: { registry: { anon: anon * MiB, file: file * MiB, anonHuge: 0 } },
    });
    const check = rssFlat([at(0, 40, 50), at(60, 40, 55), at(120, 41, 62)], 0);
    expect(check.ok).toBe(false);
    expect(check.detail).toContain('registry 14.4 % (private 40.0–41.0 MiB, of it huge pages 0.0–0.0 MiB; file-backed 50.0–62.0 MiB)');
  });

  it('sees storage level off when the second half of the window is no more than 10 % above the first', () => {
    const pg = (xs: number[]) => xs.map((mb, i) => sample(i * 60, {}, mb * MiB));
    expect(levelsOff(pg([10, 50, 52, 49, 53]), 60, (x) => x.pgTotal, 'PG').ok).toBe(true);
    // a sawtooth (a partition dropped now and then) levels off too
    expect(levelsOff(pg([40, 60, 40, 60, 40, 60]), 0, (x) => x.pgTotal, 'PG').ok).toBe(true);
    expect(levelsOff(pg([10, 20, 30, 40, 50]), 60, (x) => x.pgTotal, 'PG').ok).toBe(false);
    expect(levelsOff(pg([10, 20]), 600, (x) => x.pgTotal, 'PG').ok).toBeNull();
  });
});
