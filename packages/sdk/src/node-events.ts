import type { Logger } from '@reach/core';
import { errorText } from './node-state.js';
import type { NodeEvents } from './node-types.js';

/** The node's listeners (AgentNode.on); a listener that throws is logged and the others still run. */
export class NodeEventHub {
  private readonly listeners = new Map<keyof NodeEvents, Set<(arg: never) => void>>();

  constructor(private readonly log: Logger) {}

  on<K extends keyof NodeEvents>(event: K, listener: (arg: NodeEvents[K]) => void): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener as (arg: never) => void);
    return () => set.delete(listener as (arg: never) => void);
  }

  fire<K extends keyof NodeEvents>(event: K, arg: NodeEvents[K]): void {
    for (const listener of this.listeners.get(event) ?? []) {
      try {
        (listener as (a: NodeEvents[K]) => void)(arg);
      } catch (err) {
        this.log.error({ event, err: errorText(err) }, 'event listener threw');
      }
    }
  }
}
