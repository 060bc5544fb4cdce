/**
 * Session stickiness (R-B6): the same session goes to the same agent while that agent
 * stays available. Bindings live in Redis (`reach:sticky:<capability>:<session>`, TTL
 * REACH_STICKY_TTL_S, refreshed by traffic) behind this interface; when Redis cannot answer,
 * routing must not stop (R-D12), so the session is hashed over the candidates instead —
 * the same session and candidates give the same agent on every router instance.
 */
export interface StickyStore {
  /** The bound agent, or null. Throws when the store cannot answer (→ hash fallback). */
  get(key: string): Promise<string | null>;
  /** Binds (or re-binds, refreshing the TTL). Failures are the caller's to ignore. */
  set(key: string, agentId: string, ttlS: number): Promise<void>;
}

export function stickyKey(capability: string, session: string): string {
  return `reach:sticky:${capability}:${session}`;
}

/** 32-bit FNV-1a over UTF-16 code units, finished with a murmur3 avalanche: cheap and well spread. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Rendezvous (highest-random-weight) hashing of a session over agent ids: deterministic, and
 * when an agent leaves only the sessions that were on it move.
 */
export function rendezvousPick(session: string, agentIds: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestW = -1;
  for (const id of agentIds) {
    const w = hash32(`${session}\u0000${id}`);
    if (w > bestW || (w === bestW && best !== undefined && id < best)) {
      best = id;
      bestW = w;
    }
  }
  return best;
}

/** An in-memory store, for tests and single-process tools. */
export class MemoryStickyStore implements StickyStore {
  readonly bindings = new Map<string, { agentId: string; ttlS: number }>();

  get(key: string): Promise<string | null> {
    return Promise.resolve(this.bindings.get(key)?.agentId ?? null);
  }

  set(key: string, agentId: string, ttlS: number): Promise<void> {
    this.bindings.set(key, { agentId, ttlS });
    return Promise.resolve();
  }
}
