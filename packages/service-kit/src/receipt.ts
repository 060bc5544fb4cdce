import { RECEIPT_MESSAGE_TYPE, receiptEnvelope, type Envelope, type MessageState, type SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type OutRecord } from '@reach/kafka';

export { RECEIPT_MESSAGE_TYPE };

const PENDING_SUBJECT = valueSubject(TOPICS.pending.name);

/** The failure receipt of packages/envelope (receiptEnvelope) as a record for reach.pending.v1. */
export function receiptRecord(
  codec: SchemaCodec,
  original: Envelope,
  outcome: { state: MessageState; code: number; reason: string },
  now: number = Date.now(),
): OutRecord | undefined {
  const receipt = receiptEnvelope(original, outcome, now);
  if (!receipt) return undefined;
  return { topic: TOPICS.pending.name, key: receipt.message_id, value: codec.encode(PENDING_SUBJECT, receipt) };
}
