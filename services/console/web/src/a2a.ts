/**
 * What the console marks about A2A (docs/a2a.md): agents imported from an Agent Card, and the
 * A2A ids of a message — the messageId an A2A client sent it with (the task id it got back is
 * the message id itself), and the task id an A2A agent gave it when it answered.
 */
export function isA2aAgent(a: { endpoints?: { protocol_version?: string } | undefined }): boolean {
  return a.endpoints?.protocol_version?.startsWith('a2a/') === true;
}

export interface A2aIds {
  /** Sent by an A2A client: its messageId (the A2A task id is the message id). */
  clientMessageId?: string;
  /** The task ids A2A agents gave the deliveries that they answered, in timeline order. */
  agentTaskIds: string[];
}

function field(detail: unknown, name: string): string | undefined {
  if (detail === null || typeof detail !== 'object') return undefined;
  const v = (detail as Record<string, unknown>)[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

export function a2aIdsOf(events: ReadonlyArray<{ state: string; detail: unknown }>): A2aIds {
  const out: A2aIds = { agentTaskIds: [] };
  for (const e of events) {
    const sent = e.state === 'PENDING' ? field(e.detail, 'a2a_message_id') : undefined;
    if (sent !== undefined) out.clientMessageId ??= sent;
    const task = e.state === 'DELIVERED' ? field(e.detail, 'a2a_task_id') : undefined;
    if (task !== undefined && !out.agentTaskIds.includes(task)) out.agentTaskIds.push(task);
  }
  return out;
}
