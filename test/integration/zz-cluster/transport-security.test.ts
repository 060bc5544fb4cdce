import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { fetchFor, type ClientTls } from '@reach/sdk';
import { startTestAgent, stopTestAgents, testClient, uniqueName, type TestAgent } from '@reach/sdk/testing';
import { reachCli } from '../../helpers/cli.js';
import { makePki, type Pki } from '../../helpers/pki.js';
import { startPrivatePostgres, startPrivateRedis, type PrivatePostgres, type PrivateRedis } from '../../helpers/private-servers.js';
import { eventually } from '../../helpers/wait.js';
import { startSecondStack, type SecondStack } from './second-stack.js';

// A production-shaped second stack (port base 22000, below the kernel's ephemeral ports 32768–60999, which an outgoing connection can hold): every service serves HTTPS only (the
// dispatcher WSS) with a certificate of the test's openssl CA, the admin token needs a client
// certificate of that CA (REACH_TLS_CLIENT_CA), PostgreSQL is a private server with a password
// user reached over verified TLS, Redis a private server with requirepass over rediss://, and
// the token keys come from REACH_TOKEN_SECRETS_FILE. Then the signing key is rotated in three
// steps while agents exchange traffic: no agent's WebSocket drops, no submit is refused, every
// message is delivered, and a token of the retired key is refused afterwards.
const PORT_BASE = 22000;
const SERVICES = { ingress: 410, registry: 411, dispatcher: 412, 'dead-letter': 414, router: 415, tracker: 413, 'retry-scheduler': 416 } as const;
const TOKEN_VERIFIERS = ['registry', 'ingress', 'dispatcher', 'router', 'dead-letter'] as const;
const secret = () => randomBytes(24).toString('base64url');
const K1 = `k1:${secret()}`;
const K2 = `k2:${secret()}`;
const https = (svc: keyof typeof SERVICES) => `https://127.0.0.1:${PORT_BASE + SERVICES[svc]}`;
const kidOf = (token: string | undefined) =>
  token ? (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { kid?: string }).kid : undefined;

let pki: Pki;
let pg: PrivatePostgres;
let redis: PrivateRedis;
let s: SecondStack;
let keysFile: string;
let keep = false;

beforeAll(async () => {
  pki = makePki();
  pg = startPrivatePostgres(pki, { port: 22532, user: 'reach_stack', password: `pg-${secret()}` });
  redis = await startPrivateRedis(pki, { port: 22479, tlsPort: 22480, password: `redis-${secret()}` });
  keysFile = join(pki.dir, 'token-keys');
  writeFileSync(keysFile, `${K1}\n`);
  s = await startSecondStack({
    name: 'transport',
    portBase: PORT_BASE,
    extraEnv: {
      REACH_DATABASE_URL: pg.url('reach_transport_stack'),
      REACH_REDIS_URL: `rediss://:${redis.password}@127.0.0.1:${redis.tlsPort}/0?ca_file=${encodeURIComponent(pki.caCert)}`,
      REACH_TLS_CERT: pki.serverCert,
      REACH_TLS_KEY: pki.serverKey,
      REACH_TLS_CLIENT_CA: pki.caCert,
      REACH_CA_FILE: pki.caCert,
      // `reach` and the test kit present the operator's client certificate
      REACH_TLS_CLIENT_CERT: pki.clientCert,
      REACH_TLS_CLIENT_KEY: pki.clientKey,
      REACH_TOKEN_SECRETS_FILE: keysFile,
      REACH_TOKEN_SECRETS_RELOAD_MS: '200',
      REACH_TOKEN_TTL_S: '8',
    },
  });
}, 300_000);

afterAll(async () => {
  await stopTestAgents();
  // The private servers go whatever `reach down` says; its exit code is checked last.
  const down = s ? await s.down(keep) : undefined;
  await redis?.stop();
  pg?.stop();
  pki?.remove();
  if (down) expect(down.code, down.stderr).toBe(0);
}, 200_000);

const trusted = (): ClientTls => ({ ca: readFileSync(pki.caCert) });
const operator = (): ClientTls => ({ ca: readFileSync(pki.caCert), cert: readFileSync(pki.clientCert), key: readFileSync(pki.clientKey) });

