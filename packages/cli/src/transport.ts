import { loadConfig } from '@reach/core';
import { stackClientTls, type ClientTls } from '@reach/sdk';

/**
 * How `reach` talks to a stack that serves TLS (docs/transport-security.md): https/wss when
 * REACH_TLS_CERT is set (the same variable that turns TLS on in the services), trusting
 * REACH_CA_FILE and presenting REACH_TLS_CLIENT_CERT / REACH_TLS_CLIENT_KEY for mutual TLS.
 */
export function serviceScheme(env: NodeJS.ProcessEnv): 'https' | 'http' {
  return loadConfig(['tlsCert'], env).tlsCert ? 'https' : 'http';
}

export function cliTls(env: NodeJS.ProcessEnv): ClientTls | undefined {
  return stackClientTls(loadConfig(['caFile', 'tlsClientCert', 'tlsClientKey'], env));
}
