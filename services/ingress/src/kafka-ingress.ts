import type { Envelope } from '@reach/envelope';
import { validateEnvelope } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord } from '@reach/kafka';
import { deadLetterRecord, statusRecord, type ServiceContext } from '@reach/service-kit';

const INGRESS_SUBJECT = valueSubject(TOPICS.ingress.name);
const PENDING_SUBJECT = valueSubject(TOPICS.pending.name);

/**
 * The Kafka ingress path (DESIGN §2): decode the framed envelope, validate it exactly as the
 * HTTP path does, and accept it onto reach.pending.v1 as PENDING. A record that cannot be
 * decoded throws a non-retryable ReachError: the stage kit sends its raw bytes to
 * reach.dlq.v1 with reason INVALID and its code, and the partition moves on. A decoded
 * envelope that breaks a rule goes to the DLQ with the envelope and is marked REJECTED.
 */
export async function startKafkaIngress(ctx: ServiceContext<never>): Promise<void> {
  const { codec, config } = ctx;
  await ctx.stage({
    topics: [TOPICS.ingress.name],
    concurrency: 16,
    handle: async (record: InRecord): Promise<OutRecord[]> => {
      const envelope = await codec.decode<Envelope>(INGRESS_SUBJECT, record.value);
      const invalid = validateEnvelope(envelope, { maxPayloadBytes: config.maxPayloadBytes });
      if (invalid) {
        // Decoded but breaking a rule: keep the envelope in the DLQ entry and make the
        // rejection queryable by its message id.
        return [
          deadLetterRecord(codec, { service: ctx.service, error: invalid, record, envelope, reason: 'INVALID' }),
          statusRecord(codec, { state: 'REJECTED', envelope, service: ctx.service, instance: ctx.instanceId, code: invalid.code, reason: invalid.message }),
        ];
      }
      const headers: Record<string, string> = {};
      if (record.headers.traceparent) headers.traceparent = record.headers.traceparent;
      return [
        // Re-encoded with this build's reader schema: downstream stages only ever see the current version.
        { topic: TOPICS.pending.name, key: envelope.session_id ?? envelope.message_id, value: codec.encode(PENDING_SUBJECT, envelope), headers },
        statusRecord(codec, { state: 'PENDING', envelope, service: ctx.service, instance: ctx.instanceId }),
      ];
    },
  });
}
