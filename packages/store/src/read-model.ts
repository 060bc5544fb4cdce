/**
 * The columns of PostgreSQL `messages`, the read model the tracker writes (migration 001 and
 * later) and ingress and the retry-scheduler read. One declaration for every service; `Time` is
 * how a service holds timestamps (epoch ms when writing, Date as pg returns them when reading).
 */
export interface MessageColumns<Time = Date> {
  message_id: string;
  created_at: Time;
  updated_at: Time;
  status: string;
  attempt: number;
  message_type: string;
  producer: string;
  capability: string | null;
  topic: string | null;
  target_agent_id: string | null;
  agent_id: string | null;
  parent_message_id: string | null;
  trace_id: string;
  request_id: string | null;
  session_id: string | null;
  correlation_id: string | null;
  reply_to: string | null;
  idempotency_key: string | null;
  priority: string;
  expire_at: Time | null;
  code: number | null;
  reason: string | null;
  /** The handler's result: JSON text when written, parsed JSON (jsonb) when read. */
  result: unknown;
  /** The ReachRule that routed the message, if one matched. */
  rule: string | null;
}

/**
 * A handler's result is kept exactly as the agent sent it (docs/protocol.md). jsonb cannot
 * hold NUL (`\u0000`), which JSON and so a result may carry; such a result is stored as a jsonb
 * string holding its JSON text (in which NUL is the six characters `\u0000`). A result is
 * otherwise always an object (`{status, payload}`), so a string means "JSON text inside".
 * `resultForJsonb` makes the text the tracker writes; `resultFromJsonb` reads either form back.
 */
export function resultForJsonb(json: string): string {
  return json.includes('\\u0000') ? JSON.stringify(json) : json;
}

export function resultFromJsonb(stored: unknown): unknown {
  return typeof stored === 'string' ? (JSON.parse(stored) as unknown) : stored;
}
