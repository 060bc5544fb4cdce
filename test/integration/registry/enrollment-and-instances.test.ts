import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminToken, uniq } from '../../helpers/env.js';
import { plainKafka, TopicTap } from '../../helpers/kafka.js';
import { call, capWord, eventually, getAgent, register, sleep, tokenSecret } from './helpers.js';

// A second registry instance next to the stack's, sharing its Redis and Kafka: with an
// enrollment token configured (docs/design.md §3), and as a second sweeper racing the first for
// expired leases (each expiry must be handled exactly once). Also: no token secret, no start.
interface Instance {
  child: ChildProcess;
  output: () => string;
  base: Promise<string>;
}

function startRegistry(env: Record<string, string | undefined>): Instance {
  const childEnv: Record<string, string | undefined> = { ...process.env, REACH_INSTANCE_ID: uniq('registry-it'), REACH_REGISTRY_PORT: '0', ...env };
  for (const [k, v] of Object.entries(childEnv)) if (v === undefined) delete childEnv[k];
  const child = spawn(process.execPath, [join('services', 'registry', 'dist/main.js')], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const base = new Promise<string>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /"port":(\d+),"msg":"ready"/.exec(out);
      if (m) resolve(`http://127.0.0.1:${m[1]}`);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`registry exited with ${code} before it was ready:\n${out}`)));
  });
  base.catch(() => undefined);
  return { child, output: () => out, base };
}

async function stop(i: Instance | undefined): Promise<void> {
  if (!i || i.child.exitCode !== null) return;
  const exited = once(i.child, 'exit');
  i.child.kill('SIGTERM');
  await exited;
}

const enrollment = `enroll-${randomBytes(16).toString('hex')}`;
const admin = adminToken();
let instance: Instance;
let base: string;

beforeAll(async () => {
  instance = startRegistry({ REACH_TOKEN_SECRET: tokenSecret(), REACH_ADMIN_TOKEN: admin, REACH_ENROLLMENT_TOKEN: enrollment });
  base = await instance.base;
  await eventually(
    () => fetch(`${base}/readyz`).then((r) => r.status),
    (s) => s === 200,
  );
});

afterAll(async () => {
  await stop(instance);
});

function body(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { agent_id: uniq('it.enrolled'), agent_type: 'it.enrolled', capabilities: [{ name: `parse_${capWord()}` }], ...overrides };
}

describe('with REACH_ENROLLMENT_TOKEN', () => {
  it('refuses registration without it (401 / 1003) or with a wrong one', async () => {
    const none = await call<{ error: { code: number } }>('POST', '/v1/agents', { body: body(), base });
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe(1003);
    expect((await call('POST', '/v1/agents', { body: body(), base, token: 'not-the-enrollment-token' })).status).toBe(401);
  });

  it('accepts the enrollment token and the admin token', async () => {
    const a = await register(body(), enrollment, base);
    expect((await getAgent(a.agent_id, base)).body.status).toBe('ONLINE');
    const b = await register(body(), admin, base);
    expect((await getAgent(b.agent_id, base)).body.status).toBe('ONLINE');
  });

  it('does not let the enrollment token replace an existing agent; the agent itself may', async () => {
    const desc = body();
    const first = await register(desc, enrollment, base);
    const again = await call<{ error: { code: number } }>('POST', '/v1/agents', { body: desc, base, token: enrollment });
    expect(again.status).toBe(401);
    expect(again.body.error.code).toBe(1003);
    const own = await register(desc, first.token, base);
    expect(own.agent_id).toBe(first.agent_id);
  });

  it('shares state with the stack instance: one Redis, one feed', async () => {
    const reg = await register(body(), enrollment, base);
    const hb = await call<{ status: string }>('POST', `/v1/agents/${reg.agent_id}/heartbeat`, { body: { current_load: 1 }, token: reg.token });
    expect(hb.status).toBe(200);
    expect((await getAgent(reg.agent_id, base)).body.load.current_load).toBe(1);
  });
});

describe('two instances sweeping the same leases', () => {
  it('marks an expired agent OFFLINE exactly once', async () => {
    const feed = await new TopicTap<{ status: string; revision: number }>(plainKafka(), 'reach.agents.v1').open();
    try {
      const reg = await register(body({ ttl_s: 2 }), admin, base);
      await eventually(
        async () => (await getAgent(reg.agent_id)).body.status,
        (s) => s === 'OFFLINE',
        10_000,
      );
      await feed.waitFor((r) => r.key === reg.agent_id && r.value?.status === 'OFFLINE');
      // Both sweepers tick every second: give the other one time to (wrongly) claim it again.
      await sleep(2500);
      const offline = feed.records.filter((r) => r.key === reg.agent_id && r.value?.status === 'OFFLINE');
      expect(offline).toHaveLength(1);
    } finally {
      await feed.close();
    }
  });
});

describe('without REACH_TOKEN_SECRET', () => {
  it('refuses to start (exit 78), naming the variable', async () => {
    const s = startRegistry({ REACH_TOKEN_SECRET: undefined });
    const [code] = (await once(s.child, 'exit')) as [number | null];
    expect(code).toBe(78);
    expect(s.output()).toMatch(/REACH_TOKEN_SECRET is required/);
  });
});
