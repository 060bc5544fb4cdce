import { fetchFor, type ClientTls } from '@reach/sdk';
import { connect } from 'node:net';

/** True when something accepts TCP connections on host:port. */
export function portOpen(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    const finish = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => finish(false));
    sock.once('connect', () => finish(true));
    sock.once('error', () => finish(false));
  });
}

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, intervalMs = 250): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${Math.round(timeoutMs / 1000)}s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** True when `url` answers 2xx within a second; `tls` for an https stack with a private CA. */
export async function httpOk(url: string, tls?: ClientTls): Promise<boolean> {
  try {
    const res = await fetchFor(tls)(url, { signal: AbortSignal.timeout(1000) });
    return res.ok;
  } catch {
    return false;
  }
}
