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
  /**
   * Set on an item that may share a record with others (status events): `value` is the item's
   * own framed Avro encoding, and produceAll packs the items of one topic that go out in one
   * request into a single record of the array schema behind `packInto` (see packItems).
   */
  readonly packInto?: PackTarget;
}

/**
 * The record that packed items become: Confluent framing (`frame`, magic byte and schema id)
 * around an Avro record whose only field is an array of the items' type.
 */
export interface PackTarget {
  readonly frame: Buffer;
}

/** Confluent framing: magic byte 0 and the 4-byte schema id; what every value starts with. */
export const FRAME_BYTES = 5;

/** The pack target of an array record schema registered under `schemaId`. */
export function packTarget(schemaId: number): PackTarget {
  const frame = Buffer.alloc(FRAME_BYTES);
  frame.writeUInt32BE(schemaId, 1);
  return { frame };
}

/**
 * Largest packed record. Kafka refuses a record over the broker's message.max.bytes (1 MiB by
 * default); a pack is cut well below it and below MAX_REQUEST_BYTES.
 */
export const MAX_PACK_BYTES = 256 * 1024;

/** Avro's zigzag varint of a non-negative long (an array block's item count). */
function avroCount(n: number): Buffer {
  const bytes: number[] = [];
  let z = n * 2;
  while (z >= 0x80) {
    bytes.push(z % 0x80 | 0x80);
    z = Math.floor(z / 0x80);
  }
  bytes.push(z);
  return Buffer.from(bytes);
}

/**
 * Packs items (records with packInto) into array records: per topic, in order, cut at
 * MAX_PACK_BYTES; each pack is keyed by its first item's key. An array's Avro encoding is one
 * block (item count, the items' bodies back to back) and a 0 that ends it, so the items'
 * encodings are reused as they are: packing copies bytes and encodes nothing. Every other
 * record passes through unchanged, in front of the packs.
 *
 * Why: a message's life is four status events. As records of their own they were 4 of the
 * pipeline's 7 records per message, each paying kafkajs's per-record produce and fetch cost,
 * the broker's, and a decode in the tracker.
 */
export function packItems(records: readonly OutRecord[], maxBytes: number = MAX_PACK_BYTES): OutRecord[] {
  const out: OutRecord[] = [];
  const open = new Map<string, { target: PackTarget; key: OutRecord['key']; bodies: Buffer[]; bytes: number }>();
  const close = (topic: string): void => {
    const p = open.get(topic);
    if (!p) return;
    open.delete(topic);
    out.push({ topic, key: p.key, value: Buffer.concat([p.target.frame, avroCount(p.bodies.length), ...p.bodies, Buffer.from([0])]) });
  };
  const passed: OutRecord[] = [];
  for (const r of records) {
    if (!r.packInto || r.value === null || r.value.length < FRAME_BYTES) {
      passed.push(r);
      continue;
    }
    const body = r.value.subarray(FRAME_BYTES);
    const p = open.get(r.topic);
    if (p && (p.target.frame.equals(r.packInto.frame) === false || p.bytes + body.length > maxBytes)) close(r.topic);
    const cur = open.get(r.topic);
    if (cur) {
      cur.bodies.push(body);
      cur.bytes += body.length;
    } else {
      open.set(r.topic, { target: r.packInto, key: r.key, bodies: [body], bytes: body.length });
    }
  }
  for (const topic of [...open.keys()]) close(topic);
  return [...passed, ...out];
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
 * Largest request the coalescer sends. Kafka refuses a record batch over the broker's
 * message.max.bytes (2 MiB in deploy/local, 1 MiB by default): coalescing many large records
 * (retries carry whole envelopes of up to 256 KiB) into one request once produced exactly that
 * refusal, so requests are cut at this size.
 */
export const MAX_REQUEST_BYTES = 768 * 1024;

function recordBytes(r: OutRecord): number {
  let n = 64 + (r.value?.length ?? 0) + (r.key === null ? 0 : typeof r.key === 'string' ? Buffer.byteLength(r.key) : r.key.length);
  for (const [k, v] of Object.entries(r.headers ?? {})) n += k.length + v.length + 8;
  return n;
}

/** Splits records into requests of at most MAX_REQUEST_BYTES (a larger record goes alone). */
export function splitBySize(records: readonly OutRecord[], maxBytes: number = MAX_REQUEST_BYTES): OutRecord[][] {
  const out: OutRecord[][] = [];
  let current: OutRecord[] = [];
  let size = 0;
  for (const r of records) {
    const n = recordBytes(r);
    if (current.length > 0 && size + n > maxBytes) {
      out.push(current);
      current = [];
      size = 0;
    }
    current.push(r);
    size += n;
  }
  if (current.length > 0) out.push(current);
  return out;
}

/**
 * Coalesces concurrent produce calls on one producer into as few requests as possible.
 * Partitions are handled concurrently and every stage produces what a chunk of records
 * yields; sent one by one, those small requests queue behind each other on the idempotent
 * producer (one request in flight), which made each hop cost tens of milliseconds. Calls made
 * while a request is in flight (or within the same tick) go out together next; each caller's
 * promise settles with the request(s) that carried its records.
 *
 * A failed request fails its callers (their stage retries the records) and resets the
 * producer: kafkajs's idempotent producer can be left with sequence numbers the broker no
 * longer accepts (OUT_OF_ORDER_SEQUENCE_NUMBER on every later send), and reconnecting gets a
 * fresh producer id.
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
        for (const request of splitBySize(packItems(batch.flatMap((w) => w.records)))) await sendGrouped(this.producer, request);
        for (const w of batch) w.resolve();
      } catch (err) {
        for (const w of batch) w.reject(err);
        await this.reset();
      }
    }
    this.running = false;
  }

  private async reset(): Promise<void> {
    try {
      await this.producer.disconnect();
      await this.producer.connect();
    } catch {
      // the broker is away: kafkajs reconnects on the next send
    }
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