describe('HTTPS and WSS on every service (REACH_TLS_CERT / REACH_TLS_KEY)', () => {
  it('every service answers over TLS with the CA trusted, and nothing over plain HTTP or for an untrusted CA', async () => {
    for (const svc of Object.keys(SERVICES) as Array<keyof typeof SERVICES>) {
      const res = await fetchFor(trusted())(`${https(svc)}/healthz`, {});
      expect(res.status, svc).toBe(200);
      await expect(fetch(`http://127.0.0.1:${PORT_BASE + SERVICES[svc]}/healthz`), svc).rejects.toThrow();
      await expect(fetchFor({ ca: readFileSync(pki.strangerCaCert) })(`${https(svc)}/healthz`, {}), svc).rejects.toThrow(/fetch failed/);
    }
    // without the CA, the system store does not know it either
    await expect(fetch(`${https('ingress')}/healthz`)).rejects.toThrow();
  });

  it('reach ps and reach dlq list work against the TLS stack (REACH_CA_FILE, REACH_TLS_CLIENT_CERT)', async () => {
    const ps = await reachCli(['ps', '--json'], s.env);
    expect(ps.code, ps.stderr).toBe(0);
    const out = JSON.parse(ps.stdout) as { processes: Array<{ name: string; endpoint: string; ready: boolean }> };
    expect(out.processes.find((p) => p.name === 'ingress')).toMatchObject({ endpoint: https('ingress'), ready: true });
    const dlq = await reachCli(['dlq', 'list', '--json'], s.env);
    expect(dlq.code, dlq.stderr).toBe(0);
  });
});

describe('mutual TLS for the admin token (REACH_TLS_CLIENT_CA)', () => {
  const admin = () => ({ authorization: `Bearer ${s.adminToken()}` });

  it('the admin token works only with a client certificate the CA signed', async () => {
    expect((await fetchFor(operator())(`${https('dead-letter')}/v1/dlq?limit=1`, { headers: admin() })).status).toBe(200);
    const bare = await fetchFor(trusted())(`${https('dead-letter')}/v1/dlq?limit=1`, { headers: admin() });
    expect(bare.status).toBe(401);
    expect(await bare.json()).toMatchObject({ error: { code: 1003, name: 'AUTH_FAILED', details: { reason: 'client_certificate_required' } } });
    const impostor: ClientTls = { ca: readFileSync(pki.caCert), cert: readFileSync(pki.strangerClientCert), key: readFileSync(pki.strangerClientKey) };
    expect((await fetchFor(impostor)(`${https('ingress')}/v1/quotas/nobody`, { method: 'PUT', headers: admin(), body: '{}' })).status).toBe(401);
  });

  it('the console forwards an admin call with its own client certificate, and only for a caller who presented one', async () => {
    const consoleUrl = `https://127.0.0.1:${PORT_BASE + 420}`;
    for (const path of ['/api/dead-letter/v1/dlq?limit=1', '/api/registry/v1/audit?limit=1', '/api/registry/v1/agents', '/api/qos-history']) {
      const res = await fetchFor(operator())(`${consoleUrl}${path}`, { headers: admin() });
      expect(res.status, `${path}: ${await res.clone().text()}`).toBe(200);
      const bare = await fetchFor(trusted())(`${consoleUrl}${path}`, { headers: admin() });
      expect(bare.status, path).toBe(401);
      expect(await bare.json()).toMatchObject({ error: { code: 1003, details: { reason: 'client_certificate_required' } } });
    }
    const overview = (await (await fetchFor(trusted())(`${consoleUrl}/api/overview`, {})).json()) as { services: Array<{ state: string }> };
    expect(overview.services.map((x) => x.state)).toEqual(overview.services.map(() => 'ready'));
  });

  it('agents need no certificate: they register, connect over WSS and get deliveries with their token', async () => {
    const capability = uniqueName('tls_echo').replace(/-/g, '_');
    // No admin token and no client certificate: registration is open (no REACH_ENROLLMENT_TOKEN).
    const agent = await startTestAgent({ stack: { ...s.sdk, adminToken: undefined, tls: trusted() }, handlers: { [capability]: (m) => m.payload } });
    expect(s.sdk.dispatcherUrl.startsWith('wss://')).toBe(true);
    expect(agent.node.connected).toBe(true);
    // (without the admin token the kit cannot wait for the router's view: retry while it is 2001)
    const out = await eventually('a delivered round trip', () =>
      agent.node
        .client()
        .submit({ capability, payload: { hello: 'tls' } }, { waitMs: 10_000 })
        .then((r) => (r.status === 'DELIVERED' ? r : undefined)),
    );
    expect(out).toMatchObject({ result: { status: 'ok', payload: { hello: 'tls' } } });
    await agent.stop();
  });
});

