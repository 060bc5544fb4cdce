import type { RetryRequest, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type InRecord, type OutRecord } from '@reach/kafka';
import { FANOUT_PARENT, isHold, republishAttempt, republishHeaders } from '@reach/routing';
import { statusRecord } from '@reach/service-kit';

const PENDING_SUBJECT = valueSubject(TOPICS.pending.name);

export interface RepublishContext {
  readonly codec: SchemaCodec;
  readonly service: string;
  readonly instanceId: string;
}

/**
 * A due RetryRequest goes back to reach.pending.v1 exactly as ingress would have written it
 * (key session_id ?? message_id, so a session keeps its partition), with the attempt number and
 * the agents to avoid as Kafka headers. A retry of a failed attempt also opens the new attempt
 * on the timeline with a PENDING status; a saturation hold does not (the router already said
 * PENDING 2002 for this same attempt, and nothing failed).
 */
export function republish(ctx: RepublishContext, req: RetryRequest, record: InRecord, now: number = Date.now()): OutRecord[] {
  const env = req.envelope;
  const out: OutRecord[] = [
    {
      topic: TOPICS.pending.name,
      key: env.session_id ?? env.message_id,
      value: ctx.codec.encode(PENDING_SUBJECT, env),
      headers: republishHeaders(req, record.headers.traceparent),
    },
  ];
  if (!isHold(req)) {
    out.push(
      statusRecord(
        ctx.codec,
        {
          state: 'PENDING',
          envelope: env,
          service: ctx.service,
          instance: ctx.instanceId,
          attempt: republishAttempt(req),
          parentMessageId: env.headers[FANOUT_PARENT] ?? null,
          reason: 'retry',
          detail: {
            retry_of_attempt: req.attempt,
            code: req.code,
            reason: req.reason,
            failed_agent_id: req.failed_agent_id,
            exclude_agent_ids: req.exclude_agent_ids,
            not_before: new Date(req.not_before).toISOString(),
          },
        },
        now,
      ),
    );
  }
  return out;
}
