import { ReachError, errorInfo, isKnownCode, type ErrorName, RETRY_AFTER_HEADER } from '@reach/core';
import { fetchFor, type ClientTls } from './tls.js';

/**
 * JSON over HTTP for the SDK's clients. Every failure becomes a ReachError: the public error
 * body of docs/design.md §3 keeps its code and name, an unreachable service is 5002 (retryable), a
 * timeout 1001. The HTTP status and `Retry-After` go into `details`.
 */
export interface JsonResponse<T> {
  status: number;
  body: T;
  headers: Headers;
}

export interface JsonRequest {
  method?: string;
  token?: string | undefined;
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs?: number;
  /** Statuses (besides 2xx) that are answers rather than errors, e.g. 404 for a lookup. */
  accept?: number[];
  /** A private CA / client certificate for https (see tls.ts); unset: the system store. */
  tls?: ClientTls | undefined;
}

/** The ReachError a docs/design.md §3 error body (or a bare HTTP status) stands for. */
export function errorFromBody(status: number, body: unknown, retryAfter?: string | null): ReachError {
  const err = (body as { error?: { code?: unknown; name?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
  const details: Record<string, unknown> = { http_status: status };
  if (retryAfter) details.retry_after = retryAfter;
  if (err?.details && typeof err.details === 'object') Object.assign(details, err.details);
  // A code outside docs/design.md §6 is kept as the service said it, next to the nearest known code.
  if (typeof err?.code === 'number' && !isKnownCode(err.code)) details.server_code = err.code;
  if (typeof err?.name === 'string' && !(typeof err.code === 'number' && isKnownCode(err.code))) details.server_name = err.name;
  const message = typeof err?.message === 'string' ? err.message : `HTTP ${status}`;
  let name: ErrorName;
  if (typeof err?.code === 'number' && isKnownCode(err.code)) name = errorInfo(err.code).name as ErrorName;
  else if (status === 401 || status === 403) name = 'AUTH_FAILED';
  else if (status === 413) name = 'PAYLOAD_TOO_LARGE';
  else if (status === 429) name = 'RATE_LIMITED';
  else if (status === 400) name = 'INVALID_ENVELOPE';
  else if (status === 503) name = 'DEPENDENCY_UNAVAILABLE';
  else name = 'INTERNAL';
  return new ReachError(name, message, { details });
}

export async function requestJson<T = unknown>(url: string, req: JsonRequest = {}): Promise<JsonResponse<T>> {
  const headers: Record<string, string> = { accept: 'application/json', ...req.headers };
  if (req.token) headers.authorization = `Bearer ${req.token}`;
  if (req.body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetchFor(req.tls)(url, {
      method: req.method ?? 'GET',
      headers,
      body: req.body === undefined ? undefined : JSON.stringify(req.body),
      signal: AbortSignal.timeout(req.timeoutMs ?? 10_000),
    });
  } catch (err) {
    if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) {
      throw new ReachError('CONNECT_TIMEOUT', `${req.method ?? 'GET'} ${url} timed out`, { cause: err, details: { url } });
    }
    throw new ReachError('DEPENDENCY_UNAVAILABLE', `${req.method ?? 'GET'} ${url} failed: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
      details: { url },
    });
  }
  const text = await res.text();
  let body: unknown = undefined;
  if (text.length > 0) {
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  }
  if (!res.ok && !(req.accept ?? []).includes(res.status)) throw errorFromBody(res.status, body, res.headers.get(RETRY_AFTER_HEADER));
  return { status: res.status, body: body as T, headers: res.headers };
}

/** `base` + `path`, tolerating a trailing slash on the base. */
export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, '') + path;
}

/** The items of a list response, whether the service answers `[...]` or `{<key>: [...]}`. */
export function listOf<T>(body: unknown, ...keys: string[]): T[] {
  if (Array.isArray(body)) return body as T[];
  if (body && typeof body === 'object') {
    for (const k of [...keys, 'items', 'data']) {
      const v = (body as Record<string, unknown>)[k];
      if (Array.isArray(v)) return v as T[];
    }
  }
  return [];
}
