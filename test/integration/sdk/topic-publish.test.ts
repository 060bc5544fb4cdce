import { afterEach, describe, expect, it } from 'vitest';
import { ReachError } from '@reach/core';
import type { MessageStatus, Receipt } from '@reach/sdk';
import { startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';

// A topic publish as users write it (`node.publish`, subscribers with `node.subscribe`), on the
// real stack. The published message is the parent of one copy per subscriber: the router ends
// the parent DELIVERED once it has fanned it out, and each copy ends on its own id. Before, the
// parent stayed ROUTED until the stuck sweep declared it DEAD 3005 at its budget's end: a dead
// letter per publish, a false DEAD receipt to the publisher, and a wait that ran out (3002).

const topicName = (verb: string) => `${verb}_${uniqueName('t').replace(/[^a-z0-9]/g, '')}`;

afterEach(stopTestAgents);

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The message's state once the read model has it in `state` (the tracker writes in batches). */
function reached(messageId: string, state: string): Promise<MessageStatus> {
  return until(`${messageId} ${state}`, async () => {
    const s = await testClient()
      .status(messageId)
      .catch((e: unknown) => (e instanceof ReachError && e.details?.http_status === 404 ? undefined : Promise.reject(e)));
    return s?.status === state && s;
  });
}

describe('topic publish', () => {
  it('[publish-fanout] a publish ends DELIVERED once fanned out; each subscriber gets its copy, DELIVERED on its own id; no receipt', async () => {
    const topic = topicName('orders');
    const a = await startTestAgent({ subscriptions: { [topic]: async () => undefined } });
    const b = await startTestAgent({ subscriptions: { [topic]: async () => undefined } });
    const publisher = await startTestAgent();
    const receipts: Receipt[] = [];
    publisher.node.on('receipt', (r) => receipts.push(r));

    const id = await publisher.node.publish(topic, { order: 7 });
    await until('both subscribers got the event', async () => a.received.length === 1 && b.received.length === 1);

    const parent = await reached(id, 'DELIVERED');
    expect(parent).toMatchObject({ topic, agent_id: null, code: null, parent_message_id: null });
    const states = (await testClient().events(id)).map((e) => e.state);
    expect(states).toEqual(['PENDING', 'ROUTED', 'DELIVERED']);
    for (const [sub, copy] of [
      [a, a.received[0]!],
      [b, b.received[0]!],
    ] as const) {
      expect(copy.message_id).not.toBe(id);
      expect(await reached(copy.message_id, 'DELIVERED')).toMatchObject({ agent_id: sub.agentId, parent_message_id: id, code: null });
    }

    // A sender that waits (`?wait_ms`, `reach send --topic … --wait`) is answered once the
    // publish is fanned out, with its copies, instead of 3002 after its whole wait.
    const waited = await testClient().submit({ topic, message_type: 'event', payload: { order: 8 } }, { waitMs: 15_000 });
    expect(waited).toMatchObject({ status: 'DELIVERED', copies_total: 2, http_status: 200 });
    const copies = waited.copies as Array<{ message_id: string; agent_id: string }>;
    expect(copies.map((c) => c.agent_id).sort()).toEqual([a.agentId, b.agentId].sort());
    await until('both subscribers got the second event', async () => a.received.length === 2 && b.received.length === 2);
    expect(copies.map((c) => c.message_id).sort()).toEqual([a.received[1]!.message_id, b.received[1]!.message_id].sort());

    // Nothing failed, so the publisher was sent no receipt; the parent is terminal, so none can come.
    expect(receipts).toEqual([]);
  });

  it('[publish-no-subscriber] a publish nobody subscribes to ends REJECTED 2001, and the publisher gets that receipt', async () => {
    const topic = topicName('nobody');
    const publisher = await startTestAgent();
    const receipts: Receipt[] = [];
    publisher.node.on('receipt', (r) => receipts.push(r));

    const id = await publisher.node.publish(topic, { order: 1 });
    const receipt = await until('the receipt', async () => receipts[0]);
    expect(receipt).toMatchObject({ message_id: id, status: 'REJECTED', code: 2001 });
    expect(await reached(id, 'REJECTED')).toMatchObject({ topic, code: 2001 });

    const err = await testClient()
      .submit({ topic, message_type: 'event', payload: {} }, { waitMs: 15_000 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReachError);
    expect(err).toMatchObject({ code: 2001 });
  });
});
