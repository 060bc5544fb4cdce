import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  MIGRATIONS_DIR,
  isUniqueViolation,
  loadMigrations,
  migrationChecksum,
  expiredPartitions,
  partitionName,
  pgErrorCode,
  retentionCheckMs,
  retentionCutoff,
  quoteIdent,
  reconnectDelay,
  redactUrl,
} from '../../../packages/store/dist/index.js';

const dirs: string[] = [];
async function dirWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'reach-mig-unit-'));
  dirs.push(dir);
  for (const [name, body] of Object.entries(files)) await writeFile(join(dir, name), body);
  return dir;
}
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

describe('loadMigrations', () => {
  it('finds the package migrations next to the built module, in version order', async () => {
    const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
    const migrations = await loadMigrations();
    expect(migrations.map((m) => `${m.name}.sql`)).toEqual(files);
    expect(migrations[0]?.version).toBe(1);
    const versions = migrations.map((m) => m.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
  });

  it('orders by number, not by file listing, and ignores non-sql files', async () => {
    const dir = await dirWith({ '010_b.sql': 'SELECT 10;', '002_a.sql': 'SELECT 2;', 'README.md': 'x' });
    const migrations = await loadMigrations(dir);
    expect(migrations.map((m) => [m.version, m.name])).toEqual([
      [2, '002_a'],
      [10, '010_b'],
    ]);
  });

  it('rejects a misnamed sql file and a reused version', async () => {
    await expect(loadMigrations(await dirWith({ '1_short.sql': '' }))).rejects.toThrow(/NNN_description/);
    await expect(loadMigrations(await dirWith({ '001_Upper.sql': '' }))).rejects.toThrow(/NNN_description/);
    await expect(loadMigrations(await dirWith({ '001_a.sql': '', '001_b.sql': '' }))).rejects.toThrow(/share version 1/);
  });
});

describe('migrationChecksum', () => {
  it('is stable across line endings but sees any other change', () => {
    const lf = 'CREATE TABLE t (a int);\nSELECT 1;\n';
    expect(migrationChecksum(lf)).toBe(migrationChecksum(lf.replace(/\n/g, '\r\n')));
    expect(migrationChecksum(lf)).not.toBe(migrationChecksum(`${lf} `));
    expect(migrationChecksum(lf)).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('partitionName', () => {
  it('names the UTC day for daily partitions', () => {
    expect(partitionName('messages', new Date('2025-07-15T12:00:00Z'))).toBe('messages_p20250715');
    // 23:30 on Dec 31 in UTC-5 is already January 1st in UTC
    expect(partitionName('message_events', new Date('2025-12-31T23:30:00-05:00'))).toBe('message_events_p20260101');
  });

  it('names the start of the interval for shorter partitions', () => {
    expect(partitionName('messages', new Date('2025-07-15T13:47:09Z'), 600)).toBe('messages_p20250715_134000');
    expect(partitionName('messages', new Date('2025-07-15T13:47:09Z'), 10)).toBe('messages_p20250715_134700');
    expect(partitionName('messages', new Date('2025-07-15T13:47:09Z'), 2 * 86400)).toMatch(/^messages_p202507(14|15)$/);
  });
});

describe('retention helpers', () => {
  const part = (from: string, to: string) => ({ table: 'messages' as const, partition: from, from: new Date(from), to: new Date(to) });
  it('expires a partition only when its upper bound is at or before the cutoff', () => {
    const parts = [part('2025-07-13T00:00:00Z', '2025-07-14T00:00:00Z'), part('2025-07-14T00:00:00Z', '2025-07-15T00:00:00Z')];
    expect(expiredPartitions(parts, new Date('2025-07-14T00:00:00Z')).map((p) => p.partition)).toEqual(['2025-07-13T00:00:00Z']);
    expect(expiredPartitions(parts, new Date('2025-07-14T23:59:59Z')).map((p) => p.partition)).toEqual(['2025-07-13T00:00:00Z']);
    expect(expiredPartitions(parts, new Date('2025-07-13T23:59:59Z'))).toEqual([]);
  });

  it('computes the cutoff and how often to look', () => {
    expect(retentionCutoff(60, 1_000_000).getTime()).toBe(940_000);
    expect(retentionCheckMs(7 * 86400)).toBe(3_600_000);
    expect(retentionCheckMs(20)).toBe(5_000);
    expect(retentionCheckMs(1)).toBe(1_000);
  });
});

describe('reconnectDelay', () => {
  it('doubles from 100 ms and stops at the cap', () => {
    expect([1, 2, 3, 4].map((t) => reconnectDelay(t, 5000))).toEqual([100, 200, 400, 800]);
    expect(reconnectDelay(10, 5000)).toBe(5000);
    expect(reconnectDelay(10_000, 5000)).toBe(5000);
  });
});

describe('pg helpers', () => {
  it('reads SQLSTATE codes only from error-like objects', () => {
    expect(pgErrorCode({ code: '23505' })).toBe('23505');
    expect(isUniqueViolation(Object.assign(new Error('dup'), { code: '23505' }))).toBe(true);
    expect(pgErrorCode({ code: 'ECONNREFUSED' })).toBeUndefined();
    expect(pgErrorCode(null)).toBeUndefined();
    expect(isUniqueViolation(new Error('x'))).toBe(false);
  });

  it('quotes identifiers and redacts passwords', () => {
    expect(quoteIdent('reach_test-1')).toBe('"reach_test-1"');
    expect(quoteIdent('a"b')).toBe('"a""b"');
    expect(redactUrl('postgres://u:secret@h:5432/db')).toBe('postgres://u:***@h:5432/db');
    expect(redactUrl('postgres://u@h/db')).toBe('postgres://u@h/db');
  });
});
