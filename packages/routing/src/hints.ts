import type { Envelope } from '@reach/envelope';

import { ATTEMPT_HEADER, CAPABILITY_TAGS, EXCLUDE_HEADER, FANOUT_AGENT, FANOUT_PARENT, ON_SATURATION, PREFERRED_AGENT } from '@reach/core';

/**
 * The headers the router reads and writes (Kafka record headers on reach.pending.v1, envelope
 * headers): named in @reach/core's headers.ts, re-exported here for routing's users.
 */
export { ATTEMPT_HEADER, CAPABILITY_TAGS, EXCLUDE_HEADER, FANOUT_AGENT, FANOUT_PARENT, ON_SATURATION, PREFERRED_AGENT };

/** What the sender and earlier attempts ask of this routing decision. */
export interface RouteHints {
  /** 0 for a first attempt. */
  readonly attempt: number;
  /** Agents a retry should avoid (failover, R-B9). */
  readonly excludeAgents: readonly string[];
  readonly preferredAgent: string | undefined;
  /**
   * The agent this (message, attempt) was routed to before, when its record is consumed again
   * (the router's decision memo). Unlike preferredAgent it holds even when that agent is saturated.
   */
  readonly decidedAgent?: string;
  /** QUEUE_REQUEST: answer 2002 instead of holding the message when every candidate is saturated. */
  readonly rejectOnSaturation: boolean;
  /** Tags the chosen capability must carry. */
  readonly capabilityTags: readonly string[];
}

export function splitList(raw: string | undefined): string[] {
  if (!raw) return [];
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Reads the hints from the record's Kafka headers and the envelope's own headers. */
export function readHints(recordHeaders: Readonly<Record<string, string>>, envelope: Envelope): RouteHints {
  const attempt = Number(recordHeaders[ATTEMPT_HEADER] ?? '0');
  const preferred = envelope.headers[PREFERRED_AGENT]?.trim();
  return {
    attempt: Number.isInteger(attempt) && attempt >= 0 ? attempt : 0,
    excludeAgents: splitList(recordHeaders[EXCLUDE_HEADER]),
    preferredAgent: preferred ? preferred : undefined,
    rejectOnSaturation: envelope.headers[ON_SATURATION]?.trim().toUpperCase() === 'QUEUE_REQUEST',
    capabilityTags: splitList(envelope.headers[CAPABILITY_TAGS]),
  };
}
