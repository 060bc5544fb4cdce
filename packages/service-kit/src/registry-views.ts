import type { AgentRecord, Grant, Presence, SchemaCodec } from '@reach/envelope';
import { startTableView, TOPICS, valueSubject, type Kafka, type TableView } from '@reach/kafka';
import { AgentIndex, GrantIndex, newerAgentRecord, newerPresence } from '@reach/routing';
import type { Logger } from '@reach/core';

const AGENTS_SUBJECT = valueSubject(TOPICS.agents.name);
const PRESENCE_SUBJECT = valueSubject(TOPICS.presence.name);
const GRANTS_SUBJECT = valueSubject(TOPICS.grants.name);

export interface RegistryViews {
  readonly index: AgentIndex;
  readonly agents: TableView<AgentRecord>;
  readonly presence: TableView<Presence>;
  /** Cross-domain grants (R-A8), from the registry's compacted reach.grants.v1. */
  readonly grants: GrantIndex;
  readonly grantsView: TableView<Grant>;
  stop(): Promise<void>;
}

/**
 * Folds the compacted registry feeds into an AgentIndex (R-A6): each router instance (and
 * a dispatcher serving pre-flight views) reads reach.agents.v1 and reach.presence.v1 from the
 * beginning in a private group and follows them (and reach.grants.v1 for security domains).
 * Routing then needs no remote call per message and keeps working while Redis is down. An
 * AgentRecord older than the one held (by revision) is ignored.
 */
export async function startRegistryViews(
  kafka: Kafka,
  codec: SchemaCodec,
  logger: Logger,
  groupPrefix: string,
  onFatal: (error: Error) => void,
  /** Called after every change any of the three feeds applied (the dispatcher's pre-flight feed pushes on it). */
  onChange?: () => void,
): Promise<RegistryViews> {
  const index = new AgentIndex();
  const agents = await startTableView<AgentRecord>({
    kafka,
    topic: TOPICS.agents.name,
    logger,
    onFatal,
    groupPrefix: `${groupPrefix}-agents`,
    decode: (value) => codec.decode<AgentRecord>(AGENTS_SUBJECT, value),
    accept: newerAgentRecord,
    onChange: (key, value) => {
      if (value) index.upsertAgent(value);
      else index.removeAgent(key);
      onChange?.();
    },
  });
  const presence = await startTableView<Presence>({
    kafka,
    topic: TOPICS.presence.name,
    logger,
    onFatal,
    groupPrefix: `${groupPrefix}-presence`,
    decode: (value) => codec.decode<Presence>(PRESENCE_SUBJECT, value),
    accept: newerPresence,
    onChange: (key, value) => {
      if (value) index.setPresence(value);
      else index.removePresence(key);
      onChange?.();
    },
  });
  const grants = new GrantIndex();
  const grantsView = await startTableView<Grant>({
    kafka,
    topic: TOPICS.grants.name,
    logger,
    onFatal,
    groupPrefix: `${groupPrefix}-grants`,
    decode: (value) => codec.decode<Grant>(GRANTS_SUBJECT, value),
    onChange: (_key, value, previous) => {
      if (previous) grants.remove(previous);
      if (value) grants.add(value);
      onChange?.();
    },
  });
  return {
    index,
    agents,
    presence,
    grants,
    grantsView,
    stop: async () => {
      await Promise.all([agents.stop(), presence.stop(), grantsView.stop()]);
    },
  };
}
