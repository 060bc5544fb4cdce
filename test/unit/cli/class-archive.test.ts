import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { classArchiveArgs, classArchivePath, ensureClassArchive, type TrainingRun } from '@reach/cli';

// The broker's class-data-sharing archive: named after its jars and the JVM, used only when it
// exists, made once, and never a reason for `reach up` to fail.
const dir = mkdtempSync(join(tmpdir(), 'reach-unit-cds-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const libs = join(dir, '4.1.2', 'libs');
mkdirSync(libs, { recursive: true });

const failingRun = (calls: string[]): TrainingRun => ({
  javaBase: [],
  config: () => 'node.id=1\n',
  format: async () => {
    calls.push('format');
    throw new Error('StorageTool exited with 1');
  },
  logFile: join(dir, 'training.log'),
});

describe('broker class archive', () => {
  it('lives beside the jars, under a name that changes with them', () => {
    const a = classArchivePath(libs, 'pom-hash-a');
    expect(dirname(a)).toBe(dirname(libs));
    expect(a).toMatch(/broker-classes-[0-9a-f]{12}\.jsa$/);
    expect(classArchivePath(libs, 'pom-hash-a')).toBe(a);
    expect(classArchivePath(libs, 'pom-hash-b')).not.toBe(a);
  });

  it('is passed to the JVM only when it exists', () => {
    const archive = join(dir, 'broker-classes-test.jsa');
    expect(classArchiveArgs(archive)).toEqual([]);
    writeFileSync(archive, 'x');
    expect(classArchiveArgs(archive)).toEqual([`-XX:SharedArchiveFile=${archive}`, '-Xshare:auto']);
  });

  it('is not made again when it exists', async () => {
    const archive = join(dir, 'existing.jsa');
    writeFileSync(archive, 'x');
    const calls: string[] = [];
    expect(await ensureClassArchive(archive, failingRun(calls))).toBeUndefined();
    expect(calls).toEqual([]);
  });

  it('reports a failed training run as a message, leaving no archive and no partial file', async () => {
    const archive = join(dir, 'out', 'never.jsa');
    mkdirSync(dirname(archive), { recursive: true });
    const calls: string[] = [];
    expect(await ensureClassArchive(archive, failingRun(calls))).toBe('StorageTool exited with 1');
    expect(calls).toEqual(['format']);
    expect(existsSync(archive)).toBe(false);
    expect(readdirSync(dirname(archive))).toEqual([]);
  });
});
