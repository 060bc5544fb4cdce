import { afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { localStack, startTestAgent, stopTestAgents, testClient, uniqueName } from '@reach/sdk/testing';

// examples/echo-agent.ts, built by the workspace build (examples/dist), run as its own process
// the way a user runs it: it registers, serves requests, and on SIGTERM finishes and deregisters.

const SCRIPT = join(process.cwd(), 'examples', 'dist', 'echo-agent.js');
let child: ChildProcess | undefined;

afterEach(async () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  child = undefined;
  await stopTestAgents();
});

function firstLine(proc: ChildProcess, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`no output from the example within ${timeoutMs} ms; stderr: ${err}`)), timeoutMs);
    proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(out.slice(0, nl));
      }
    });
    proc.once('exit', (code) => reject(new Error(`example exited with ${code}; stderr: ${err}`)));
  });
}

describe('examples/echo-agent', () => {
  it('is a whole agent in under 30 lines', () => {
    const source = readFileSync(join(process.cwd(), 'examples', 'echo-agent.ts'), 'utf8');
    expect(source.trimEnd().split('\n').length).toBeLessThan(30);
    expect(existsSync(SCRIPT)).toBe(true);
  });

  it('serves requests and deregisters on SIGTERM', async () => {
    const capability = `echo_${uniqueName('ex').replace(/[^a-z0-9]/g, '')}`;
    // The stack the tests use (REACH_*_PORT), not the SDK's defaults: a second stack's test must not register on the first.
    const stack = localStack();
    const env = {
      ...process.env,
      ECHO_CAPABILITY: capability,
      AGENT_REACH_REGISTRY_URL: stack.registryUrl,
      AGENT_REACH_DISPATCHER_URL: stack.dispatcherUrl,
      AGENT_REACH_INGRESS_URL: stack.ingressUrl,
    };
    child = spawn(process.execPath, [SCRIPT], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const line = await firstLine(child, 20_000);
    const agentId = /^echo agent (\S+) serves /.exec(line)?.[1];
    expect(agentId).toBeTruthy();
    const client = testClient();
    expect((await client.agents({ capability })).map((a) => a.agent_id)).toEqual([agentId]);

    const caller = await startTestAgent();
    const reply = await caller.node.request(capability, { hello: 'world' }, { timeoutMs: 20_000 });
    expect(reply).toEqual({ echo: { hello: 'world' }, by: agentId });

    const exited = new Promise<number | null>((resolve) => child!.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : null))));
    child.kill('SIGTERM');
    await exited;
    expect((await client.agents({ capability })).filter((a) => a.status === 'ONLINE')).toEqual([]);
  });
});
