import type { HopsResult } from './results.js';
import { forEachLimit, type StackEndpoints } from './stack.js';
import { Samples } from './stats.js';

/**
 * Where a message's time goes, hop by hop, from the tracker's timeline
 * (`GET /v1/messages/{id}/events` on ingress) and the two times only the bench knows: when it
 * sent the message and when its agent received it. All clocks are the one machine's.
 */

export interface TimelineEvent {
  state: string;
  /** RFC 3339 */
  at: string;
  attempt: number;
}

export interface SampledMessage {
  messageId: string;
  sentAt: number;
  receivedAt: number;
}

export const HOPS = [
  { hop: 'send → PENDING (ingress)', from: 'sent', to: 'PENDING' },
  { hop: 'PENDING → ROUTED (router)', from: 'PENDING', to: 'ROUTED' },
  { hop: 'ROUTED → DELIVERING (dispatcher)', from: 'ROUTED', to: 'DELIVERING' },
  { hop: 'DELIVERING → agent receive', from: 'DELIVERING', to: 'received' },
  { hop: 'agent receive → DELIVERED (ack)', from: 'received', to: 'DELIVERED' },
] as const;

/**
 * The hop durations (ms) of one message, or undefined when its timeline lacks a state (not
 * written yet). The first event of each state counts: a redelivery adds events, not hops.
 */
export function hopDurations(m: SampledMessage, events: readonly TimelineEvent[]): number[] | undefined {
  const at = new Map<string, number>([
    ['sent', m.sentAt],
    ['received', m.receivedAt],
  ]);
  for (const e of events) if (!at.has(e.state)) at.set(e.state, Date.parse(e.at));
  const out: number[] = [];
  for (const h of HOPS) {
    const from = at.get(h.from);
    const to = at.get(h.to);
    if (from === undefined || to === undefined || !Number.isFinite(from) || !Number.isFinite(to)) return undefined;
    out.push(to - from);
  }
  return out;
}

export function summarizeHops(rate: number, sampled: number, perMessage: ReadonlyArray<number[] | undefined>): HopsResult {
  const samples = HOPS.map(() => new Samples());
  let complete = 0;
  for (const d of perMessage) {
    if (!d) continue;
    complete++;
    d.forEach((ms, i) => samples[i]!.add(ms));
  }
  return {
    rate,
    sampled,
    complete,
    hops: HOPS.map((h, i) => {
      const s = samples[i]!.summary();
      return { hop: h.hop, count: s.count, p50: s.p50, p99: s.p99 };
    }),
  };
}

/**
 * Reads the sampled messages' timelines (a few requests at a time, outside any measured window)
 * and summarizes their hops. A timeline still missing DELIVERED (the tracker writes in
 * batches) is read again, up to a few seconds.
 */
export async function measureHops(s: StackEndpoints, rate: number, sample: readonly SampledMessage[]): Promise<HopsResult> {
  const results = new Array<number[] | undefined>(sample.length);
  await forEachLimit(sample, 8, async (m, i) => {
    for (let attempt = 0; attempt < 5; attempt++) {
      const res = await fetch(`${s.ingressUrl}/v1/messages/${m.messageId}/events`, { headers: { authorization: `Bearer ${s.adminToken}` } }).catch(
        () => undefined,
      );
      if (res?.ok) {
        const body = (await res.json()) as { events: TimelineEvent[] };
        results[i] = hopDurations(m, body.events);
        if (results[i]) return;
      } else await res?.body?.cancel();
      await new Promise((r) => setTimeout(r, 1000));
    }
  });
  return summarizeHops(rate, sample.length, results);
}
