import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connectionFromEnv, fetchFor, tlsFromFiles, wsTlsOptions } from '@reach/sdk';

const dir = mkdtempSync(join(tmpdir(), 'reach-sdk-tls-'));
const ca = join(dir, 'ca.pem');
writeFileSync(ca, 'CA-PEM');
writeFileSync(join(dir, 'c.pem'), 'CERT-PEM');
writeFileSync(join(dir, 'c.key'), 'KEY-PEM');
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const names = { ca: 'X_CA', cert: 'X_CERT', key: 'X_KEY' };

describe('SDK TLS settings', () => {
  it('AGENT_REACH_CA_FILE gives the connection settings a CA; without it nothing changes', () => {
    expect(connectionFromEnv({ AGENT_REACH_CA_FILE: ca }).tls).toEqual({ ca: 'CA-PEM' });
    expect(connectionFromEnv({}).tls).toBeUndefined();
  });

  it('reads a client certificate pair, refuses half of one, names an unreadable file', () => {
    expect(tlsFromFiles({ certFile: join(dir, 'c.pem'), keyFile: join(dir, 'c.key') }, names)).toEqual({ cert: 'CERT-PEM', key: 'KEY-PEM' });
    expect(() => tlsFromFiles({ certFile: join(dir, 'c.pem') }, names)).toThrow(/X_CERT and X_KEY must be set together/);
    expect(() => tlsFromFiles({ caFile: join(dir, 'nope.pem') }, names)).toThrow(/X_CA=.*nope.pem cannot be read/);
  });

  it('no TLS settings: the global fetch and no ws options; with them: a fetch of their own, kept per settings object', () => {
    expect(fetchFor(undefined)).toBe(fetch);
    expect(wsTlsOptions(undefined)).toEqual({});
    const tls = { ca: 'CA-PEM' };
    expect(fetchFor(tls)).not.toBe(fetch);
    expect(fetchFor(tls)).toBe(fetchFor(tls));
    expect(wsTlsOptions({ ca: 'A', cert: 'B', key: 'C' })).toEqual({ ca: 'A', cert: 'B', key: 'C' });
  });
});
