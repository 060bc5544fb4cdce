import { loadConfig, ERROR } from '@reach/core';
import { fetchFor } from '@reach/sdk';
import { apiEndpoints } from './api.js';
import { serviceScheme } from './transport.js';

/**
 * The admin HTTP APIs the operator commands call (dead letters, quotas, rules): one way to
 * find the service, send the admin token, and turn an error body (docs/design.md §3) into an exit.
 */
export type AdminService = 'ingress' | 'registry' | 'deadLetter' | 'router';

const PORTS = { ingress: 'ingressPort', registry: 'registryPort', deadLetter: 'deadLetterPort', router: 'routerPort' } as const;
const NAMES: Record<AdminService, string> = { ingress: 'ingress', registry: 'registry', deadLetter: 'dead-letter service', router: 'router' };

interface ApiErrorBody {
  error?: { code?: number; name?: string; message?: string };
}

export class AdminApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: ApiErrorBody,
  ) {
    super(body.error?.message ?? `HTTP ${status}`);
  }
}

function serviceUrl(service: AdminService, env: NodeJS.ProcessEnv): string {
  const port = PORTS[service];
  const cfg = loadConfig(['httpHost', port], env);
  // Services bound to every interface are reached on loopback from this machine.
  const host = cfg.httpHost === '0.0.0.0' || cfg.httpHost === '::' ? '127.0.0.1' : cfg.httpHost;
  return `${serviceScheme(env)}://${host}:${cfg[port]}`;
}

/** Calls an admin endpoint with the admin token; throws AdminApiError with the service's error body. */
export async function adminCall<T>(
  service: AdminService,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  env: NodeJS.ProcessEnv = process.env,
): Promise<T> {
  const { adminToken, tls } = apiEndpoints(env);
  if (!adminToken)
    throw new AdminApiError(401, { error: { code: ERROR.AUTH_FAILED, name: 'AUTH_FAILED', message: 'no admin token: set REACH_ADMIN_TOKEN or run reach up' } });
  let res: Response;
  try {
    res = await fetchFor(tls)(`${serviceUrl(service, env)}${path}`, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch (err) {
    throw new AdminApiError(503, {
      error: { code: ERROR.DEPENDENCY_UNAVAILABLE, name: 'DEPENDENCY_UNAVAILABLE', message: `${NAMES[service]} unreachable: ${(err as Error).message}` },
    });
  }
  const text = await res.text();
  const parsed = text ? (JSON.parse(text) as unknown) : undefined;
  if (!res.ok) throw new AdminApiError(res.status, (parsed ?? {}) as ApiErrorBody);
  return parsed as T;
}

/** Prints a failed admin call (code and name on stderr, the error body with --json); exit status 1. */
export function adminFailure(err: unknown, json: boolean): number {
  if (!(err instanceof AdminApiError)) throw err;
  const e = err.body.error ?? {};
  process.stderr.write(`✘ ${e.code ?? err.status} ${e.name ?? 'ERROR'}: ${e.message ?? err.message} (HTTP ${err.status})\n`);
  if (json) process.stdout.write(JSON.stringify({ error: e }) + '\n');
  return 1;
}
