import type { IHeaders, Producer } from 'kafkajs';

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

/** Produces records grouped by topic in one request per broker, acks=-1. */
export async function produceAll(producer: Producer, records: readonly OutRecord[]): Promise<void> {
  if (records.length === 0) return;
  const byTopic = new Map<string, Array<{ key: string | Buffer | null; value: Buffer | null; headers?: Record<string, string> }>>();
  for (const r of records) {
    let list = byTopic.get(r.topic);
    if (!list) byTopic.set(r.topic, (list = []));
    list.push({ key: r.key, value: r.value, ...(r.headers ? { headers: { ...r.headers } } : {}) });
  }
  await producer.sendBatch({ acks: -1, topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })) });
}