describe('the Python SDK over https/wss (AGENT_REACH_CA_FILE)', () => {
  it('examples/python/echo_agent.py registers over https, connects over wss and answers', async () => {
    const capability = uniqueName('py_tls_echo').replace(/-/g, '_');
    const env: NodeJS.ProcessEnv = {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('REACH_') && !k.startsWith('AGENT_REACH_'))),
      PYTHONPATH: join(process.cwd(), 'sdks/python/src'),
      AGENT_REACH_REGISTRY_URL: https('registry'),
      AGENT_REACH_DISPATCHER_URL: `wss://127.0.0.1:${PORT_BASE + SERVICES.dispatcher}/v1/connect`,
      AGENT_REACH_INGRESS_URL: https('ingress'),
      AGENT_REACH_CA_FILE: pki.caCert,
      ECHO_CAPABILITY: capability,
    };
    const py = spawn('/usr/bin/python3', [join(process.cwd(), 'examples/python/echo_agent.py')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    py.stdout.on('data', (d: Buffer) => (output += d.toString()));
    py.stderr.on('data', (d: Buffer) => (output += d.toString()));
    try {
      await eventually('the Python agent connected', () => output.includes(`serves ${capability}`), 30_000).catch((err: Error) => {
        throw new Error(`${err.message}\n${output}`);
      });
      const out = await eventually('a delivered round trip through the Python agent', () =>
        testClient({ stack: s.sdk })
          .submit({ capability, payload: { hello: 'python' } }, { waitMs: 10_000 })
          .then((r) => (r.status === 'DELIVERED' ? r : undefined)),
      );
      expect(out).toMatchObject({ result: { status: 'ok', payload: { echo: { hello: 'python' } } } });
    } finally {
      await new Promise<void>((resolve) => {
        if (py.exitCode !== null) return resolve();
        py.once('exit', () => resolve());
        py.kill('SIGTERM');
      });
    }
  });
});

describe('signing-key rotation under traffic (REACH_TOKEN_SECRETS_FILE)', () => {
  /** Waits until every token-verifying service has logged the key set `kids` (signing first). */
  async function allServicesHave(kids: string[]): Promise<void> {
    const needle = `"kids":${JSON.stringify([...kids, '(legacy)'])}`;
    await eventually(
      `every service reloaded ${kids.join(',')}`,
      () => TOKEN_VERIFIERS.every((svc) => readFileSync(join(s.home, 'logs', `${svc}.log`), 'utf8').includes(needle)),
      15_000,
      100,
    );
  }

  it('three steps (add k2, sign with k2, retire k1) while agents send and receive: no socket drops, nothing refused, all delivered', async () => {
    onTestFailed(() => void (keep = true));
    const capability = uniqueName('rotation').replace(/-/g, '_');
    const stack = s.sdk;
    const received = new Set<string>();
    const handler = await startTestAgent({ stack, handlers: { [capability]: (m) => void received.add(m.message_id) } });
    const sender = await startTestAgent({ stack, handlers: { [uniqueName('unused').replace(/-/g, '_')]: () => null } });
    const agents: TestAgent[] = [handler, sender];
    const drops: string[] = [];
    for (const a of agents) a.node.on('disconnected', (e) => drops.push(`${a.agentId}: ${e.code} ${e.reason}`));
    const k1Token = sender.node.token!;
    expect(kidOf(k1Token)).toBe('k1');

    const sent: string[] = [];
    const refused: string[] = [];
    let sending = true;
    const traffic = (async () => {
      for (let i = 0; sending; i++) {
        try {
          // the sender's current token each time: it renews on its socket every ~6.4 s
          const r = await sender.node.client().submit({ capability, payload: { i } });
          sent.push(r.message_id);
        } catch (err) {
          refused.push((err as Error).message);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    try {
      // 1. k2 verifies everywhere before anyone signs with it
      writeFileSync(keysFile, `${K1}\n${K2}\n`);
      await allServicesHave(['k1', 'k2']);
      // 2. k2 signs; k1 tokens still verify
      writeFileSync(keysFile, `${K2}\n${K1}\n`);
      await allServicesHave(['k2', 'k1']);
      // the agents renew on their open sockets and get k2 tokens
      await eventually('both agents hold k2 tokens', () => agents.every((a) => kidOf(a.node.token) === 'k2'), 20_000);
      // 3. k1 retired
      writeFileSync(keysFile, `${K2}\n`);
      await allServicesHave(['k2']);
      await eventually('more traffic after the retirement', () => sent.length >= 20 && sent.length > 0, 10_000);
    } finally {
      sending = false;
      await traffic;
    }

    // A token signed with the retired key is refused, by its kid.
    const old = await fetchFor(trusted())(`${https('ingress')}/v1/messages/${sent[0]}`, { headers: { authorization: `Bearer ${k1Token}` } });
    expect(old.status).toBe(401);
    expect(((await old.json()) as { error: { message: string } }).error.message).toMatch(/key k1 is unknown or retired/);

    await eventually(`all ${sent.length} messages delivered`, () => sent.every((id) => received.has(id)), 30_000);
    expect(refused).toEqual([]);
    expect(drops).toEqual([]);
    expect(agents.every((a) => a.node.connected)).toBe(true);
  });
});
