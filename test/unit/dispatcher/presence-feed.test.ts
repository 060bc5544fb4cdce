import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import type { OutRecord } from '@reach/kafka';
import { PresenceFeed } from '../../../services/dispatcher/dist/presence.js';

// A presence change is never dropped: the router routes only to agents whose presence says
// connected, so a "connected" lost while the broker restarts left a live agent unroutable.
const record = (agent: string, connected: boolean): OutRecord => ({ topic: 'reach.presence.v1', key: agent, value: Buffer.from(`${agent}:${connected}`) });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const RETRY_MS = 20;

/** A producer that refuses the first `failures` sends, and records what it took. */
function producer(failures: number) {
  const sent: string[][] = [];
  let calls = 0;
  return {
    sent,
    get calls() {
      return calls;
    },
    send: async (records: readonly OutRecord[]) => {
      calls++;
      if (calls <= failures) throw new Error('KafkaJSNumberOfRetriesExceeded: broker away');
      sent.push(records.map((r) => (r.value as Buffer).toString()));
    },
  };
}

describe('PresenceFeed', () => {
  it('sends a change again until the broker takes it', async () => {
    const p = producer(3);
    const feed = new PresenceFeed(p.send, silentLogger, RETRY_MS);
    feed.publish('a', record('a', true));
    await sleep(RETRY_MS * 8);
    expect(p.calls).toBe(4);
    expect(p.sent).toEqual([['a:true']]);
    expect(feed.pending).toBe(0);
  });

  it('keeps only the newest change of an agent while it waits, and every agent’s', async () => {
    const p = producer(1);
    const feed = new PresenceFeed(p.send, silentLogger, RETRY_MS);
    feed.publish('a', record('a', true)); // refused
    feed.publish('a', record('a', false)); // replaces it while the first send is in flight
    feed.publish('b', record('b', true));
    await sleep(RETRY_MS * 6);
    expect(p.sent.flat().sort()).toEqual(['a:false', 'b:true']);
  });

  it('at shutdown sends what waits once more and then stops retrying', async () => {
    const p = producer(Infinity);
    const feed = new PresenceFeed(p.send, silentLogger, RETRY_MS);
    feed.publish('a', record('a', false));
    await feed.close();
    const calls = p.calls;
    expect(calls).toBe(2); // the first send and the one at close
    await sleep(RETRY_MS * 4);
    expect(p.calls).toBe(calls);
  });
});
