import { newId, type Logger } from '@reach/core';
import type { Alert, SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject, type OutRecord } from '@reach/kafka';

const ALERTS_SUBJECT = valueSubject(TOPICS.alerts.name);

export type AlertSeverity = 'P1' | 'P2' | 'P3';

export interface AlertInput {
  kind: string;
  severity: AlertSeverity;
  service: string;
  /** One sentence an operator can act on: what happened and what to do. */
  summary: string;
  message_id?: string | null;
  trace_id?: string | null;
  capability?: string | null;
  rule?: string | null;
  labels?: Record<string, string>;
}

/**
 * An operator alert (reach.alerts.v1), produced with the records of the decision that raised
 * it, and the same alert as one error-level log line, so it is seen whether or not anyone
 * consumes the topic.
 */
export function alertRecord(codec: SchemaCodec, input: AlertInput, log: Logger, now: number = Date.now()): OutRecord {
  const value: Alert = {
    alert_id: newId('alr', now),
    kind: input.kind,
    severity: input.severity,
    service: input.service,
    summary: input.summary,
    message_id: input.message_id ?? null,
    trace_id: input.trace_id ?? null,
    capability: input.capability ?? null,
    rule: input.rule ?? null,
    labels: input.labels ?? {},
    at: now,
  };
  log.error(
    {
      alert: value.kind,
      severity: value.severity,
      alert_id: value.alert_id,
      message_id: value.message_id,
      trace_id: value.trace_id,
      capability: value.capability,
      rule: value.rule,
      ...value.labels,
    },
    `ALERT ${value.kind}: ${value.summary}`,
  );
  return { topic: TOPICS.alerts.name, key: value.kind, value: codec.encode(ALERTS_SUBJECT, value) };
}

/**
 * At most one alert per key per window, so a burst of identical failures (say every message
 * for a capability with no agent) pages once, with how many were folded into it.
 */
export class AlertThrottle {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(private readonly windowMs: number) {}

  /** null = suppressed; otherwise the number of alerts suppressed since the last one. */
  admit(key: string, now: number): number | null {
    const seen = this.last.get(key);
    if (seen && now - seen.at < this.windowMs) {
      seen.suppressed++;
      return null;
    }
    if (this.last.size > 10_000) this.last.clear(); // bounded: forgetting only costs a duplicate alert
    this.last.set(key, { at: now, suppressed: 0 });
    return seen?.suppressed ?? 0;
  }
}
