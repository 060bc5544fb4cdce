import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import type { AgentApi, AgentFrame, DeliverFrame } from '@reach/sdk';
import { DeliveryRunner } from '../../../packages/sdk/dist/delivery-runner.js';

// R-G4, bounded memory: a node that handles 100,000 messages with distinct idempotency keys keeps
// at most its dedupe bounds (10,000 outcomes, 64 MiB, 30 min) and nothing else per message —
// its heap after 100k is where it was once the cache had filled.

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function deliver(seq: number): DeliverFrame {
  return {
    type: 'deliver',
    seq,
    attempt: 0,
    deadline: undefined,
    traceparent: undefined,
    message: {
      message_id: `msg_${String(seq).padStart(26, '0')}`,
      message_type: 'task_request',
      capability: 'remember_things',
      topic: null,
      target_agent_id: null,
      producer: 'caller',
      trace_id: 't',
      request_id: null,
      idempotency_key: `key-${seq}`,
      session_id: null,
      correlation_id: null,
      reply_to: null,
      priority: 'NORMAL',
      tags: [],
      retryable: true,
      timeout_ms: null,
      created_at: new Date(0).toISOString(),
      expire_at: null,
      schema_version: 1,
      content_type: 'application/json',
      payload: { seq },
      headers: {},
    },
  };
}

describe('bounded caches under 100k distinct keys (R-G4)', () => {
  it('the dedupe cache stays at its bounds and the heap stays flat', async () => {
    let answered = 0;
    const runner = new DeliveryRunner({
      maxConcurrency: 100,
      reportProgress: false,
      log: silentLogger,
      agentId: () => 'agent',
      send: (frame: AgentFrame) => {
        if (frame.type === 'ack') answered += 1;
      },
      api: {} as AgentApi,
      signal: new AbortController().signal,
    });
    let runs = 0;
    runner.handle('remember_things', async (m) => {
      runs += 1;
      return { seen: (m.payload as { seq: number }).seq, note: 'x'.repeat(100) };
    });
    const dedupe = (runner as unknown as { dedupe: { size: number; byteSize: number } }).dedupe;
    const inFlight = (runner as unknown as { inFlight: Map<string, unknown> }).inFlight;

    const heapAt: number[] = [];
    for (let seq = 1; seq <= 100_000; seq++) {
      runner.accept(deliver(seq), silentLogger);
      if (seq % 1_000 === 0) await runner.idle();
      if (seq === 20_000 || seq === 100_000) {
        await runner.idle();
        gc();
        heapAt.push(process.memoryUsage().heapUsed);
      }
    }
    expect(answered).toBe(100_000);
    expect(dedupe.size).toBe(10_000);
    expect(dedupe.byteSize).toBeLessThan(64 * 1024 * 1024);
    expect(inFlight.size).toBe(0);
    // 80,000 more keys after the cache was full: the heap moved by less than 8 MiB.
    expect(heapAt[1]! - heapAt[0]!).toBeLessThan(8 * 1024 * 1024);
    expect(runs).toBe(100_000);
    // The newest outcome is remembered (its redelivery is answered without a run), the oldest is gone (it runs again).
    runner.accept(deliver(100_000), silentLogger);
    await runner.idle();
    expect(runs).toBe(100_000);
    runner.accept(deliver(1), silentLogger);
    await runner.idle();
    expect(runs).toBe(100_001);
    expect(answered).toBe(100_002);
  }, 120_000);
});
