import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import type { OutRecord, Producer } from '@reach/kafka';
import { Outbox } from '../../../services/dispatcher/dist/outbox.js';

// The outbox batches what is queued while a request is in flight, keeping queue order.
function fakeProducer() {
  const requests: string[][] = [];
  let release: (() => void) | undefined;
  let fail = false;
  const producer = {
    sendBatch: async ({ topicMessages }: { topicMessages: Array<{ messages: Array<{ key: string }> }> }) => {
      requests.push(topicMessages.flatMap((t) => t.messages.map((m) => m.key)));
      await new Promise<void>((r) => (release = r));
      if (fail) throw new Error('broker down');
    },
  } as unknown as Producer;
  return {
    producer,
    requests,
    release: () => release?.(),
    failNext: () => {
      fail = true;
    },
  };
}

const rec = (key: string): OutRecord => ({ topic: 't', key, value: null });
const tick = () => new Promise((r) => setImmediate(r));

describe('dispatcher outbox', () => {
  it('sends the first record at once and everything queued meanwhile in one request, in order', async () => {
    const f = fakeProducer();
    const outbox = new Outbox(f.producer, silentLogger);
    const done: string[] = [];
    const a = outbox.send([rec('a')]).then(() => done.push('a'));
    await tick();
    const b = outbox.send([rec('b'), rec('c')]).then(() => done.push('b'));
    const d = outbox.send([rec('d')]).then(() => done.push('d'));
    expect(f.requests).toEqual([['a']]);
    f.release();
    await a;
    await tick();
    expect(f.requests).toEqual([['a'], ['b', 'c', 'd']]);
    f.release();
    await Promise.all([b, d]);
    expect(done).toEqual(['a', 'b', 'd']);
    await outbox.drain();
  });

  it('rejects the callers of a failed request, and goes on with the next', async () => {
    const f = fakeProducer();
    const outbox = new Outbox(f.producer, silentLogger);
    f.failNext();
    const a = outbox.send([rec('a')]);
    await tick();
    f.release();
    await expect(a).rejects.toThrow('broker down');
  });
});
