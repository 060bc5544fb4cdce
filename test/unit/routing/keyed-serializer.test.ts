import { describe, expect, it } from 'vitest';
import { KeyedSerializer } from '../../../services/router/src/keyed-serializer.js';

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('KeyedSerializer (router: one session routed at a time)', () => {
  it('runs same-key tasks in call order and other keys concurrently', async () => {
    const s = new KeyedSerializer();
    const log: string[] = [];
    let releaseFirst: () => void = () => undefined;
    const first = s.run('k', async () => {
      log.push('k1 start');
      await new Promise<void>((r) => (releaseFirst = r));
      log.push('k1 end');
      return 1;
    });
    const second = s.run('k', async () => {
      log.push('k2');
      return 2;
    });
    const other = s.run('other', async () => {
      log.push('other');
      return 3;
    });
    await tick();
    expect(log).toEqual(['k1 start', 'other']);
    releaseFirst();
    expect(await Promise.all([first, second, other])).toEqual([1, 2, 3]);
    expect(log).toEqual(['k1 start', 'other', 'k1 end', 'k2']);
    await tick();
    expect(s.pending).toBe(0);
  });

  it('a failing task does not block the next one of its key', async () => {
    const s = new KeyedSerializer();
    const failed = s.run('k', () => Promise.reject(new Error('boom')));
    const next = s.run('k', () => Promise.resolve('ok'));
    await expect(failed).rejects.toThrow('boom');
    await expect(next).resolves.toBe('ok');
  });
});
