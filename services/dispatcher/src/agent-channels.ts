import { ReachError, type Logger } from '@reach/core';
import type { Redis } from '@reach/store';

/**
 * Redis pub/sub between the instances of the dispatcher (one service, so sharing Redis
 * channels among its own instances is fine; other services never see them).
 *
 * - `reach:deliver:<agent>` carries a new buffer entry from the instance that consumed it to
 *   the instance holding the agent's socket (R-C10). PUBLISH answers how many instances
 *   listen: 0 means no live WebSocket anywhere, which is when HTTP push applies.
 * - `reach:kick:<agent>` carries `<generation> <connection_id>` of a new connection, so the
 *   instance holding an older one closes it with 4001 (R-C3).
 *
 * An instance subscribes to an agent's channels while it holds that agent's connection. Pub/sub
 * is at-most-once (a message published while the subscriber reconnects is gone): deliveries
 * are never only in a message — they are in the replay buffer, and connections re-read it.
 */
const DELIVER = 'reach:deliver:';
const KICK = 'reach:kick:';

export interface ChannelHandlers {
  onDelivery(agent: string, entry: string): void;
  onKick(agent: string, generation: number, connectionId: string): void;
}

export class AgentChannels {
  constructor(
    private readonly pub: Redis,
    private readonly sub: Redis,
    handlers: ChannelHandlers,
    private readonly log: Logger,
  ) {
    sub.on('message', (channel: string, message: string) => {
      if (channel.startsWith(DELIVER)) handlers.onDelivery(channel.slice(DELIVER.length), message);
      else if (channel.startsWith(KICK)) {
        const [gen, connectionId] = message.split(' ');
        handlers.onKick(channel.slice(KICK.length), Number(gen), connectionId ?? '');
      }
    });
  }

  async subscribe(agent: string): Promise<void> {
    try {
      await this.sub.subscribe(DELIVER + agent, KICK + agent);
    } catch (err) {
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `redis subscribe failed: ${(err as Error).message}`, { cause: err });
    }
  }

  unsubscribe(agent: string): void {
    this.sub.unsubscribe(DELIVER + agent, KICK + agent).catch((err: unknown) => this.log.warn({ err, agent_id: agent }, 'redis unsubscribe failed'));
  }

  /** Publishes each entry to its agent's channel; returns how many instances received each. */
  async publishDeliveries(items: ReadonlyArray<{ agent: string; entry: string }>): Promise<number[]> {
    if (items.length === 0) return [];
    const pipe = this.pub.pipeline();
    for (const it of items) pipe.publish(DELIVER + it.agent, it.entry);
    const results = (await pipe.exec()) ?? [];
    return results.map(([err, n]) => (err ? -1 : Number(n)));
  }

  async publishKick(agent: string, generation: number, connectionId: string): Promise<void> {
    try {
      await this.pub.publish(KICK + agent, `${generation} ${connectionId}`);
    } catch (err) {
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `redis publish failed: ${(err as Error).message}`, { cause: err });
    }
  }
}
