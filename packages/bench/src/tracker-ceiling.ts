import { randomBytes } from 'node:crypto';
import { newId, newMessageId } from '@reach/core';
import { SchemaCodec, type MessageState, type StatusEvent } from '@reach/envelope';
import { packItems, packTarget, TOPICS, valueSubject, type Kafka, type OutRecord } from '@reach/kafka';
import { cpuBetween, cpuSnapshot, type ProcScope } from './proc-cpu.js';
import type { TrackerCeilingResult } from './results.js';
import { forEachLimit, type StackEndpoints } from './stack.js';

/**
 * `--tracker`: the read-model writer's own ceiling, without the rest of the pipeline in the
 * way. N synthetic messages' status events (PENDING, ROUTED, DELIVERING, DELIVERED — what the
 * stages write for a delivered message) are encoded ahead of time with the registry codec,
 * packed PACK to a record as the stages pack them (reach.status-batches.v1), and produced as
 * fast as the broker takes them, while the tracker's progress
 * is sampled: its own counters (timeline_events_total for timeline events, outcomes_total for
 * DELIVERED message rows), or — when its metrics cannot be read — its consumer group's commits,
 * which follow the PostgreSQL commit. Its ceiling is its rate while it had a backlog.
 *
 * The events are interleaved as the live pipeline emits them: a message's next state comes
 * `spread` messages later, so a tracker batch mixes states of many messages (all four events
 * of a message in one batch would fold into a single upsert and flatter the writer).
 */

const STATUS_SUBJECT = valueSubject(TOPICS.status.name);
const BATCH_SUBJECT = valueSubject(TOPICS.statusBatches.name);
const STATES: readonly MessageState[] = ['PENDING', 'ROUTED', 'DELIVERING', 'DELIVERED'];
/** Events per produce request, and per packed record (about what a stage's request carries at 1,000 msg/s). */
const BATCH = 2000;
const PACK = 50;
/** Produce requests in flight: one at a time, the producer (not the tracker) was the limit. */
const IN_FLIGHT = 4;
const TRACKER_GROUP = 'reach-tracker';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface TrackerCeilingOptions extends StackEndpoints {
  kafka: Kafka;
  schemaRegistryUrl: string;
  trackerUrl: string;
  messages: number;
  spread: number;
  timeoutS: number;
  scope: ProcScope;
  progress: (line: string) => void;
}

/** The tracker's counters this run reads (prom text format). */
export function trackerCounters(metricsText: string): { events: number; delivered: number } {
  let events = 0;
  let delivered = 0;
  for (const line of metricsText.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^[a-z_]*tracker_(timeline_events_total|outcomes_total)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const value = Number(m[3]);
    if (m[1] === 'timeline_events_total') events += value;
    if (m[1] === 'outcomes_total' && (m[2] ?? '').includes('state="DELIVERED"')) delivered += value;
  }
  return { events, delivered };
}

/** The order events are produced in: event k of message i goes out at position i + k × spread. */
export function interleave(messages: number, spread: number): Array<{ message: number; state: number }> {
  const order: Array<{ pos: number; message: number; state: number }> = [];
  for (let i = 0; i < messages; i++) for (let k = 0; k < STATES.length; k++) order.push({ pos: i + k * spread, message: i, state: k });
  return order.sort((a, b) => a.pos - b.pos || a.state - b.state).map(({ message, state }) => ({ message, state }));
}

/** One reading of the run: events acknowledged by the broker, and what the tracker had written. */
export interface Progress {
  atMs: number;
  acked: number;
  events: number;
  /** DELIVERED message rows (NaN when only commits can be read). */
  rows: number;
}

/**
 * The tracker's rate while it was saturated: over the sampling intervals during which it had
 * at least `threshold` events waiting (acknowledged by the broker, not yet written) from start
 * to end, so it was never idle waiting for the producer — which, on two shared cores, is
 * slower than a tracker with an empty queue would suggest. Less than a second of that, and
 * the tracker kept up with the producer: the overall rate is then a lower bound.
 */
export function ceilingRates(
  samples: readonly Progress[],
  o: { messages: number; events: number; seconds: number; threshold: number },
): Pick<TrackerCeilingResult, 'rowsPerS' | 'eventsPerS' | 'basis' | 'saturatedS' | 'overall' | 'peakBacklog' | 'producerLimited'> {
  let ms = 0;
  let events = 0;
  let rows = 0;
  let peakBacklog = 0;
  for (let i = 0; i < samples.length; i++) {
    const b = samples[i]!;
    peakBacklog = Math.max(peakBacklog, b.acked - b.events);
    const a = samples[i - 1];
    if (!a || a.acked - a.events < o.threshold || b.acked - b.events < o.threshold) continue;
    ms += b.atMs - a.atMs;
    events += b.events - a.events;
    rows += b.rows - a.rows;
  }
  const overall = { rowsPerS: o.messages / o.seconds, eventsPerS: o.events / o.seconds };
  const saturatedS = ms / 1000;
  if (saturatedS >= 1)
    return { rowsPerS: rows / saturatedS, eventsPerS: events / saturatedS, basis: 'saturated', saturatedS, overall, peakBacklog, producerLimited: false };
  return { ...overall, basis: 'overall', saturatedS, overall, peakBacklog, producerLimited: true };
}

