import type { FetchFn } from '@reach/sdk';
import { UPSTREAMS, type UpstreamName } from './upstreams.js';

export interface ServiceHealth {
  service: UpstreamName;
  url: string;
  /** ready: /readyz said 200; starting: it answered 503; down: no answer. */
  state: 'ready' | 'starting' | 'down';
  /** What a not-ready service waits for (its /readyz body), or why it did not answer. */
  detail?: string;
}

const TIMEOUT_MS = 1500;

/** Asks every service's /readyz, in parallel; never throws. */
export async function checkServices(upstreams: Readonly<Record<UpstreamName, string>>, fetchUpstream: FetchFn): Promise<ServiceHealth[]> {
  return Promise.all(
    UPSTREAMS.map(async (service): Promise<ServiceHealth> => {
      const url = upstreams[service];
      try {
        const res = await fetchUpstream(`${url}/readyz`, { signal: AbortSignal.timeout(TIMEOUT_MS) });
        const body = (await res.json().catch(() => ({}))) as { waiting_for?: string[]; stopping?: boolean };
        if (res.ok) return { service, url, state: 'ready' };
        const detail = body.stopping ? 'stopping' : body.waiting_for?.length ? `waiting for ${body.waiting_for.join(', ')}` : `HTTP ${res.status}`;
        return { service, url, state: 'starting', detail };
      } catch (err) {
        return { service, url, state: 'down', detail: (err as Error).message };
      }
    }),
  );
}
