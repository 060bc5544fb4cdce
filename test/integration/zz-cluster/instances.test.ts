import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { startTestAgent, stopTestAgents, uniqueName, type TestStack } from '@reach/sdk/testing';
import { eventually } from '../../helpers/wait.js';
import { saveFigures, startSecondStack, type SecondStack } from './second-stack.js';

// `reach up --instances 2` (a second stack on its own ports and REACH_HOME): two instances of
// every service but the console, each ready on its own port (the documented one + 100 for the
// second) with its own instance id, and traffic through the second ingress and dispatcher. Then
// one router instance is killed with SIGKILL while messages flow: the supervisor restarts it at
// once and every accepted message is DELIVERED. Figures: test-artifacts/cluster/instances.json.
const SCALED = ['registry', 'tracker', 'dead-letter', 'router', 'retry-scheduler', 'dispatcher', 'ingress'] as const;
const RATE = 10;
const DURATION_MS = 16_000;
const KILL_AT_MS = 4_000;

let s: SecondStack;
let keep = false;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

beforeAll(async () => {
  s = await startSecondStack({ name: 'instances', portBase: 27000, instances: 2 });
}, 300_000);

afterAll(async () => {
  await stopTestAgents();
  if (s) {
    const res = await s.down(keep);
    expect(res.code, res.stderr).toBe(0);
  }
}, 200_000);

