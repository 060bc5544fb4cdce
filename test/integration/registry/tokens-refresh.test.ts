import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentNode, ReachClient, type ReachMessage } from '@reach/sdk';
import { localStack, testClient, uniqueName, waitUntilRoutable } from '@reach/sdk/testing';
import { adminToken, tokenSecret, uniq, urls } from '../../helpers/env.js';
import { eventually } from '../../helpers/wait.js';

// R-C2: tokens expire and the SDK renews them without dropping its connection. A registry
// of our own issues 6-second tokens (it shares the stack's Redis, PostgreSQL and Kafka, so the
// router and the stack's dispatcher see its agents); an AgentNode lives through several
// lifetimes of its token on one WebSocket, renewing it on that connection (refresh_token), and
// keeps receiving deliveries and sending — over HTTP and over the WebSocket — with the new token.
const TTL_S = 6;
let registry: ChildProcess;
let registryUrl: string;
let output = '';

beforeAll(async () => {
  registry = spawn(process.execPath, [join('services', 'registry', 'dist', 'main.js')], {
    env: {
      ...process.env,
      REACH_INSTANCE_ID: uniq('registry-short-tokens'),
      REACH_REGISTRY_PORT: '0',
      REACH_TOKEN_SECRET: tokenSecret(),
      REACH_ADMIN_TOKEN: adminToken(),
      REACH_TOKEN_TTL_S: String(TTL_S),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  registryUrl = await new Promise<string>((resolve, reject) => {
    const onData = (d: Buffer) => {
      output += d.toString();
      const m = /"port":(\d+),"msg":"ready"/.exec(output);
      if (m) resolve(`http://127.0.0.1:${m[1]}`);
    };
    registry.stdout!.on('data', onData);
    registry.stderr!.on('data', onData);
    registry.once('exit', (code) => reject(new Error(`registry exited with ${code}:\n${output}`)));
  });
}, 60_000);

afterAll(async () => {
  if (!registry || registry.exitCode !== null) return;
  const exited = once(registry, 'exit');
  registry.kill('SIGTERM');
  await exited;
});

function expiresAt(token: string): number {
  return (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { exp: number }).exp * 1000;
}

describe('SDK token refresh', () => {
  it('[token-refresh] renews the token on the open connection: past two lifetimes, same connection, deliveries and sends keep working', async () => {
    const echo = `echo_${uniqueName('t').replace(/[^a-z0-9]/g, '')}`;
    const node = new AgentNode({
      registryUrl,
      dispatcherUrl: urls.ws,
      ingressUrl: urls.ingress,
      token: adminToken(),
      handleSignals: false,
      descriptor: { agent_type: uniqueName('short-token-agent') },
    });
    const received: string[] = [];
    node.handle(echo, async (m: ReachMessage<{ n: number }>) => {
      received.push(m.message_id);
      return { n: m.payload!.n };
    });
    const connections: string[] = [];
    const disconnects: Array<{ code: number }> = [];
    node.on('connected', (c) => connections.push(c.connection_id));
    node.on('disconnected', (d) => disconnects.push(d));
    await node.start();
    try {
      await waitUntilRoutable(node.agentId!, localStack());
      const first = node.token!;
      expect(expiresAt(first) - Date.now()).toBeLessThanOrEqual(TTL_S * 1000);

      // Two renewals, and the first token dead for a whole lifetime already.
      const tokens = new Set([first]);
      await eventually(
        'two renewals, past two token lifetimes',
        () => {
          tokens.add(node.token!);
          return tokens.size >= 3 && Date.now() > expiresAt(first) + TTL_S * 1000;
        },
        60_000,
      );
      expect(connections).toHaveLength(1);
      expect(disconnects).toEqual([]);
      const res = await fetch(`${urls.ingress}/v1/messages/msg_none`, { headers: { authorization: `Bearer ${first}` } });
      expect(res.status).toBe(401); // the first token is expired: only the renewals keep the agent in

      // Deliveries still arrive on the same connection.
      await waitUntilRoutable(node.agentId!, localStack());
      const viaAdmin = await testClient().submit({ capability: echo, payload: { n: 1 } }, { waitMs: 15_000 });
      expect(viaAdmin).toMatchObject({ status: 'DELIVERED', result: { status: 'ok', payload: { n: 1 } } });

      // The agent sends over HTTP with its current token...
      const asAgent = new ReachClient({ ingressUrl: urls.ingress, registryUrl, token: node.token! });
      const viaHttp = await asAgent.submit({ capability: echo, payload: { n: 2 } }, { waitMs: 15_000 });
      expect(viaHttp).toMatchObject({ status: 'DELIVERED', result: { status: 'ok', payload: { n: 2 } } });
      // ...and over its WebSocket, which the dispatcher forwards with the renewed token.
      const viaWs = await node.send({ capability: echo, payload: { n: 3 } });
      await eventually('the WebSocket send delivered', async () => (await testClient().status(viaWs)).status === 'DELIVERED', 20_000);

      expect(received).toEqual(expect.arrayContaining([viaAdmin.message_id, viaHttp.message_id, viaWs]));
      expect(connections).toHaveLength(1);
      expect(disconnects).toEqual([]);
    } finally {
      await node.stop({ drainTimeoutMs: 2000 });
    }
  }, 90_000);
});
