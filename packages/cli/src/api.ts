import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '@reach/core';
import { ReachClient, type ClientTls } from '@reach/sdk';
import { reachHome } from './paths.js';
import { cliTls, serviceScheme } from './transport.js';

/**
 * How the operator commands (agents, send, status, trace) reach the running stack: the same
 * REACH_* options the services read (host and ports), and the admin token from
 * REACH_ADMIN_TOKEN or the one `reach up` generated into <REACH_HOME>/admin-token.
 */
export interface ApiEndpoints {
  ingressUrl: string;
  registryUrl: string;
  adminToken: string | undefined;
  /** REACH_CA_FILE / REACH_TLS_CLIENT_* for a stack serving TLS. */
  tls: ClientTls | undefined;
}

export function apiEndpoints(env: NodeJS.ProcessEnv = process.env): ApiEndpoints {
  const cfg = loadConfig(['httpHost', 'ingressPort', 'registryPort', 'adminToken'], env);
  // Services bound to every interface are reached on loopback from this machine.
  const host = cfg.httpHost === '0.0.0.0' || cfg.httpHost === '::' ? '127.0.0.1' : cfg.httpHost;
  let adminToken = cfg.adminToken;
  if (!adminToken) {
    const file = join(reachHome(env), 'admin-token');
    if (existsSync(file)) adminToken = readFileSync(file, 'utf8').trim() || undefined;
  }
  const scheme = serviceScheme(env);
  return { ingressUrl: `${scheme}://${host}:${cfg.ingressPort}`, registryUrl: `${scheme}://${host}:${cfg.registryPort}`, adminToken, tls: cliTls(env) };
}

export function apiClient(env: NodeJS.ProcessEnv = process.env): ReachClient {
  const api = apiEndpoints(env);
  return new ReachClient({ ingressUrl: api.ingressUrl, registryUrl: api.registryUrl, token: api.adminToken, ...(api.tls ? { tls: api.tls } : {}) });
}

interface CodedError {
  code: number;
  codeName: string;
  message: string;
  details?: Record<string, unknown>;
}

function isCoded(err: unknown): err is CodedError {
  return typeof err === 'object' && err !== null && typeof (err as CodedError).code === 'number' && typeof (err as CodedError).codeName === 'string';
}

/**
 * Prints a failed API call — the error code and name on stderr, the docs/design.md §3 error body on
 * stdout with --json — and returns the exit status (1). Anything else is a bug and is rethrown.
 */
export function reportFailure(err: unknown, json: boolean): number {
  if (!isCoded(err)) throw err;
  const http = err.details?.http_status;
  // Show what the service answered, even a code outside the table.
  const code = typeof err.details?.server_code === 'number' ? err.details.server_code : err.code;
  const name = typeof err.details?.server_name === 'string' ? err.details.server_name : err.codeName;
  process.stderr.write(`✘ ${code} ${name}: ${err.message}${typeof http === 'number' ? ` (HTTP ${http})` : ''}\n`);
  if (json) process.stdout.write(JSON.stringify({ error: { code, name, message: err.message } }) + '\n');
  return 1;
}

/** Usage errors exit with 2, like an unknown command. */
export function usageError(message: string): number {
  process.stderr.write(`✘ ${message}\n`);
  return 2;
}

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}
