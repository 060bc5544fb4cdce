import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { bearer, ConfigError, ReachError, sameSecret } from '@reach/core';

/**
 * TLS of a service's HTTP port (and so of the dispatcher's WebSocket, which upgrades on it):
 * REACH_TLS_CERT + REACH_TLS_KEY turn it into HTTPS/WSS only. REACH_TLS_CLIENT_CA adds mutual
 * TLS for admin calls: the server asks every client for a certificate but does not insist
 * (agents connect with their token alone); a request that presents the admin token must come
 * over a connection whose certificate this CA signed. A leaked admin token is then useless
 * without the operator's key too.
 */
export interface ServerTls {
  readonly cert: string;
  readonly key: string;
  /** PEM of the CA that signs admin client certificates (mutual TLS); unset: no client certificates. */
  readonly clientCa?: string;
}

export interface ServerTlsConfig {
  tlsCert: string;
  tlsKey: string;
  tlsClientCa: string;
}

type ReadFile = (path: string) => string;

function readPem(env: string, path: string, readFile: ReadFile): string {
  try {
    return readFile(path);
  } catch (err) {
    throw new ConfigError(`${env}=${path} cannot be read: ${(err as Error).message}`);
  }
}

/** The server TLS of a config, undefined when off; ConfigError naming the variable when half set. */
export function serverTlsFromConfig(c: ServerTlsConfig, readFile: ReadFile = (p) => readFileSync(p, 'utf8')): ServerTls | undefined {
  if (!c.tlsCert && !c.tlsKey) {
    if (c.tlsClientCa) throw new ConfigError('REACH_TLS_CLIENT_CA needs REACH_TLS_CERT and REACH_TLS_KEY (mutual TLS runs on a TLS port)');
    return undefined;
  }
  if (!c.tlsCert || !c.tlsKey) throw new ConfigError('REACH_TLS_CERT and REACH_TLS_KEY must be set together');
  const tls: ServerTls = {
    cert: readPem('REACH_TLS_CERT', c.tlsCert, readFile),
    key: readPem('REACH_TLS_KEY', c.tlsKey, readFile),
    ...(c.tlsClientCa ? { clientCa: readPem('REACH_TLS_CLIENT_CA', c.tlsClientCa, readFile) } : {}),
  };
  return tls;
}

/** True when the request came over TLS with a client certificate the server's client CA signed. */
export function hasVerifiedClientCert(req: IncomingMessage): boolean {
  const socket = req.socket as Partial<TLSSocket>;
  return socket.encrypted === true && socket.authorized === true;
}

/**
 * The mutual-TLS rule for admin calls: a request bearing the admin token without a verified
 * client certificate is refused (401, 1003). Other requests pass untouched; whether they may do
 * what they ask is the route's business.
 */
export function checkAdminClientCert(req: IncomingMessage, adminToken: string | undefined): void {
  if (!adminToken) return;
  if (!sameSecret(bearer(req.headers.authorization), adminToken)) return;
  if (hasVerifiedClientCert(req)) return;
  throw new ReachError('AUTH_FAILED', 'the admin token needs a client certificate signed by REACH_TLS_CLIENT_CA (mutual TLS)', {
    details: { reason: 'client_certificate_required' },
  });
}
