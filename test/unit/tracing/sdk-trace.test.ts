import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newMessageId } from '@reach/core';
import { AgentNode, parseServerFrame, type HandlerContext } from '@reach/sdk';
import { FakeReach } from '../sdk/fake-reach.js';

// The SDK side of trace propagation (R-F1): the deliver frame's optional traceparent
// reaches the handler, comes back on the answer frames, and continues on what the handler sends.

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const TP = `00-${TRACE}-aaaaaaaaaaaaaaaa-01`;

let fake: FakeReach;
let node: AgentNode | undefined;

beforeEach(async () => {
  fake = await new FakeReach().start();
});

afterEach(async () => {
  await node?.stop({ drainTimeoutMs: 200 });
  node = undefined;
  await fake.stop();
});

async function startNode(handler: (ctx: HandlerContext) => Promise<unknown>): Promise<AgentNode> {
  node = new AgentNode({
    registryUrl: fake.registryUrl,
    dispatcherUrl: fake.dispatcherUrl,
    descriptor: { agent_type: 'trace-test', metadata: { max_concurrency: 2 } },
    token: 'enroll-token',
    handleSignals: false,
  });
  node.handle('traced', (_m, ctx) => handler(ctx));
  await node.start();
  return node;
}

function deliver(seq: number, traceparent: string | undefined, message: Record<string, unknown> = {}): string {
  const id = newMessageId();
  fake.sendRaw({
    type: 'deliver',
    seq,
    attempt: 0,
    deadline: new Date(Date.now() + 60_000).toISOString(),
    ...(traceparent !== undefined ? { traceparent } : {}),
    message: {
      message_id: id,
      message_type: 'task_request',
      capability: 'traced',
      producer: 'agent.sender',
      trace_id: TRACE,
      reply_to: 'agent.sender',
      headers: {},
      payload: 1,
      ...message,
    },
  });
  return id;
}

describe('SDK trace context', () => {
  it('parses the optional traceparent of a deliver frame, ignoring a malformed one', () => {
    const frame = (tp: unknown) => JSON.stringify({ type: 'deliver', seq: 1, message: { message_id: 'm' }, traceparent: tp });
    expect(parseServerFrame(frame(TP))).toMatchObject({ type: 'deliver', traceparent: TP });
    for (const bad of ['garbage', `00-${TRACE.toUpperCase()}-aaaaaaaaaaaaaaaa-01`, `00-${'0'.repeat(32)}-aaaaaaaaaaaaaaaa-01`, 7]) {
      expect(parseServerFrame(frame(bad))).toMatchObject({ type: 'deliver', traceparent: undefined });
    }
  });

  it('hands the traceparent to the handler, echoes it on result and ack, and continues it on sends', async () => {
    const seen: Array<string | undefined> = [];
    await startNode(async (ctx) => {
      seen.push(ctx.traceparent);
      await ctx.node.send({ topic: 'follow-up', payload: 'x' });
      await ctx.node.send({ topic: 'own-trace', payload: 'y', trace_id: 'b'.repeat(32) });
      return 'done';
    });
    const id = deliver(1, TP);
    await fake.until('ack', () => fake.framesOf('ack').length === 1);
    expect(seen).toEqual([TP]);
    expect(fake.framesOf('result')).toEqual([expect.objectContaining({ message_id: id, traceparent: TP })]);
    expect(fake.framesOf('ack')).toEqual([expect.objectContaining({ message_id: id, traceparent: TP })]);
    const sends = fake.framesOf('send');
    expect(sends.find((f) => f.topic === 'follow-up')).toMatchObject({ traceparent: TP });
    // A sender's own trace wins.
    const own = sends.find((f) => f.topic === 'own-trace')!;
    expect(own.trace_id).toBe('b'.repeat(32));
    expect(own.traceparent).toBeUndefined();
  });

  it('without a traceparent, answers carry none and sends keep at least the trace_id', async () => {
    const seen: Array<string | undefined> = [];
    await startNode(async (ctx) => {
      seen.push(ctx.traceparent);
      await ctx.node.publish('follow-up', 1);
      throw new Error('nope');
    });
    const id = deliver(1, undefined);
    await fake.until('reject', () => fake.framesOf('reject').length === 1);
    expect(seen).toEqual([undefined]);
    expect(fake.framesOf('reject')[0]).toMatchObject({ message_id: id });
    expect(fake.framesOf('reject')[0]).not.toHaveProperty('traceparent');
    expect(fake.framesOf('send')[0]).toMatchObject({ topic: 'follow-up', trace_id: TRACE });
    expect(fake.framesOf('send')[0]).not.toHaveProperty('traceparent');
  });
});
