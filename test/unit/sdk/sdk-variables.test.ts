import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SDK_VARIABLES, connectionFromEnv } from '@reach/sdk';

// docs/configuration.md's SDK config reference is generated from SDK_VARIABLES (scripts/gen-docs.mjs,
// checked by test/unit/docs.test.ts); this fails when either SDK reads an AGENT_REACH_* name
// the list does not have, or the list names one no SDK reads.

function sources(dir: string, suffix: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === '__pycache__' || name === 'dist') return [];
    return statSync(path).isDirectory() ? sources(path, suffix) : name.endsWith(suffix) ? [path] : [];
  });
}

const read = (files: string[]) => new Set(files.flatMap((f) => [...readFileSync(f, 'utf8').matchAll(/\bAGENT_REACH_[A-Z_]+\b/g)].map((m) => m[0])));

describe('the SDKs’ AGENT_REACH_* variables', () => {
  const ts = read(sources('packages/sdk/src', '.ts'));
  const py = read(sources('sdks/python/src/agent_reach', '.py'));
  const listed = new Map(SDK_VARIABLES.map((v) => [v.env, v.sdks]));

  it('lists every variable either SDK reads, with the SDKs that read it', () => {
    expect([...new Set([...ts, ...py])].filter((v) => !listed.has(v)).sort()).toEqual([]);
    for (const [env, sdks] of listed) {
      expect(py.has(env), `${env} in the Python SDK`).toBe(true);
      if (sdks === 'both') expect(ts.has(env), `${env} in the TypeScript SDK`).toBe(true);
    }
  });

  it('connectionFromEnv reads the client certificate pair (mutual TLS), refusing one without the other', () => {
    expect(() => connectionFromEnv({ AGENT_REACH_CLIENT_CERT: '/nonexistent/cert.pem' })).toThrow(
      /AGENT_REACH_CLIENT_CERT and AGENT_REACH_CLIENT_KEY must be set together/,
    );
    expect(connectionFromEnv({ AGENT_REACH_MODE: 'direct' }).mode).toBe('direct');
  });
});
