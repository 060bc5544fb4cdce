import type { IHeaders, KafkaMessage, Producer } from 'kafkajs';

/** A record as stages see it: headers flattened to strings, offsets as strings (int64). */
export interface InRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly timestamp: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: Readonly<Record<string, string>>;
}

/** A record to produce. */
export interface OutRecord {
  readonly topic: string;
  readonly key: string | Buffer | null;
  readonly value: Buffer | null;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A fetched kafkajs message as the InRecord stages see. */
export function toInRecord(topic: string, partition: number, m: KafkaMessage): InRecord {
  return { topic, partition, offset: m.offset, timestamp: m.timestamp, key: m.key, value: m.value, headers: flattenHeaders(m.headers) };
}

export function flattenHeaders(headers: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!headers) return out;
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined) continue;
    const first = Array.isArray(v) ? v[0] : v;
    if (first !== undefined) out[k] = Buffer.isBuffer(first) ? first.toString('utf8') : String(first);
  }
  return out;
}

type Waiter = { records: readonly OutRecord[]; resolve: () => void; reject: (err: unknown) => void };

/**
 * Coalesces concurrent produce calls on one producer into one request. Partitions are handled
 * concurrently and every stage produces what a chunk of records yields; sent one by one, those
 * small requests queue behind each other on the idempotent producer (one request in flight),
 * which is what made each hop cost tens of milliseconds. Calls made while a request is in
 * flight (or within the same tick) go out together in the next one; each caller's promise
 * settles with the request that carried its records.
 */
class ProduceCoalescer {
  private waiting: Waiter[] = [];
  private running = false;

  constructor(private readonly producer: Producer) {}

  produce(records: readonly OutRecord[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ records, resolve, reject });
      if (!this.running) {
        this.running = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    while (this.waiting.length > 0) {
      const batch = this.waiting;
      this.waiting = [];
      try {
        await sendGrouped(
          this.producer,
          batch.flatMap((w) => w.records),
        );
        for (const w of batch) w.resolve();
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
    }
    this.running = false;
  }
}

async function sendGrouped(producer: Producer, records: readonly OutRecord[]): Promise<void> {
  const byTopic = new Map<string, Array<{ key: string | Buffer | null; value: Buffer | null; headers?: Record<string, string> }>>();
  for (const r of records) {
    let list = byTopic.get(r.topic);
    if (!list) byTopic.set(r.topic, (list = []));
    list.push({ key: r.key, value: r.value, ...(r.headers ? { headers: { ...r.headers } } : {}) });
  }
  await producer.sendBatch({ acks: -1, topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })) });
}

const coalescers = new WeakMap<Producer, ProduceCoalescer>();

/**
 * Produces records (acks=-1), grouped by topic, coalesced with concurrent calls on the same
 * producer into one request. Resolves once the broker has them all.
 */
export async function produceAll(producer: Producer, records: readonly OutRecord[]): Promise<void> {
  if (records.length === 0) return;
  let c = coalescers.get(producer);
  if (!c) coalescers.set(producer, (c = new ProduceCoalescer(producer)));
  await c.produce(records);
}
