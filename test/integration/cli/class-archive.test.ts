import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { brokerClassArchive, defaultHome, libsDir, paths } from '@reach/cli';

// The archive `reach up` made with its training run (a real broker started and stopped) is one
// the JVM maps: with -Xshare:on a JVM refuses to start when it cannot use the archive.
describe('broker class archive made by reach up', () => {
  const p = paths(defaultHome(), { create: false });

  it('exists beside the broker jars and maps with the broker class path', () => {
    const archive = brokerClassArchive(p);
    expect(existsSync(archive), archive).toBe(true);
    const run = spawnSync('java', [`-XX:SharedArchiveFile=${archive}`, '-Xshare:on', '-Xlog:cds=info', '-cp', `${libsDir(p)}/*`, '-version'], {
      encoding: 'utf8',
    });
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout + run.stderr).toMatch(/Mapped dynamic region/);
  });
});
