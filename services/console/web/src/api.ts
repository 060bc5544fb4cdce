/**
 * The page's calls to its own origin: `/api/<service>/…` (forwarded by the console server to
 * that service's public API) and the console's own `/api/overview`, `/api/qos-history`. The
 * admin token an operator pastes stays in this tab's sessionStorage and goes out as a Bearer
 * header; the server never stores it.
 */
const TOKEN_KEY = 'reach.console.adminToken';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: number | string,
    readonly codeName: string,
    message: string,
  ) {
    super(message);
  }
}

/** Set when the services refused the pasted token (it was then forgotten); cleared by the next paste. */
let tokenRefused = false;

export function wasTokenRefused(): boolean {
  return tokenRefused;
}

export function getToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token: string | null): void {
  if (token) tokenRefused = false;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

async function call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const token = getToken();
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, { method, headers, cache: 'no-store', ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  } catch (err) {
    throw new ApiError(0, 0, 'UNREACHABLE', `the console did not answer: ${(err as Error).message}`);
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const e = (json as { error?: { code?: number; name?: string; message?: string } } | undefined)?.error;
    // A token the services refuse (401) is forgotten at once: polling with it every 2 s would
    // spend this address's failed-authentication budget (docs/access-control.md) and lock it out.
    if (res.status === 401 && token) {
      setToken(null);
      tokenRefused = true;
    }
    throw new ApiError(res.status, e?.code ?? res.status, e?.name ?? `HTTP ${res.status}`, e?.message ?? (text.slice(0, 200) || res.statusText));
  }
  return json as T;
}

export const api = {
  get: <T>(path: string) => call<T>('GET', path),
  post: <T>(path: string, body?: unknown) => call<T>('POST', path, body),
};

export const enc = encodeURIComponent;
