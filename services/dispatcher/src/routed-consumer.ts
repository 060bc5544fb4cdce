import { ReachError, toReachError, type Logger } from '@reach/core';
import type { AgentRecord, Envelope, RoutedDelivery, SchemaCodec } from '@reach/envelope';
import { TOPICS, produceAll, valueSubject, type InRecord, type OutRecord, type Producer, type TableView } from '@reach/kafka';
import { deadLetterRecord, statusRecord } from '@reach/service-kit';
import type { AgentChannels } from './agent-channels.js';
import { buildEntry, entryPartsOf, frameOf } from './entry.js';
import type { Gateway } from './gateway.js';
import type { HttpPusher } from './http-push.js';
import type { DispatcherMetrics } from './metrics.js';
import type { ReplayBuffer } from './replay-buffer.js';

/**
 * The dispatcher's stage: reach.routed.v1 in group `reach-dispatcher` (instances share the
 * partitions; a record's key is its agent, so one owner handles each agent in order). For a
 * batch of records the owner
 *
 *   1. assigns each delivery its agent's next seq and stores it in the agent's replay buffer
 *      (one Redis pipeline),
 *   2. produces DELIVERING for each (detail `{seq, deadline, instance}`), acks=-1,
 *   3. only then announces the deliveries — to a socket held right here, else over pub/sub to
 *      the instance holding it, else (nobody listening and an `http` endpoint registered) by
 *      HTTP push — so no ack can overtake its DELIVERING event,
 *
 * and returns; the batch stage then resolves the offsets. Nothing here waits for an agent:
 * sends are queued on sockets, pushes on the push pool. A record that cannot be decoded goes
 * to reach.dlq.v1; a dependency failure (Redis, Kafka, the schema registry) fails the batch,
 * which kafkajs retries (at-least-once: a retried batch may buffer a delivery twice).
 */
const ROUTED_SUBJECT = valueSubject(TOPICS.routed.name);

export interface RoutedConsumerDeps {
  service: string;
  instanceId: string;
  replayTtlS: number;
  codec: SchemaCodec;
  producer: Producer;
  buffer: ReplayBuffer;
  channels: AgentChannels;
  gateway: Gateway;
  pusher: HttpPusher;
  agents: TableView<AgentRecord>;
  metrics: DispatcherMetrics;
  log: Logger;
}

interface Accepted {
  delivery: RoutedDelivery;
  envelope: Envelope;
  head: string;
  suffix: string;
}

export function routedBatchHandler(d: RoutedConsumerDeps): (records: readonly InRecord[]) => Promise<readonly OutRecord[]> {
  return async (records) => {
    const dead: OutRecord[] = [];
    const accepted: Accepted[] = [];
    for (const record of records) {
      try {
        const delivery = await d.codec.decode<RoutedDelivery>(ROUTED_SUBJECT, record.value);
        if (!delivery.agent_id) throw new ReachError('INVALID_ENVELOPE', 'routed delivery without agent_id', { details: { field: 'agent_id' } });
        accepted.push({ delivery, ...entryPartsOf(delivery, d.replayTtlS) });
      } catch (err) {
        const error = toReachError(err);
        // The schema registry being away is no reason to dead-letter a good record.
        if (error.retryable && error.codeName !== 'INTERNAL') throw error;
        d.log.warn({ err: error, partition: record.partition, offset: record.offset }, 'undecodable routed delivery sent to the DLQ');
        dead.push(deadLetterRecord(d.codec, { service: d.service, error, record }));
      }
    }
    if (accepted.length === 0) return dead;

    // Each delivery's ack deadline is registered with it; the deadline sweeper fails it if unanswered.
    const seqs = await d.buffer.appendMany(
      accepted.map((a) => ({ agent: a.delivery.agent_id, head: a.head, suffix: a.suffix, deadline: a.delivery.deadline_at })),
    );
    const statuses = accepted.map((a, i) =>
      statusRecord(d.codec, {
        state: 'DELIVERING',
        envelope: a.envelope,
        service: d.service,
        instance: d.instanceId,
        attempt: a.delivery.attempt,
        agentId: a.delivery.agent_id,
        parentMessageId: a.delivery.parent_message_id,
        detail: { seq: seqs[i], deadline: new Date(a.delivery.deadline_at).toISOString(), instance: d.instanceId },
      }),
    );
    await produceAll(d.producer, statuses);
    d.metrics.routed.inc(accepted.length);
    await announce(
      d,
      accepted.map((a, i) => ({ a, seq: seqs[i]!, entry: buildEntry(a.head, seqs[i]!, a.suffix) })),
    );
    return dead;
  };
}

async function announce(d: RoutedConsumerDeps, items: ReadonlyArray<{ a: Accepted; seq: number; entry: string }>): Promise<void> {
  const remote: Array<{ a: Accepted; seq: number; entry: string; agent: string }> = [];
  for (const it of items) {
    const agent = it.a.delivery.agent_id;
    d.log.debug({ agent_id: agent, message_id: it.a.delivery.message_id, trace_id: it.a.envelope.trace_id, seq: it.seq }, 'delivery buffered');
    const local = d.gateway.localConnection(agent);
    if (local) local.deliver(it.entry);
    else remote.push({ ...it, agent });
  }
  if (remote.length === 0) return;
  let listeners: number[];
  try {
    listeners = await d.channels.publishDeliveries(remote);
  } catch (err) {
    // The deliveries are buffered: a connected agent gets them with its next pump or replay.
    d.log.warn({ err, count: remote.length }, 'could not announce deliveries over pub/sub');
    return;
  }
  remote.forEach((it, i) => {
    if (listeners[i] !== 0) return; // held by another instance (or the publish failed: stay buffered)
    const endpoint = d.agents.get(it.agent)?.endpoints.http;
    if (!endpoint) return; // offline: the delivery waits in the buffer for the agent's replay
    d.pusher.push({ agent: it.agent, endpoint, seq: it.seq, messageId: it.a.delivery.message_id, traceId: it.a.envelope.trace_id, frame: frameOf(it.entry) });
  });
}
