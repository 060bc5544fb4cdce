import type { Logger } from '@reach/core';
import type { AgentRecord } from '@reach/envelope';
import type { TableView } from '@reach/kafka';
import type { AgentChannels } from './agent-channels.js';
import type { AgentConnection } from './connection.js';
import { isA2aAgent, a2aSkillOf } from '@reach/a2a';
import { entryTraceparent, frameOf, headOf, parseHead } from './entry.js';
import type { HttpPusher } from './http-push.js';

/** A delivery now in its agent's buffer, to be sent. */
export interface Announcement {
  agent: string;
  seq: number;
  entry: string;
  messageId: string;
  traceId: string | undefined;
}

export interface AnnouncerDeps {
  localConnection(agent: string): AgentConnection | undefined;
  channels: AgentChannels;
  agents: TableView<AgentRecord>;
  pusher: HttpPusher;
  log: Logger;
}

/**
 * Sends deliveries that are in their agents' buffers: to a socket held right here, else over
 * pub/sub to the instance holding it, else (nobody listening and an `http` endpoint
 * registered) by HTTP push. Used for fresh deliveries (routed-consumer.ts) and for waiting
 * ones that got a slot (promotions.ts). Nothing here waits for an agent, and nothing is lost
 * when a step fails: the entry stays buffered, for the connection's next pump or replay, or
 * for its ack deadline.
 */
export class Announcer {
  constructor(private readonly d: AnnouncerDeps) {}

  async announce(items: readonly Announcement[]): Promise<void> {
    const remote: Announcement[] = [];
    for (const it of items) {
      this.d.log.debug({ agent_id: it.agent, message_id: it.messageId, trace_id: it.traceId, seq: it.seq }, 'delivery buffered');
      const local = this.d.localConnection(it.agent);
      if (local) local.deliver(it.entry);
      else remote.push(it);
    }
    if (remote.length === 0) return;
    let listeners: number[];
    try {
      listeners = await this.d.channels.publishDeliveries(remote);
    } catch (err) {
      // The deliveries are buffered: a connected agent gets them with its next pump or replay.
      this.d.log.warn({ err, count: remote.length }, 'could not announce deliveries over pub/sub');
      return;
    }
    remote.forEach((it, i) => {
      if (listeners[i] !== 0) return; // held by another instance (or the publish failed: stay buffered)
      const record = this.d.agents.get(it.agent);
      const endpoint = record?.endpoints.http;
      if (!record || !endpoint) return; // offline: the delivery waits in the buffer for the agent's replay
      const a2a = isA2aAgent(record);
      this.d.pusher.push({
        ...(a2a ? { protocol: 'a2a' as const, skill: a2aSkillOf(record, capabilityOf(it.entry)) } : {}),
        agent: it.agent,
        endpoint,
        seq: it.seq,
        messageId: it.messageId,
        traceId: it.traceId,
        traceparent: entryTraceparent(it.entry),
        frame: frameOf(it.entry),
        entry: it.entry,
      });
    });
  }
}

/** The capability a buffered delivery was routed for (its head), for the A2A skill it maps to. */
function capabilityOf(entry: string): string | undefined {
  const capability = parseHead(headOf(entry))?.message.capability;
  return typeof capability === 'string' ? capability : undefined;
}
