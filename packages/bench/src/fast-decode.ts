import { MessageStateValues, type MessageState } from '@reach/envelope';
import { readString, readVarint } from './avro-varint.js';

/**
 * What the bench reads per message, read cheaply: at 5,000 msg/s it sees 5,000 deliver frames
 * and 20,000 status events a second, and a full JSON parse or Avro decode of each would make
 * the bench, not the stack, the thing that saturates the two cores.
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

/** An ack (DESIGN §4), built without JSON.stringify: ids never need escaping. */
export function ackFrame(seq: number, messageId: string): string {
  return `{"type":"ack","seq":${seq},"message_id":"${messageId}"}`;
}

export interface StatusHead {
  eventId: string;
  messageId: string;
  state: MessageState;
  attempt: number;
  /** epoch ms the stage stamped. */
  at: number;
}

/**
 * The first five fields of a framed reach.v1.StatusEvent (event_id, message_id, state,
 * attempt, at), read straight from the Avro bytes. Only for records written with `schemaId`
 * (this build's schema, the one the stages write with): another writer schema may order its
 * fields differently, so the caller decodes those in full.
 */
export function peekStatus(buf: Buffer, schemaId: number): StatusHead | undefined {
  if (buf.length < 6 || buf[0] !== 0 || buf.readUInt32BE(1) !== schemaId) return undefined;
  const eventId = readString(buf, 5);
  const messageId = eventId && readString(buf, eventId.next);
  const state = messageId && readVarint(buf, messageId.next);
  const attempt = state && readVarint(buf, state.next);
  const at = attempt && readVarint(buf, attempt.next);
  const name = state ? MessageStateValues[state.value] : undefined;
  if (!at || !name) return undefined;
  return { eventId: eventId.value, messageId: messageId.value, state: name, attempt: attempt.value, at: at.value };
}
