import { describe, expect, it } from 'vitest';
import { ReachError } from '@reach/core';
import { parseHeartbeat } from '../../../services/registry/src/heartbeat-body.js';

const previous = { current_load: 2, queue_length: 1, avg_latency_ms: 40, health: 0.9 };

describe('parseHeartbeat', () => {
  it('reads every field', () => {
    expect(parseHeartbeat({ current_load: 3, queue_length: 0, avg_latency_ms: 12.5, health: 1 }, previous)).toEqual({
      current_load: 3,
      queue_length: 0,
      avg_latency_ms: 12.5,
      health: 1,
    });
  });

  it('keeps the last reported value of a field left out (a bare {} only renews the lease)', () => {
    expect(parseHeartbeat({}, previous)).toEqual(previous);
    expect(parseHeartbeat(undefined, previous)).toEqual(previous);
    expect(parseHeartbeat({ current_load: 0 }, previous)).toEqual({ ...previous, current_load: 0 });
    expect(parseHeartbeat({ health: 'degraded' }, previous)).toEqual({ ...previous, health: 0.5 });
  });

  it.each<[unknown, string]>([
    [{ current_load: -1 }, 'current_load'],
    [{ current_load: 1.5 }, 'current_load'],
    [{ queue_length: '3' }, 'queue_length'],
    [{ avg_latency_ms: -3 }, 'avg_latency_ms'],
    [{ health: 2 }, 'health'],
    [[1], 'body'],
  ])('refuses %j with 4104 naming %s', (body, field) => {
    let caught: unknown;
    try {
      parseHeartbeat(body, previous);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ReachError);
    expect((caught as ReachError).code).toBe(4104);
    expect((caught as ReachError).details?.field).toBe(field);
  });
});