describe('reach up --instances 2', () => {
  it('runs two ready instances of every scalable service on distinct ports with distinct instance ids, and one console', async () => {
    onTestFailed(() => void (keep = true));
    const ps = await s.ps();
    expect(ps.ready).toBe(true);
    const names = ps.processes.map((p) => p.name);
    for (const svc of SCALED) {
      expect(names, svc).toContain(svc);
      expect(names, svc).toContain(`${svc}-2`);
      expect(names, svc).not.toContain(`${svc}-3`);
    }
    expect(names.filter((n) => n.startsWith('console'))).toEqual(['console']);
    const endpoints = ps.processes.map((p) => p.endpoint).filter(Boolean);
    expect(new Set(endpoints).size).toBe(endpoints.length);
    expect(ps.processes.every((p) => p.alive && p.ready)).toBe(true);

    const instanceIds = new Set<string>();
    for (const svc of SCALED) {
      for (const i of [1, 2]) {
        const url = s.url(svc, i);
        expect(ps.processes.find((p) => p.name === (i === 1 ? svc : `${svc}-2`))?.endpoint).toBe(url);
        const ready = await fetch(`${url}/readyz`);
        expect(ready.status, url).toBe(200);
        const health = (await (await fetch(`${url}/healthz`)).json()) as { service: string; instance: string };
        expect(health.service).toBe(svc);
        instanceIds.add(health.instance);
      }
    }
    expect(instanceIds.size).toBe(SCALED.length * 2);
  });

  it('SIGKILL of a router instance under traffic: the supervisor restarts it at once and every accepted message is DELIVERED', async () => {
    onTestFailed(() => void (keep = true));
    const capability = uniqueName('instances').replace(/-/g, '_');
    const receivedAt = new Map<string, number>();
    // The agent on the second dispatcher; messages alternate between the two ingress instances.
    const sdk: TestStack = { ...s.sdk, dispatcherUrl: `${s.url('dispatcher', 2).replace(/^http/, 'ws')}/v1/connect`, routerUrl: s.url('router', 2) };
    await startTestAgent({
      stack: sdk,
      descriptor: { metadata: { max_concurrency: 64 } },
      handlers: {
        [capability]: async (m) => {
          if (!receivedAt.has(m.message_id)) receivedAt.set(m.message_id, Date.now());
          return { ok: true };
        },
      },
    });
    const token = s.adminToken();
    const sent: Array<{ sentAt: number; status: number; id?: string; error?: string }> = [];
    const send = async (n: number) => {
      const rec: (typeof sent)[number] = { sentAt: Date.now(), status: 0 };
      sent.push(rec);
      try {
        const res = await fetch(`${s.url('ingress', 1 + (n % 2))}/v1/messages`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ capability, message_type: 'task_request', payload: { n } }),
          signal: AbortSignal.timeout(60_000),
        });
        const body = await res.text();
        rec.status = res.status;
        if (res.status === 202) rec.id = (JSON.parse(body) as { message_id: string }).message_id;
        else rec.error = body.slice(0, 200);
      } catch (err) {
        rec.error = (err as Error).message;
      }
    };

    const before = (await s.ps()).processes.find((p) => p.name === 'router-2')!;
    let killedAt = 0;
    let respawnedMs: number | null = null;
    let readyAgainMs: number | null = null;
    let watcher: Promise<void> | undefined;
    const started = Date.now();
    const sends: Array<Promise<void>> = [];
    for (let n = 0; ; n++) {
      const due = started + (n * 1000) / RATE;
      if (due - started >= DURATION_MS) break;
      await sleep(Math.max(0, due - Date.now()));
      if (!killedAt && Date.now() - started >= KILL_AT_MS) {
        killedAt = Date.now();
        process.kill(before.pid, 'SIGKILL');
        // The supervisor's new process (a new pid), then its readiness (/readyz: the consumer
        // group joined, which waits for the dead member up to the group's rebalance timeout).
        watcher = eventually(
          'router-2 respawned',
          () => {
            const pid = s.pid('router-2');
            return pid !== undefined && pid !== before.pid && alive(pid);
          },
          30_000,
          20,
        ).then(async () => {
          respawnedMs = Date.now() - killedAt;
          await eventually(
            'router-2 ready again',
            async () => (await fetch(`${s.url('router', 2)}/readyz`).catch(() => undefined))?.status === 200,
            60_000,
            100,
          );
          readyAgainMs = Date.now() - killedAt;
        });
      }
      sends.push(send(n));
    }
    await Promise.all(sends);
    await watcher;

    const accepted = sent.filter((r) => r.id);
    const ids = accepted.map((r) => r.id!);
    const states = new Map<string, string>();
    try {
      await eventually(
        `${ids.length} accepted messages DELIVERED`,
        async () => {
          const open = ids.filter((id) => states.get(id) !== 'DELIVERED');
          for (let i = 0; i < open.length; i += 16) {
            await Promise.all(
              open.slice(i, i + 16).map(async (id) => {
                const res = await fetch(`${s.url('ingress')}/v1/messages/${id}`, { headers: { authorization: `Bearer ${token}` } }).catch(() => undefined);
                states.set(id, res?.ok ? ((await res.json()) as { status: string }).status : 'unknown');
              }),
            );
          }
          return ids.every((id) => states.get(id) === 'DELIVERED');
        },
        60_000,
        500,
      );
    } finally {
      const after = accepted.filter((r) => r.sentAt >= killedAt && receivedAt.has(r.id!)).map((r) => receivedAt.get(r.id!)! - r.sentAt);
      const steady = accepted.filter((r) => r.sentAt < killedAt && receivedAt.has(r.id!)).map((r) => receivedAt.get(r.id!)! - r.sentAt);
      const sorted = (v: number[]) => [...v].sort((a, b) => a - b);
      const ps = await s.ps().catch(() => undefined);
      saveFigures('instances', {
        rate_per_s: RATE,
        sent: sent.length,
        accepted: accepted.length,
        refused: sent.filter((r) => !r.id).length,
        lost: ids.filter((id) => states.get(id) !== 'DELIVERED').length,
        router2_respawned_after_kill_ms: respawnedMs,
        router2_ready_again_after_kill_ms: readyAgainMs,
        router2_restarts: ps?.processes.find((p) => p.name === 'router-2')?.restarts ?? null,
        latency_ms_before_kill: { p50: sorted(steady)[Math.floor(steady.length / 2)] ?? null, max: sorted(steady).at(-1) ?? null },
        latency_ms_after_kill: { p50: sorted(after)[Math.floor(after.length / 2)] ?? null, max: sorted(after).at(-1) ?? null },
      });
    }
    expect(ids.length).toBe(sent.length);
    expect(ids.filter((id) => states.get(id) !== 'DELIVERED')).toEqual([]);
    // The first restart is immediate (no backoff): a new process within a second or two of the
    // kill (what follows is the process's own start and the group rejoin, measured above).
    expect(respawnedMs).not.toBeNull();
    expect(respawnedMs!).toBeLessThan(2_000);
    expect(readyAgainMs).not.toBeNull();
    expect((await s.ps()).processes.find((p) => p.name === 'router-2')?.restarts).toBe(1);
  });
});
