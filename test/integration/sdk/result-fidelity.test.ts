import { afterEach, describe, expect, it } from 'vitest';
import { ReachError } from '@reach/core';
import { startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';
import { deregisterAgents, registeredAgent, messageIdOf } from '../dispatcher/harness.js';

// A handler's result comes back to its sender exactly as the handler returned it, or the
// message ends with a clear refusal at once — never a silent loss (issue 25, items 6–8). Agents
// written as the TypeScript SDK README shows; senders over HTTP (`?wait_ms`) and `request()`.

const LIMIT = 256 * 1024;
const rawAgents: string[] = [];

afterEach(async () => {
  await stopTestAgents();
  await deregisterAgents(rawAgents.splice(0));
});

function capability(prefix: string): string {
  return `${prefix}_${uniqueName('t').replace(/[^a-z0-9]/g, '')}`;
}

function bytesOf(size: number, seed: number): Buffer {
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

/** What `submit(..., { waitMs })` ends with: the answer, or the error it threw. */
async function submitAndWait(cap: string, payload: unknown): Promise<{ out?: Record<string, unknown>; err?: ReachError }> {
  try {
    return { out: (await testClient().submit({ capability: cap, payload }, { waitMs: 15_000 })) as unknown as Record<string, unknown> };
  } catch (err) {
    if (err instanceof ReachError) return { err };
    throw err;
  }
}

describe('binary results up to 256 KiB (item 6)', () => {
  it('come back byte for byte at 246,000, 250,000 and exactly 262,144 bytes, over HTTP wait and request()', async () => {
    const sizes = [246_000, 250_000, LIMIT];
    const cap = capability('bin');
    await startTestAgent({ handlers: { [cap]: (msg) => bytesOf((msg.payload as { size: number }).size, 7) } });
    for (const size of sizes) {
      const { out, err } = await submitAndWait(cap, { size });
      expect(err, `HTTP wait for ${size} bytes`).toBeUndefined();
      expect(out).toMatchObject({ status: 'DELIVERED' });
      const result = out!.result as { status: string; payload_b64: string };
      expect(result.status).toBe('ok');
      expect(Buffer.from(result.payload_b64, 'base64').equals(bytesOf(size, 7)), `${size} bytes`).toBe(true);
    }
    const caller = await startTestAgent();
    const reply = await caller.node.request<Buffer>(cap, { size: 250_000 }, { timeoutMs: 20_000 });
    expect(Buffer.isBuffer(reply)).toBe(true);
    expect(reply.equals(bytesOf(250_000, 7))).toBe(true);
  });

  it('one byte over is refused at once: the sender gets 3003 naming 4102, the message is REJECTED', async () => {
    const cap = capability('bigbin');
    await startTestAgent({ handlers: { [cap]: () => Buffer.alloc(LIMIT + 1, 1) } });
    const { err } = await submitAndWait(cap, {});
    expect(err?.code).toBe(3003);
    expect(err?.message).toContain('4102 PAYLOAD_TOO_LARGE');
    expect(err?.message).toContain(`${LIMIT + 1} bytes`);
    const status = await testClient().status(String(err!.details!.message_id));
    expect(status).toMatchObject({ status: 'REJECTED', code: 3003 });
  });
});

describe('NUL in results (item 7)', () => {
  it('comes back as sent, in values and keys, over HTTP wait and request()', async () => {
    const answer = { text: 'a\u0000b', 'k\u0000': ['\u0000', { deep: 'x\u0000\u0000y' }], plain: 'é😀' };
    const cap = capability('nul');
    await startTestAgent({ handlers: { [cap]: () => answer } });
    const { out, err } = await submitAndWait(cap, { q: 1 });
    expect(err).toBeUndefined();
    expect(out!.result).toEqual({ status: 'ok', payload: answer });
    // Read again later from the read model: the same.
    const again = await testClient().status(String(out!.message_id));
    expect((again as unknown as { result: unknown }).result).toEqual({ status: 'ok', payload: answer });
    const caller = await startTestAgent();
    expect(await caller.node.request(cap, { q: 2 }, { timeoutMs: 20_000 })).toEqual(answer);
  });
});

describe('results over the raw protocol: the dispatcher checks them as the protocol counts a payload', () => {
  it('refuses an over-limit binary result with an error frame 4102 and settles the message REJECTED at once', async () => {
    const cap = capability('rawbig');
    const { id, agent } = await registeredAgent(cap);
    rawAgents.push(id);
    const sending = submitAndWait(cap, {});
    const d = await agent.next((f) => f.type === 'deliver');
    agent.send({ type: 'result', message_id: messageIdOf(d), seq: d.seq, status: 'ok', payload_b64: Buffer.alloc(LIMIT + 1).toString('base64') });
    const error = await agent.next((f) => f.type === 'error');
    expect(error).toMatchObject({ code: 4102, name: 'PAYLOAD_TOO_LARGE' });
    expect(String(error.message)).toContain(messageIdOf(d));
    const { err } = await sending;
    expect(err?.code).toBe(3003);
    expect(err?.message).toContain('4102 PAYLOAD_TOO_LARGE');
  });

  it('takes a binary result of exactly 256 KiB (349,528 base64 characters)', async () => {
    const cap = capability('rawbin');
    const { id, agent } = await registeredAgent(cap);
    rawAgents.push(id);
    const sending = submitAndWait(cap, {});
    const d = await agent.next((f) => f.type === 'deliver');
    const bytes = bytesOf(LIMIT, 3);
    agent.send({
      type: 'result',
      message_id: messageIdOf(d),
      seq: d.seq,
      status: 'ok',
      payload_b64: bytes.toString('base64'),
      content_type: 'application/octet-stream',
    });
    agent.send({ type: 'ack', message_id: messageIdOf(d), seq: d.seq });
    const { out, err } = await sending;
    expect(err).toBeUndefined();
    expect(Buffer.from((out!.result as { payload_b64: string }).payload_b64, 'base64').equals(bytes)).toBe(true);
  });

  it('refuses a result holding a lone surrogate with 4101 and settles the message REJECTED (never DEAD 3005)', async () => {
    const cap = capability('rawlone');
    const { id, agent } = await registeredAgent(cap);
    rawAgents.push(id);
    const sending = submitAndWait(cap, {});
    const d = await agent.next((f) => f.type === 'deliver');
    agent.send({ type: 'result', message_id: messageIdOf(d), seq: d.seq, status: 'ok', payload: { t: '\ud83d' } });
    agent.send({ type: 'ack', message_id: messageIdOf(d), seq: d.seq });
    const error = await agent.next((f) => f.type === 'error');
    expect(error).toMatchObject({ code: 4101, name: 'INVALID_ENVELOPE' });
    const { err } = await sending;
    expect(err?.code).toBe(3003);
    expect(err?.message).toContain('lone UTF-16 surrogate');
  });
});
