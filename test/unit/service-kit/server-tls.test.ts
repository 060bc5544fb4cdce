import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { checkAdminClientCert, serverTlsFromConfig } from '@reach/service-kit';

const files: Record<string, string> = { '/tls/cert.pem': 'CERT', '/tls/key.pem': 'KEY', '/tls/clients.pem': 'CLIENT-CA' };
const read = (p: string) => {
  const v = files[p];
  if (v === undefined) throw new Error('ENOENT');
  return v;
};
const off = { tlsCert: '', tlsKey: '', tlsClientCa: '' };

describe('serverTlsFromConfig (REACH_TLS_*)', () => {
  it('off unless cert and key are given', () => {
    expect(serverTlsFromConfig(off, read)).toBeUndefined();
  });

  it('reads cert, key and the client CA', () => {
    expect(serverTlsFromConfig({ tlsCert: '/tls/cert.pem', tlsKey: '/tls/key.pem', tlsClientCa: '' }, read)).toEqual({ cert: 'CERT', key: 'KEY' });
    expect(serverTlsFromConfig({ tlsCert: '/tls/cert.pem', tlsKey: '/tls/key.pem', tlsClientCa: '/tls/clients.pem' }, read)).toEqual({
      cert: 'CERT',
      key: 'KEY',
      clientCa: 'CLIENT-CA',
    });
  });

  it.each([
    [{ ...off, tlsCert: '/tls/cert.pem' }, /must be set together/],
    [{ ...off, tlsClientCa: '/tls/clients.pem' }, /REACH_TLS_CLIENT_CA needs REACH_TLS_CERT/],
    [{ tlsCert: '/tls/cert.pem', tlsKey: '/tls/nope.pem', tlsClientCa: '' }, /REACH_TLS_KEY=\/tls\/nope.pem cannot be read/],
  ])('names the variable of a broken setting: %j', (cfg, why) => {
    expect(() => serverTlsFromConfig(cfg, read)).toThrow(why);
  });
});

describe('checkAdminClientCert (mutual TLS for admin calls)', () => {
  const ADMIN = 'admin-token-0123456789abcdef';
  const req = (authorization: string | undefined, socket: Record<string, unknown>) => ({ headers: { authorization }, socket }) as unknown as IncomingMessage;

  it('the admin token over a verified client certificate passes', () => {
    expect(() => checkAdminClientCert(req(`Bearer ${ADMIN}`, { encrypted: true, authorized: true }), ADMIN)).not.toThrow();
  });

  it('the admin token without a certificate (or with one the CA did not sign) is refused with 1003', () => {
    for (const socket of [{ encrypted: true, authorized: false }, { encrypted: true }, {}]) {
      expect(() => checkAdminClientCert(req(`Bearer ${ADMIN}`, socket), ADMIN)).toThrow(
        expect.objectContaining({ code: 1003, message: expect.stringMatching(/client certificate/) }),
      );
    }
  });

  it('agents (any other token) and mutual TLS off are not its business', () => {
    expect(() => checkAdminClientCert(req('Bearer rt1.x.y', {}), ADMIN)).not.toThrow();
    expect(() => checkAdminClientCert(req(undefined, {}), ADMIN)).not.toThrow();
    expect(() => checkAdminClientCert(req(`Bearer ${ADMIN}`, {}), undefined)).not.toThrow();
  });
});
