import { CONTEXT_HEADER_PREFIX } from '@reach/core';
/**
 * Session context fragments (R-G3). A delegated task carries pieces of its caller's
 * context in envelope headers named `reach-context-<name>` (values are strings; JSON is the
 * convention for structured fragments). The handler reads them from `ctx.session`, may set new
 * or updated fragments, and the SDK returns exactly those with the result (in the `result`
 * frame's `headers`, which the dispatcher copies onto the `task_result` envelope). A requester
 * gets the fragments it sent merged with the updated ones. Agent-Reach never reads them: they
 * are opaque headers like the payload.
 */
export { CONTEXT_HEADER_PREFIX };

const FRAGMENT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;

function checkName(name: string): void {
  if (!FRAGMENT_NAME.test(name)) throw new RangeError(`context fragment name ${JSON.stringify(name)} must be letters, digits, _ . - (≤ 100)`);
}

/** The fragments carried in a headers map, by fragment name. */
export function contextFromHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (k.startsWith(CONTEXT_HEADER_PREFIX)) out[k.slice(CONTEXT_HEADER_PREFIX.length)] = v;
  return out;
}

/** Headers carrying the given fragments. */
export function contextToHeaders(fragments: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, v] of Object.entries(fragments)) {
    checkName(name);
    out[CONTEXT_HEADER_PREFIX + name] = v;
  }
  return out;
}

export class SessionContext {
  private readonly received: Record<string, string>;
  private readonly updated: Record<string, string> = {};

  constructor(
    headers: Readonly<Record<string, string>>,
    /** The envelope's session_id, if any. */
    readonly id: string | null = null,
  ) {
    this.received = contextFromHeaders(headers);
  }

  get(name: string): string | undefined {
    return this.updated[name] ?? this.received[name];
  }

  /** A fragment parsed as JSON; undefined when absent or not JSON. */
  getJson<T = unknown>(name: string): T | undefined {
    const v = this.get(name);
    if (v === undefined) return undefined;
    try {
      return JSON.parse(v) as T;
    } catch {
      return undefined;
    }
  }

  set(name: string, value: string): void {
    checkName(name);
    this.updated[name] = value;
  }

  setJson(name: string, value: unknown): void {
    this.set(name, JSON.stringify(value));
  }

  /** Every fragment as the handler sees it now (received, overlaid with its updates) — pass it on when delegating. */
  all(): Record<string, string> {
    return { ...this.received, ...this.updated };
  }

  /** Only the fragments this handler set: what travels back with its result. */
  changes(): Record<string, string> {
    return { ...this.updated };
  }
}
