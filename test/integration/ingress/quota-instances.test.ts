import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniq, urls } from '../../helpers/env.js';
import { spawnService, waitReady, type SpawnedService } from '../../helpers/services.js';
import { eventually } from '../../helpers/wait.js';
import { call, parkedMessage, resetQuota, setQuota, type Json } from './quota-helpers.js';
import { registerProducer } from './producer-agent.js';

// Quotas across ingress instances (R-D7: "shared by all ingress instances", "changeable at
// runtime"): a second ingress process started by the test next to the stack's own. An override
// set through one instance applies on the other without a restart and survives a restart (it is
// in PostgreSQL); two instances hammered at once for one producer admit no more than one shared
// bucket allows. No timing is asserted beyond that bound; how long propagation took is printed.

interface Instance {
  service: SpawnedService;
  base: string;
}

async function startIngress(): Promise<Instance> {
  const service = spawnService('ingress');
  const base = `http://127.0.0.1:${await service.port}`;
  await waitReady(base);
  return { service, base };
}

async function stop(instance: Instance | undefined): Promise<void> {
  await instance?.service.stop();
}

async function applied(base: string, agentId: string): Promise<Json> {
  return (await call('GET', `/v1/quotas/${encodeURIComponent(agentId)}`, { base })).body.applied as Json;
}

/** Waits until `base` applies the given limit to the agent; returns how long that took (ms). */
async function appliedWithin(base: string, agentId: string, ratePerS: number, burst: number, since: number): Promise<number> {
  await eventually(
    `${base} to apply ${ratePerS}/s burst ${burst} to ${agentId}`,
    async () => {
      const a = await applied(base, agentId);
      return a.rate_per_s === ratePerS && a.burst === burst;
    },
    10_000,
    10,
  );
  return Date.now() - since;
}

async function quotaRejections(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = /^reach_ingress_quota_rejections_total\{path="http"\} (\d+)/m.exec(text);
  return m ? Number(m[1]) : 0;
}

let second: Instance | undefined;
const overridden: string[] = [];

beforeAll(async () => {
  second = await startIngress();
});

afterAll(async () => {
  await stop(second);
  await Promise.all(overridden.map(resetQuota));
});

describe('quota overrides across instances', () => {
  it('a change made through one instance applies on the other (lowered, raised, reset), and survives a restart of it', async () => {
    const agent = await registerProducer('quota-spread');
    overridden.push(agent.agentId);
    const capability = uniq('quota_spread');
    const send = (base: string, n: number) => call('POST', '/v1/messages', { base, token: agent.token, body: parkedMessage(capability, n) });
    const figures: Record<string, number> = {};

    // Lowered through the stack's instance → the second one enforces it.
    let t = Date.now();
    await setQuota(agent.agentId, 0.01, 2);
    figures.lowered_ms = await appliedWithin(second!.base, agent.agentId, 0.01, 2, t);
    const lowered = [];
    for (let i = 0; i < 3; i++) lowered.push((await send(second!.base, i)).status);
    expect(lowered).toEqual([202, 202, 429]);

    // Raised through the second instance → the stack's one applies it too.
    t = Date.now();
    await setQuota(agent.agentId, 1000, 50, second!.base);
    figures.raised_ms = await appliedWithin(urls.ingress, agent.agentId, 1000, 50, t);
    const raised = [];
    for (let i = 0; i < 10; i++) raised.push((await send(urls.ingress, 10 + i)).status);
    expect(raised).toEqual(Array(10).fill(202));

    // Stored in PostgreSQL: a restarted instance applies it from its first request on.
    await stop(second);
    second = await startIngress();
    expect(await applied(second.base, agent.agentId)).toMatchObject({ rate_per_s: 1000, burst: 50 });

    // Reset through one instance → the default everywhere.
    t = Date.now();
    await resetQuota(agent.agentId);
    figures.reset_ms = await appliedWithin(second.base, agent.agentId, 100, 200, t);
    // Printed, not asserted (no timed assertions): REACH_QUOTA_REFRESH_MS (500 ms) bounds it.
    console.log(`quota override propagation to the other instance: ${JSON.stringify(figures)}`);
  });
});

describe('one shared bucket for every instance', () => {
  it('two instances hammered at once for one producer admit at most burst + rate × elapsed', async () => {
    const agent = await registerProducer('quota-hammer');
    overridden.push(agent.agentId);
    // A quota well below what twelve loops ask for even on a loaded machine (~40 requests/s in
    // CI), so the bucket stays empty and both instances see refusals.
    const RATE = 10;
    const BURST = 5;
    const LOOPS_PER_INSTANCE = 6;
    const DURATION_MS = 2500;
    await setQuota(agent.agentId, RATE, BURST);
    await appliedWithin(second!.base, agent.agentId, RATE, BURST, Date.now());
    const capability = uniq('quota_hammer');
    const rejectionsBefore = await quotaRejections(second!.base);

    const counts = new Map<string, { admitted: number; refused: number; other: string[] }>();
    const started = Date.now();
    const bases = [urls.ingress, second!.base];
    for (const base of bases) counts.set(base, { admitted: 0, refused: 0, other: [] });
    // Every loop alternates between the instances, so both keep asking while the shared bucket
    // is empty, however much slower one of them answers (a loop per instance once let a slow
    // instance only ask while the bucket had refilled: no refusal there, in CI).
    const hammer = async (loop: number) => {
      let n = 0;
      while (Date.now() - started < DURATION_MS) {
        const base = bases[(n + loop) % bases.length]!;
        const c = counts.get(base)!;
        const a = await call('POST', '/v1/messages', { base, token: agent.token, body: parkedMessage(capability, n++) });
        if (a.status === 202) c.admitted++;
        else if (a.status === 429 && a.body.error?.code === 4129 && Number(a.headers.get('retry-after')) >= 1) c.refused++;
        else c.other.push(`${a.status} ${JSON.stringify(a.body)}`);
      }
    };
    await Promise.all(Array.from({ length: LOOPS_PER_INSTANCE * bases.length }, (_, loop) => hammer(loop)));
    const elapsedS = (Date.now() - started) / 1000;

    const a = counts.get(urls.ingress)!;
    const b = counts.get(second!.base)!;
    const admitted = a.admitted + b.admitted;
    const bound = BURST + RATE * elapsedS;
    console.log(
      `two instances, ${elapsedS.toFixed(2)} s: admitted ${admitted} (stack ${a.admitted}, second ${b.admitted}), refused ${a.refused + b.refused}; bound ${bound.toFixed(1)}`,
    );
    expect([...a.other, ...b.other]).toEqual([]);
    expect(admitted).toBeLessThanOrEqual(Math.floor(bound));
    // The bucket was kept busy: well over the burst went through, through both instances.
    expect(admitted).toBeGreaterThanOrEqual(BURST + (RATE * elapsedS) / 2);
    expect(a.admitted).toBeGreaterThan(0);
    expect(b.admitted).toBeGreaterThan(0);
    expect(a.refused).toBeGreaterThan(0);
    expect(b.refused).toBeGreaterThan(0);
    // The metric counts every quota refusal of the instance (no agent label).
    expect((await quotaRejections(second!.base)) - rejectionsBefore).toBe(b.refused);
  });
});
