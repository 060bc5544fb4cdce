/**
 * What the bench reads per message, read cheaply: at 5,000 msg/s it sees 5,000 deliver frames
 * a second, and a full JSON parse of each would make the bench, not the stack, the thing that
 * saturates the two cores. (Status events come packed, tens to a record: those are decoded.)
 */

/** The dispatcher's frame prefix (services/dispatcher/src/entry.ts): seq is the first field. */
export const DELIVER_PREFIX = '{"type":"deliver","seq":';
const MESSAGE_ID_KEY = '"message_id":"';

/**
 * seq and message_id of a deliver frame, without parsing it: the envelope's message_id is its
 * first field, so it comes before the payload. Undefined when the frame is not laid out that
 * way (the caller falls back to JSON.parse).
 */
export function peekDeliver(text: string): { seq: number; messageId: string } | undefined {
  if (!text.startsWith(DELIVER_PREFIX)) return undefined;
  const comma = text.indexOf(',', DELIVER_PREFIX.length);
  const seq = Number(text.slice(DELIVER_PREFIX.length, comma));
  const k = text.indexOf(MESSAGE_ID_KEY, comma);
  if (!Number.isInteger(seq) || k < 0) return undefined;
  const start = k + MESSAGE_ID_KEY.length;
  const end = text.indexOf('"', start);
  return end > start ? { seq, messageId: text.slice(start, end) } : undefined;
}

/** An ack (docs/design.md §4), built without JSON.stringify: ids never need escaping. */
export function ackFrame(seq: number, messageId: string): string {
  return `{"type":"ack","seq":${seq},"message_id":"${messageId}"}`;
}
