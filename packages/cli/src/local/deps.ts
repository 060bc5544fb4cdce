import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { silentLogger } from '@reach/core';
import { createRedis } from '@reach/store';
import { portOpen, waitFor } from './net.js';

/**
 * PostgreSQL and Redis are the machine's own servers (docs/design.md §7): used where they run, started
 * when installed but stopped, and reported clearly when absent.
 */
function which(bin: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${bin}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function ensurePostgres(host: string, port: number): Promise<'running' | 'started'> {
  if (await portOpen(host, port)) return 'running';
  if (existsSync('/etc/postgresql') && which('pg_ctlcluster')) {
    for (const version of readdirSync('/etc/postgresql')) {
      try {
        execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', version, 'main', 'start'], { stdio: 'ignore' });
      } catch {
        // fall through to the readiness wait, which reports the failure
      }
    }
    await waitFor(`PostgreSQL on ${host}:${port}`, () => portOpen(host, port), 20_000);
    return 'started';
  }
  throw new Error(
    `PostgreSQL is not reachable on ${host}:${port} and is not installed here (no pg_ctlcluster). Install PostgreSQL (apt-get install postgresql) or set REACH_DATABASE_URL to a running server.`,
  );
}

export async function ensureRedis(host: string, port: number): Promise<'running' | 'started'> {
  if (await portOpen(host, port)) return 'running';
  if (which('redis-server')) {
    execFileSync('redis-server', ['--daemonize', 'yes', '--bind', host, '--port', String(port), '--appendonly', 'yes', '--dir', '/tmp'], { stdio: 'ignore' });
    await waitFor(`Redis on ${host}:${port}`, () => portOpen(host, port), 10_000);
    return 'started';
  }
  throw new Error(
    `Redis is not reachable on ${host}:${port} and redis-server is not installed. Install Redis (apt-get install redis-server) or set REACH_REDIS_URL to a running server.`,
  );
}

/**
 * Redis holds the in-flight deliveries, their ack deadlines and the acks not yet written to
 * Kafka (the ack journal). A server that keeps no append-only file loses all of it when it is
 * killed: acked tasks then run again and deliveries wait for the stuck sweep. So the local
 * stack turns the append-only file on (at run time: CONFIG SET; every write reaches the file
 * before its reply, so a kill -9 of Redis loses nothing; fsync each second only matters to a
 * machine crash). Measured with `pnpm chaos --faults kill-redis`: nothing lost or run twice.
 * Resolves to what it found or did; 'unknown' where CONFIG is not allowed (a managed Redis).
 */
export async function ensureRedisAppendOnly(url: string): Promise<'on' | 'turned on' | 'unknown'> {
  const redis = createRedis(url, silentLogger, { enableOfflineQueue: true, maxRetriesPerRequest: 1, connectionName: 'reach-up' });
  try {
    const [, value] = (await redis.config('GET', 'appendonly')) as string[];
    if (value === 'yes') return 'on';
    await redis.config('SET', 'appendonly', 'yes');
    return 'turned on';
  } catch {
    return 'unknown';
  } finally {
    redis.disconnect();
  }
}
