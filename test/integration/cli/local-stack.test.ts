import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureRedis, portOpen, Supervisor, waitFor } from '@reach/cli';

// The pieces `reach up` is made of: the supervisor that starts processes in order, checks
// readiness, restarts crashes and stops everything in reverse; and the dependency check that
// starts a local server when it is installed but not running.
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** A tiny TCP server process that records its start and stop in a file. */
function serverSpec(name: string, port: number, journal: string) {
  const code = `
    const fs = require('fs'); fs.appendFileSync(${JSON.stringify(journal)}, 'start ${name}\\n');
    const s = require('net').createServer(c => c.end()).listen(${port}, '127.0.0.1');
    process.on('SIGTERM', () => { fs.appendFileSync(${JSON.stringify(journal)}, 'stop ${name}\\n'); s.close(() => process.exit(0)); });`;
  return {
    name,
    cmd: process.execPath,
    args: ['-e', code],
    env: process.env,
    ready: () => portOpen('127.0.0.1', port),
    readyTimeoutMs: 10_000,
    stopTimeoutMs: 5_000,
  };
}

describe('Supervisor', () => {
  const dir = mkdtempSync(join(tmpdir(), 'reach-supervisor-'));
  const journal = join(dir, 'journal');
  const events: string[] = [];
  const supervisor = new Supervisor(dir, (msg) => events.push(msg));

  afterAll(() => supervisor.stopAll());

  it('starts processes in order once each is ready, restarts a crashed one, and stops them in reverse order', async () => {
    const [a, b] = [await freePort(), await freePort()];
    await supervisor.start(serverSpec('first', a, journal));
    await supervisor.start(serverSpec('second', b, journal));
    expect(await portOpen('127.0.0.1', a)).toBe(true);
    expect(await portOpen('127.0.0.1', b)).toBe(true);

    const crashed = supervisor.pids().find((p) => p.name === 'first')!.pid!;
    process.kill(crashed, 'SIGKILL');
    await waitFor(
      'the crashed process to come back',
      async () => {
        const now = supervisor.pids().find((p) => p.name === 'first')!.pid;
        return now !== crashed && (await portOpen('127.0.0.1', a));
      },
      15_000,
    );
    expect(events.some((e) => /first exited .*restarting/.test(e))).toBe(true);

    await supervisor.stopAll();
    const lines = readFileSync(journal, 'utf8').trim().split('\n');
    expect(lines.filter((l) => l.startsWith('stop'))).toEqual(['stop second', 'stop first']);
    expect(await portOpen('127.0.0.1', a)).toBe(false);
  });

  it('restarts a process stopped by SIGTERM at once, however often (the JVM exits 143 then: no crash loop)', async () => {
    const port = await freePort();
    const code = `
      const s = require('net').createServer(c => c.end()).listen(${port}, '127.0.0.1');
      process.on('SIGTERM', () => s.close(() => process.exit(143)));`;
    const s = new Supervisor(dir, (msg) => events.push(msg));
    await s.start({ ...serverSpec('jvm-like', port, journal), args: ['-e', code] });
    for (let i = 0; i < 3; i++) {
      const pid = s.pids().find((p) => p.name === 'jvm-like')!.pid!;
      process.kill(pid, 'SIGTERM');
      await waitFor(
        'the stopped process to come back',
        async () => s.pids().find((p) => p.name === 'jvm-like')!.pid !== pid && (await portOpen('127.0.0.1', port)),
        15_000,
      );
    }
    // A crash (any other code) within 30 s of the start backs off 1 s, 2 s, …; these did not.
    expect(events.filter((e) => e.startsWith('jvm-like exited'))).toEqual(Array(3).fill('jvm-like exited (143); restarting in 0.2s'));
    await s.stopAll();
  });

  it('fails a start with the log tail when the process dies before it is ready', async () => {
    const s = new Supervisor(dir, () => undefined);
    await expect(
      s.start({
        name: 'broken',
        cmd: process.execPath,
        args: ['-e', 'console.error("boom: missing thing"); process.exit(3)'],
        env: process.env,
        ready: async () => false,
        readyTimeoutMs: 10_000,
        stopTimeoutMs: 1000,
      }),
    ).rejects.toThrow(/broken exited with 3 before it was ready[\s\S]*boom: missing thing/);
    await s.stopAll();
  });
});

describe('ensureRedis', () => {
  let port = 0;
  afterAll(() => {
    if (port) execFileSync('redis-cli', ['-p', String(port), 'shutdown', 'nosave'], { stdio: 'ignore' });
  });

  it('reports a running server as running and starts an installed one that is not running', async () => {
    expect(await ensureRedis('127.0.0.1', 6379)).toBe('running');
    port = await freePort();
    expect(await ensureRedis('127.0.0.1', port)).toBe('started');
    expect(
      execFileSync('redis-cli', ['-p', String(port), 'ping'])
        .toString()
        .trim(),
    ).toBe('PONG');
  });
});
