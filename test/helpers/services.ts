import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { adminToken, tokenSecret, uniq } from './env.js';

/** An extra instance of a service, started by a test next to the running stack. */
export interface SpawnedService {
  readonly child: ChildProcess;
  /** Resolves with the HTTP port it listens on (rejects if it exits before listening). */
  readonly port: Promise<number>;
  /** Everything it wrote to stdout and stderr so far. */
  output(): string;
  /** SIGTERM, and waits for the exit (at once if it already exited). */
  stop(): Promise<number | null>;
}

export function portVar(service: string): string {
  return `REACH_${service.toUpperCase().replace(/-/g, '_')}_PORT`;
}

/**
 * Starts `services/<service>/dist/main.js` with what `reach up` gives every service (token
 * secret, admin token), its own instance id and port 0, plus `env`; the port is read from its
 * "http listening" log line.
 */
export function spawnService(service: string, env: Record<string, string> = {}): SpawnedService {
  const child = spawn(process.execPath, [join('services', service, 'dist', 'main.js')], {
    env: {
      ...process.env,
      REACH_TOKEN_SECRET: tokenSecret(),
      REACH_ADMIN_TOKEN: adminToken(),
      REACH_INSTANCE_ID: uniq(`${service}-it`),
      [portVar(service)]: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const port = new Promise<number>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /"port":(\d+),"msg":"http listening"/.exec(out);
      if (m) resolve(Number(m[1]));
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${service} exited with ${code} before listening:\n${out}`)));
  });
  port.catch(() => undefined);
  return {
    child,
    port,
    output: () => out,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      return code;
    },
  };
}

/** Polls GET /readyz until 200. */
export async function waitReady(base: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(`${base}/readyz`).catch(() => undefined);
    if (res?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`${base} not ready after ${timeoutMs} ms (last status ${res?.status})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
