import type { Presence, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type OutRecord } from '@reach/kafka';

const PRESENCE_SUBJECT = valueSubject(TOPICS.presence.name);

/** A reach.presence.v1 record (compacted, key agent_id): where the agent's socket is, or that it has none. */
export function presenceRecord(
  codec: SchemaCodec,
  p: { agentId: string; connected: boolean; instance: string; connectionId: string },
  now: number = Date.now(),
): OutRecord {
  const value: Presence = { agent_id: p.agentId, connected: p.connected, dispatcher_instance: p.instance, connection_id: p.connectionId, at: now };
  return { topic: TOPICS.presence.name, key: p.agentId, value: codec.encode(PRESENCE_SUBJECT, value) };
}
