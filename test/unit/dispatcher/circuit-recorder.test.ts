import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import type { CircuitBreakers } from '@reach/circuits';
import { CircuitRecorder } from '../../../services/dispatcher/dist/circuit-recorder.js';

type Call = { agent: string; ok: boolean; count: number };

function recorderWithCalls(): { recorder: CircuitRecorder; calls: Call[] } {
  const calls: Call[] = [];
  const breakers = {
    recordOutcome: (agent: string, ok: boolean, _now: number, count: number) => {
      calls.push({ agent, ok, count });
      return Promise.resolve({ state: 'CLOSED' as const, transition: null });
    },
  } as unknown as CircuitBreakers;
  // A flush interval longer than the test: only explicit flushes and failures record.
  return { recorder: new CircuitRecorder(breakers, silentLogger, 60_000), calls };
}

describe('CircuitRecorder', () => {
  it('gathers acks per agent into one outcome count', () => {
    const { recorder, calls } = recorderWithCalls();
    for (let i = 0; i < 5; i++) recorder.record('a', true);
    recorder.record('b', true);
    expect(calls).toEqual([]);
    recorder.flush();
    expect(calls).toEqual([
      { agent: 'a', ok: true, count: 5 },
      { agent: 'b', ok: true, count: 1 },
    ]);
    recorder.flush();
    expect(calls).toHaveLength(2);
    recorder.stop();
  });

  it('records a failure at once, after the acks of the same agent gathered before it', () => {
    const { recorder, calls } = recorderWithCalls();
    recorder.record('a', true);
    recorder.record('a', true);
    recorder.record('b', true);
    recorder.record('a', false);
    expect(calls).toEqual([
      { agent: 'a', ok: true, count: 2 },
      { agent: 'a', ok: false, count: 1 },
    ]);
    recorder.stop();
    expect(calls[2]).toEqual({ agent: 'b', ok: true, count: 1 });
  });
});
