import type { Logger } from '@reach/core';
import type { SchemaCodec } from '@reach/envelope';
import type { OutRecord } from '@reach/kafka';
import { statusRecord } from '@reach/service-kit';
import { envelopeFromMessageJson, frameOf, headOf, parseHead, type EntryHead } from './entry.js';
import type { DispatcherMetrics } from './metrics.js';
import type { Outbox } from './outbox.js';
import { heldEntry, type DeadlineHolds } from './deadline-holds.js';
import type { BufferedEntry, ReplayBuffer } from './replay-buffer.js';

/**
 * Deliveries stored in an agent's buffer whose DELIVERING event was never produced: the
 * instance that consumed them died (kill -9) between its append and its produce. Sent as they
 * are, the agent's ack would make them DELIVERED before any DELIVERING (`pnpm chaos`: 44
 * illegal transitions after dispatcher kills), and the next owner's DELIVERING would follow.
 *
 * So a pump never sends an unreleased entry (replay-buffer.ts `reach:unrel`). A young one
 * belongs to a consume that is still on its way: its owner releases and announces it. One left
 * unreleased for ORPHAN_AFTER_MS is taken as orphaned: the pump produces its DELIVERING event
 * here, from the entry, releases it and sends it. If its owner was only slow (a produce that
 * waits out a broker restart), the event is written twice — harmless, states only move forward.
 */
export const ORPHAN_AFTER_MS = 2_000;

/** Who writes the events. */
export interface EventSource {
  codec: SchemaCodec;
  service: string;
  instance: string;
}

/** The DELIVERING event of a buffered entry (undefined if its head is unreadable). */
export function deliveringOfEntry(
  src: EventSource,
  agent: string,
  entry: string,
  detail: Record<string, unknown>,
  now: number = Date.now(),
): OutRecord | undefined {
  const head = parseHead(headOf(entry));
  return head ? deliveringOfHead(src, agent, head, detail, now) : undefined;
}

/** deliveringOfEntry for a head already parsed. */
export function deliveringOfHead(src: EventSource, agent: string, head: EntryHead, detail: Record<string, unknown>, now: number = Date.now()): OutRecord {
  return statusRecord(
    src.codec,
    {
      state: 'DELIVERING',
      envelope: envelopeFromMessageJson(head.message),
      service: src.service,
      instance: src.instance,
      attempt: head.attempt,
      agentId: agent,
      parentMessageId: head.parent,
      detail,
    },
    now,
  );
}

export interface OrphanReleaseDeps extends EventSource {
  outbox: Outbox;
  buffer: ReplayBuffer;
  holds: DeadlineHolds;
  /** The ack window of a message without timeout_ms. */
  ackTimeoutMs: number;
  metrics: DispatcherMetrics;
  log: Logger;
}

export class OrphanRelease {
  constructor(private readonly d: OrphanReleaseDeps) {}

  /**
   * Produces the orphans' DELIVERING events (acks=-1), then releases them. The released
   * entries `behind` them in the agent's buffer cannot be sent before, so their ack deadlines
   * are held until then (deadline-holds.ts): during a broker restart the produce waits 10–25 s.
   */
  async release(agent: string, orphans: readonly BufferedEntry[], behind: readonly BufferedEntry[]): Promise<void> {
    if (orphans.length === 0) return;
    const records = orphans.flatMap(({ seq, entry }) => {
      const deadline = /"deadline":"([^"]*)"/.exec(frameOf(entry))?.[1];
      const record = deliveringOfEntry(this.d, agent, entry, { seq, deadline, instance: this.d.instance, orphaned: true });
      return record ? [record] : [];
    });
    const held = behind.flatMap(({ seq, entry }) => heldEntry(agent, seq, entry, this.d.ackTimeoutMs) ?? []);
    this.d.holds.begin(held);
    try {
      await this.d.holds.renew(held);
      await this.d.outbox.send(records);
      await this.d.buffer.release(orphans.map(({ seq }) => ({ agent, seq })));
    } finally {
      this.d.holds.end(held);
    }
    this.d.metrics.orphansReleased.inc(orphans.length);
    this.d.log.info({ agent_id: agent, count: orphans.length }, 'orphaned deliveries (their consumer died before DELIVERING): event produced, sent');
  }
}
