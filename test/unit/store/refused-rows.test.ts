import { describe, expect, it } from 'vitest';
import { storableJson, storableText, writeIsolatingRefused } from '@reach/store';

const refusal = (what: string) => Object.assign(new Error(`refused ${what}`), { code: '22P05' });

describe('writeIsolatingRefused', () => {
  it('writes a healthy batch in one call', async () => {
    const calls: number[][] = [];
    await writeIsolatingRefused(
      [1, 2, 3, 4],
      async (b) => void calls.push([...b]),
      async () => undefined,
    );
    expect(calls).toEqual([[1, 2, 3, 4]]);
  });

  it('isolates each refused item, writes every other, in order', async () => {
    const written: number[] = [];
    const refused: number[] = [];
    await writeIsolatingRefused(
      [1, 2, 3, 4, 5, 6, 7],
      async (b) => {
        if (b.includes(3) || b.includes(6)) throw refusal(String(b));
        written.push(...b);
      },
      async (item) => void refused.push(item),
    );
    expect(refused).toEqual([3, 6]);
    expect(written).toEqual([1, 2, 4, 5, 7]);
  });

  it('lets a dependency failure through (the caller retries the batch)', async () => {
    const down = Object.assign(new Error('connection terminated'), { code: '08006' });
    await expect(
      writeIsolatingRefused(
        [1, 2],
        async () => {
          throw down;
        },
        async () => undefined,
      ),
    ).rejects.toBe(down);
  });
});

describe('storableText / storableJson', () => {
  it('replaces NUL and lone surrogates by U+FFFD, keeps pairs and plain text identical', () => {
    const plain = 'héllo 😀';
    expect(storableText(plain)).toBe(plain);
    expect(storableText('a\u0000b')).toBe('a\ufffdb');
    expect(storableText('x\ud83dy')).toBe('x\ufffdy');
    expect(storableText('x\ude00')).toBe('x\ufffd');
    expect(storableText('\ud83d\ude00\ud83d')).toBe('😀\ufffd');
  });

  it('walks keys and values of any depth', () => {
    expect(storableJson({ 'k\u0000': ['a\ud800', { n: 1, t: true, z: null }] })).toEqual({ 'k\ufffd': ['a\ufffd', { n: 1, t: true, z: null }] });
  });
});