export async function trackerCeiling(o: TrackerCeilingOptions): Promise<TrackerCeilingResult> {
  const run = randomBytes(3).toString('hex');
  const codec = SchemaCodec.connect(o.schemaRegistryUrl, { maxPayloadBytes: 1 << 20 });
  await codec.init([
    { subject: STATUS_SUBJECT, schema: 'reach.v1.StatusEvent' },
    { subject: BATCH_SUBJECT, schema: 'reach.v1.StatusBatch' },
  ]);

  o.progress(`  encoding ${o.messages * STATES.length} status events for ${o.messages} messages`);
  const { ids, records } = encodeEvents(codec, run, o.messages, o.spread);

  const admin = o.kafka.admin();
  // Not idempotent, so several requests can be in flight; they go down one connection and the
  // broker appends them in order (and the tracker folds out-of-order events anyway).
  const producer = o.kafka.producer({ allowAutoTopicCreation: false });
  await Promise.all([admin.connect(), producer.connect()]);
  try {
    const readCounters = async () => {
      const res = await fetch(`${o.trackerUrl}/metrics`).catch(() => undefined);
      return res?.ok ? trackerCounters(await res.text()) : undefined;
    };
    const committedSum = async () => {
      // committed records of the batches topic, PACK events each
      const [t] = await admin.fetchOffsets({ groupId: TRACKER_GROUP, topics: [TOPICS.statusBatches.name] });
      return PACK * (t?.partitions ?? []).reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0);
    };
    const before = await readCounters();
    const measuredBy: TrackerCeilingResult['measuredBy'] = before ? 'metrics' : 'commits';
    const committedBefore = before ? 0 : await committedSum();
    const written = async (): Promise<{ events: number; rows: number } | undefined> => {
      if (!before) return { events: (await committedSum()) - committedBefore, rows: NaN };
      const c = await readCounters();
      return c && { events: c.events - before.events, rows: c.delivered - before.delivered };
    };

    const cpu0 = cpuSnapshot(o.scope);
    const started = performance.now();
    let acked = 0;
    let produceS = NaN;
    o.progress(`  producing ${records.length} events, ${PACK} to a record; the tracker's progress read from its ${measuredBy}`);
    const batches = Array.from({ length: Math.ceil(records.length / BATCH) }, (_, i) => records.slice(i * BATCH, (i + 1) * BATCH));
    const sending = forEachLimit(batches, IN_FLIGHT, async (events) => {
      const messages = [];
      for (let i = 0; i < events.length; i += PACK) {
        for (const r of packItems(events.slice(i, i + PACK), Number.POSITIVE_INFINITY)) messages.push({ key: r.key, value: r.value });
      }
      await producer.send({ topic: TOPICS.statusBatches.name, acks: -1, messages });
      acked += events.length;
    }).then(() => void (produceS = (performance.now() - started) / 1000));

    const samples: Progress[] = [];
    let finished = false;
    while (performance.now() - started < o.timeoutS * 1000) {
      const w = await written();
      if (w) samples.push({ atMs: performance.now(), acked, ...w });
      if (w && w.events >= records.length && !(w.rows < o.messages)) {
        finished = true;
        break;
      }
      await sleep(200);
    }
    await sending;
    const seconds = (performance.now() - started) / 1000;
    const use = cpuBetween(cpu0, cpuSnapshot(o.scope));
    if (!finished) o.progress(`  the tracker had not written everything after ${o.timeoutS} s: the figures are a lower bound`);
    const rates = ceilingRates(samples, { messages: o.messages, events: records.length, seconds, threshold: 2 * BATCH });

    const sample = ids.filter((_, i) => i % Math.max(1, Math.floor(ids.length / 20)) === 0).slice(0, 20);
    let delivered = 0;
    await forEachLimit(sample, 4, async (id) => {
      const res = await fetch(`${o.ingressUrl}/v1/messages/${id}`, { headers: { authorization: `Bearer ${o.adminToken}` } }).catch(() => undefined);
      const body = res?.ok ? ((await res.json()) as { status?: string }) : undefined;
      if (body?.status === 'DELIVERED') delivered++;
    });
    const pct = (c: string) => ((use.byComponent.get(c) ?? 0) / use.seconds) * 100;
    return {
      messages: o.messages,
      events: records.length,
      produceS,
      seconds,
      complete: finished,
      ...rates,
      measuredBy,
      trackerPctCore: pct('tracker'),
      postgresPctCore: pct('postgres'),
      verified: { sampled: sample.length, delivered },
    };
  } finally {
    await producer.disconnect().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
  }
}

/** Every event of the run, encoded before the clock starts, as items to pack into StatusBatch records. */
function encodeEvents(codec: SchemaCodec, run: string, messages: number, spread: number): { ids: string[]; records: OutRecord[] } {
  const now = Date.now();
  const packInto = packTarget(codec.schemaId(BATCH_SUBJECT));
  const ids = Array.from({ length: messages }, () => newMessageId(now));
  const records = interleave(messages, spread).map(({ message, state }) => {
    const id = ids[message]!;
    const at = now + state;
    const event: StatusEvent = {
      event_id: newId('evt', at),
      message_id: id,
      state: STATES[state]!,
      attempt: 0,
      at,
      service: 'bench',
      instance: `bench-tracker-${run}`,
      trace_id: randomBytes(16).toString('hex'),
      producer: `bench.tracker.${run}`,
      message_type: 'task_request',
      capability: `bench_tracker_${run}`,
      topic: null,
      target_agent_id: null,
      agent_id: state >= 2 ? `bench.tracker.agent.${run}` : null,
      parent_message_id: null,
      code: null,
      reason: null,
      detail_json: null,
      created_at: now,
      expire_at: null,
      idempotency_key: null,
      session_id: null,
      correlation_id: null,
      request_id: null,
      reply_to: null,
      priority: 'NORMAL',
    };
    return { topic: TOPICS.statusBatches.name, key: id, value: codec.encode(STATUS_SUBJECT, event), packInto };
  });
  return { ids, records };
}
