import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICY, EndpointBreakers, LOCAL_OPEN_CODE, type OutcomeRecorder } from '@reach/circuits';

function recorder() {
  const outcomes: Array<[string, boolean]> = [];
  const shared: OutcomeRecorder = {
    recordOutcome: (agentId, ok) => {
      outcomes.push([agentId, ok]);
      return Promise.resolve({ state: 'CLOSED', transition: null });
    },
  };
  return { shared, outcomes };
}

describe('EndpointBreakers (opossum around single calls)', () => {
  it('passes results through and reports each outcome to the shared breaker', async () => {
    const { shared, outcomes } = recorder();
    const eb = new EndpointBreakers({ timeoutMs: 1000, policy: DEFAULT_POLICY, shared });
    await expect(eb.call('agent-1', 'http://a/push', () => Promise.resolve(42))).resolves.toBe(42);
    await expect(eb.call('agent-1', 'http://a/push', () => Promise.reject(new Error('502')))).rejects.toThrow('502');
    expect(outcomes).toEqual([
      ['agent-1', true],
      ['agent-1', false],
    ]);
    eb.close();
  });

  it('times a call out, aborts its request and counts it as a failure', async () => {
    const { shared, outcomes } = recorder();
    const eb = new EndpointBreakers({ timeoutMs: 20, policy: DEFAULT_POLICY, shared });
    let signal: AbortSignal | undefined;
    const never = (s: AbortSignal) => {
      signal = s;
      return new Promise<never>(() => {});
    };
    await expect(eb.call('agent-2', 'http://b/push', never)).rejects.toMatchObject({ code: 'ETIMEDOUT' });
    expect(signal?.aborted).toBe(true);
    expect(outcomes).toEqual([['agent-2', false]]);
    eb.close();
  });

  it('opens locally after the volume of failures and then refuses without calling or reporting', async () => {
    const { shared, outcomes } = recorder();
    const eb = new EndpointBreakers({ timeoutMs: 1000, policy: { ...DEFAULT_POLICY, minVolume: 4 }, shared });
    for (let i = 0; i < 4; i++) await expect(eb.call('agent-3', 'http://c/push', () => Promise.reject(new Error('down')))).rejects.toThrow('down');
    expect(eb.stateOf('http://c/push')).toBe('OPEN');
    let called = false;
    const refused = eb.call('agent-3', 'http://c/push', () => {
      called = true;
      return Promise.resolve(1);
    });
    await expect(refused).rejects.toMatchObject({ code: LOCAL_OPEN_CODE });
    expect(called).toBe(false);
    expect(outcomes).toHaveLength(4);
    // Another endpoint is unaffected.
    await expect(eb.call('agent-4', 'http://d/push', () => Promise.resolve('ok'))).resolves.toBe('ok');
    eb.close();
  });
});
