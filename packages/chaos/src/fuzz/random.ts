/**
 * The fuzzer's randomness: a seeded generator (mulberry32), so a failing run is replayed
 * exactly with its `--seed`, and the values that break parsers and stores: NUL, lone
 * surrogates, control and direction characters, huge and tiny numbers, deep nesting.
 */
export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }
}

/** Strings that have broken, or could break, a decoder, a validator or PostgreSQL. */
export const NASTY_STRINGS: readonly string[] = [
  '',
  ' ',
  'a\u0000b',
  '\u0000',
  '\ud83d',
  'x\ude00',
  '\ud83d\ude00',
  '\u202e\u200b\ufeff',
  '\uffff\ufffe',
  '\\u0000',
  '\\ud83d',
  '%00',
  "'; DROP TABLE messages; --",
  '<script>alert(1)</script>',
  '../../../etc/passwd',
  '\n\r\t\u0007\u001b[31m',
  'null',
  'NaN',
  '1e309',
  '-0',
  'ＡＢＣ',
  'é'.normalize('NFD'),
  '𝕏'.repeat(40),
  'k'.repeat(300),
  'v'.repeat(5_000),
];

/** A string: a nasty one, random UTF-16 code units (surrogates included) or plain ASCII. */
export function randomString(r: Random, maxLen = 40): string {
  const kind = r.int(0, 3);
  if (kind === 0) return r.pick(NASTY_STRINGS);
  const len = r.int(0, maxLen);
  let out = '';
  for (let i = 0; i < len; i++) {
    if (kind === 1) out += String.fromCharCode(r.int(0, 0xffff));
    else if (kind === 2) out += String.fromCharCode(r.int(0x20, 0x7e));
    else out += r.pick(['a', '\u0000', '\ud800', '\udfff', 'é', '😀', '"', '\\', '/', '{', '\u2028']);
  }
  return out;
}

const NUMBERS: readonly number[] = [0, -0, 1, -1, 0.5, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 1, 1e308, -1e308, 5e-324, 8.64e15, -8.64e15];

/** Any JSON value (strings and keys from randomString), at most `depth` levels deep. */
export function randomJson(r: Random, depth = 3): unknown {
  const kind = r.int(0, depth > 0 ? 7 : 4);
  switch (kind) {
    case 0:
      return null;
    case 1:
      return r.chance(0.5);
    case 2:
      return r.chance(0.5) ? r.pick(NUMBERS) : r.int(-1_000_000, 1_000_000);
    case 3:
    case 4:
      return randomString(r);
    case 5: {
      if (r.chance(0.05)) return nested(r.int(20, 200));
      return Array.from({ length: r.int(0, 5) }, () => randomJson(r, depth - 1));
    }
    default: {
      const out: Record<string, unknown> = {};
      for (let i = r.int(0, 5); i > 0; i--) out[randomString(r, 12)] = randomJson(r, depth - 1);
      return out;
    }
  }
}

/** [[[…]]] `depth` levels deep. */
function nested(depth: number): unknown {
  let v: unknown = 'deep';
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** Random bytes, sometimes around a size limit. */
export function randomBytes(r: Random, limit: number): Buffer {
  const size = r.chance(0.05) ? limit + r.int(-64, 64) : r.int(0, 256);
  const out = Buffer.alloc(Math.max(0, size));
  for (let i = 0; i < out.length; i++) out[i] = r.int(0, 255);
  return out;
}
