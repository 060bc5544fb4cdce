import { ReachError, errorInfo, isKnownCode, type ErrorName, ERROR } from '@reach/core';
import type { RoutesFrame } from './frames.js';

export type RouteKind = 'capability' | 'topic';

/** A version-pinned name `name@major` is looked up by its name (the view is kept by name). */
function baseName(name: string): string {
  const at = name.lastIndexOf('@');
  return at > 0 ? name.slice(0, at) : name;
}

/**
 * The node's local view of what it can reach (R-G6), kept from the dispatcher's `routes`
 * frames over the node's own socket: the dispatcher folds the same registry, presence and grant
 * feeds as the routers and reads the same circuits, and pushes a change as soon as it sees one.
 * A pre-flight check is then a map lookup: no network round trip. A name the view does not hold
 * has no verdict here: it may belong to an agent that registered a moment ago, which the
 * registry already knows and the view will hear of a few hundred milliseconds later — the node
 * asks the registry about it instead of refusing it.
 */
export class RoutesView {
  private capabilities = new Map<string, number>();
  private topics = new Map<string, number>();
  private received = false;

  /** True once a full view has arrived (on the current connection). */
  get ready(): boolean {
    return this.received;
  }

  /**
   * Forgets the view: the connection it came on is gone, and what it said may be stale by the
   * time a new one sends its full view. Until then there is no verdict — a view that is not
   * complete never refuses.
   */
  reset(): void {
    this.capabilities = new Map();
    this.topics = new Map();
    this.received = false;
  }

  apply(frame: RoutesFrame): void {
    if (frame.full) {
      this.capabilities = new Map();
      this.topics = new Map();
      this.received = true;
    }
    for (const [map, entries] of [
      [this.capabilities, frame.capabilities],
      [this.topics, frame.topics],
    ] as const) {
      for (const [name, code] of Object.entries(entries)) {
        if (code === null) map.delete(name);
        else map.set(name, code);
      }
    }
  }

  /** 0 when a message would be routed; else the code it would be refused with. Undefined before the first view, and for a name it does not hold. */
  verdict(kind: RouteKind, name: string): number | undefined {
    if (!this.received) return undefined;
    return (kind === 'capability' ? this.capabilities : this.topics).get(baseName(name));
  }

  /**
   * The error a refused pre-flight raises, or undefined when the message may go (or the view has
   * no verdict). `mayWait`: the message has an expire_at, so the router parks it while nobody
   * can take it (2001, 3001: it waits for an agent or a closed circuit until then) instead of
   * refusing it; only a domain refusal (2003) is final for it too.
   */
  refusal(kind: RouteKind, name: string, options: { mayWait?: boolean } = {}): ReachError | undefined {
    const code = this.verdict(kind, name);
    if (code === undefined || code === 0) return undefined;
    if (options.mayWait && code !== ERROR.DOMAIN_DENIED) return undefined;
    const errorName = (isKnownCode(code) ? errorInfo(code).name : 'NO_ROUTE') as ErrorName;
    const why: Record<number, string> = {
      [ERROR.NO_ROUTE]: `no live agent offers ${kind} ${name}`,
      [ERROR.DOMAIN_DENIED]: `every agent that offers ${kind} ${name} is in a security domain no grant opens to this agent`,
      [ERROR.CIRCUIT_OPEN]: `every agent that offers ${kind} ${name} has an open circuit`,
    };
    return new ReachError(errorName, `pre-flight: ${why[code] ?? `${kind} ${name} is refused (${code})`}`, { details: { [kind]: name, preflight: 'local' } });
  }
}
