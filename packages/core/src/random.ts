/**
 * A small seeded [0, 1) generator (mulberry32): benchmarks and statistical or property tests
 * draw the same sequence on every run, so runs compare like with like and a failing case can be
 * replayed from its seed. Not for anything that must be unpredictable (tokens, ids).
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
