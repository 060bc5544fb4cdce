import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Producer } from 'kafkajs';
import { plainKafka, registryClient } from '../../helpers/kafka.js';
import { agentId, agentToken, messageIdOf, Router, startInstance, TestAgent, type Frame, type Instance } from './harness.js';

// R-C5: an agent that stops reading is closed as slow once more than half of
// REACH_WS_MAX_BUFFERED_BYTES (64 KiB on this instance) has waited unread for
// REACH_WS_SLOW_AFTER_MS, nothing meant for it is lost (its next connection gets everything
// replayed), and a replay or a live burst far larger than that limit reaches an agent that
// does read, without it being taken for slow.
const kafka = plainKafka();
const registry = registryClient();
let producer: Producer;
let router: Router;
let small: Instance;

/** A WebSocket client on a bare TCP socket, so the test can stop reading at will. */
async function rawConnect(port: number, hello: Record<string, unknown>): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.write(
    'GET /v1/connect HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  );
  // Read until the welcome frame has arrived (it follows the 101 response).
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    const onData = (d: Buffer) => {
      seen += d.toString('latin1');
      if (seen.includes('"type":"welcome"')) {
        socket.off('data', onData);
        resolve();
      }
    };
    socket.on('data', onData);
    socket.once('close', () => reject(new Error(`closed during handshake: ${seen}`)));
    setTimeout(() => writeFrame(socket, hello), 50);
  });
  return socket;
}

/** Writes one masked text frame (a client's frames are masked) of up to 64 KiB. */
function writeFrame(socket: Socket, frame: Record<string, unknown>): void {
  const payload = Buffer.from(JSON.stringify(frame));
  const mask = randomBytes(4);
  const header =
    payload.length < 126 ? Buffer.from([0x81, 0x80 | payload.length]) : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff]);
  const body = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!));
  socket.write(Buffer.concat([header, mask, body]));
}

/** Splits the server's (unmasked) frames out of the bytes read so far; returns the text ones. */
class FrameSplitter {
  private pending = Buffer.alloc(0);

  push(bytes: Buffer): Frame[] {
    this.pending = Buffer.concat([this.pending, bytes]);
    const frames: Frame[] = [];
    for (;;) {
      if (this.pending.length < 2) return frames;
      let length = this.pending[1]! & 0x7f;
      let offset = 2;
      if (length === 126) [length, offset] = [this.pending.length < 4 ? Infinity : this.pending.readUInt16BE(2), 4];
      else if (length === 127) [length, offset] = [this.pending.length < 10 ? Infinity : Number(this.pending.readBigUInt64BE(2)), 10];
      if (this.pending.length < offset + length) return frames;
      if ((this.pending[0]! & 0x0f) === 1) frames.push(JSON.parse(this.pending.subarray(offset, offset + length).toString('utf8')) as Frame);
      this.pending = this.pending.subarray(offset + length);
    }
  }
}

async function slowDisconnects(inst: Instance): Promise<number> {
  const text = await (await fetch(`${inst.http}/metrics`)).text();
  const m = /^reach_dispatcher_slow_disconnects_total (\d+)/m.exec(text);
  return m ? Number(m[1]) : 0;
}

beforeAll(async () => {
  producer = kafka.producer();
  await producer.connect();
  router = await new Router(producer, registry).init();
  // Long heartbeat settings: only the buffer limit can close the connection here.
  small = await startInstance({ REACH_WS_MAX_BUFFERED_BYTES: '65536', REACH_WS_IDLE_TIMEOUT_MS: '120000', REACH_WS_PING_INTERVAL_MS: '60000' });
});

afterAll(async () => {
  await Promise.all([producer?.disconnect(), small?.stop()]);
});

describe('dispatcher: slow agents', () => {
  it('closes an agent that stops reading once its buffer stops draining; its next connection gets everything', async () => {
    const id = agentId('it.slow');
    const socket = await rawConnect(small.port, { type: 'hello', agent_id: id, token: agentToken(id) });
    socket.pause(); // the agent stops reading
    const before = await slowDisconnects(small);

    const chunk = 'x'.repeat(200 * 1024);
    const envs = Array.from({ length: 60 }, (_, i) => router.envelope({ payload: Buffer.from(JSON.stringify({ i, chunk })) }));
    for (const env of envs) await router.route(id, env);

    const deadline = Date.now() + 30_000;
    while ((await slowDisconnects(small)) === before) {
      if (Date.now() > deadline) throw new Error('the slow agent was never disconnected');
      await new Promise((r) => setTimeout(r, 100));
    }
    socket.destroy();

    // 12 MB of replay through a 64 KiB buffer limit, to an agent that reads: all of it, in order.
    const { agent } = await TestAgent.connect(id, { url: small.ws });
    const replay = await agent.waitCount((f) => f.type === 'deliver', envs.length, 60_000);
    expect(replay.map(messageIdOf)).toEqual(envs.map((e) => e.message_id));
    expect(replay.map((f) => f.seq)).toEqual(envs.map((_, i) => i + 1));
    expect(agent.ws.readyState).toBe(agent.ws.OPEN);
    for (const f of replay) agent.send({ type: 'ack', seq: f.seq, message_id: messageIdOf(f) });
    await agent.close();
  }, 90_000);

  it('sends a burst of live deliveries at the pace of an agent that reads slowly, without closing it as slow', async () => {
    const id = agentId('it.slowreader');
    const socket = await rawConnect(small.port, { type: 'hello', agent_id: id, token: agentToken(id) });
    socket.pause();
    // The agent reads one chunk of its socket (at most the stream's high-water mark) every 10 ms,
    // a few MB/s: its kernel buffers fill, and the burst below, sent as it arrived, would pass
    // the 64 KiB limit many times over.
    const splitter = new FrameSplitter();
    const deliveries: Frame[] = [];
    const reader = setInterval(() => {
      const bytes = socket.read() as Buffer | null;
      if (bytes) deliveries.push(...splitter.push(bytes).filter((f) => f.type === 'deliver'));
    }, 10);
    let closed = false;
    socket.once('close', () => (closed = true));
    try {
      const before = await slowDisconnects(small);
      const chunk = 'y'.repeat(200 * 1024);
      const envs = Array.from({ length: 60 }, (_, i) => router.envelope({ payload: Buffer.from(JSON.stringify({ i, chunk })) }));
      // Produced at once (a broker request holds at most 1 MB), so the consumer buffers them in a burst.
      await Promise.all(Array.from({ length: envs.length / 4 }, (_, i) => router.routeMany(id, envs.slice(i * 4, i * 4 + 4))));
      const deadline = Date.now() + 60_000;
      while (deliveries.length < envs.length && !closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect({ closed, slowDisconnects: (await slowDisconnects(small)) - before }).toEqual({ closed: false, slowDisconnects: 0 });
      // Every one, in seq order (the parallel produce decides the order they were buffered in).
      expect(deliveries.map(messageIdOf).sort()).toEqual(envs.map((e) => e.message_id as string).sort());
      expect(deliveries.map((f) => f.seq)).toEqual(envs.map((_, i) => i + 1));
      for (const f of deliveries) writeFrame(socket, { type: 'ack', seq: f.seq, message_id: messageIdOf(f) });
    } finally {
      clearInterval(reader);
      socket.destroy();
    }
  }, 90_000);
});
