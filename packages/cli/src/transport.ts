import { loadConfig } from '@reach/core';
import { tlsFromFiles, type ClientTls } from '@reach/sdk';

/**
 * How `reach` talks to a stack that serves TLS (docs/transport-security.md): https/wss when
 * REACH_TLS_CERT is set (the same variable that turns TLS on in the services), trusting
 * REACH_CA_FILE and presenting REACH_TLS_CLIENT_CERT / REACH_TLS_CLIENT_KEY for mutual TLS.
 */
export function serviceScheme(env: NodeJS.ProcessEnv): 'https' | 'http' {
  return loadConfig(['tlsCert'], env).tlsCert ? 'https' : 'http';
}

export function cliTls(env: NodeJS.ProcessEnv): ClientTls | undefined {
  const cfg = loadConfig(['caFile', 'tlsClientCert', 'tlsClientKey'], env);
  return tlsFromFiles(
    { caFile: cfg.caFile, certFile: cfg.tlsClientCert, keyFile: cfg.tlsClientKey },
    { ca: 'REACH_CA_FILE', cert: 'REACH_TLS_CLIENT_CERT', key: 'REACH_TLS_CLIENT_KEY' },
  );
}
