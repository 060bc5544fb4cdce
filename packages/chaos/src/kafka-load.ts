import { randomBytes } from 'node:crypto';
import { newMessageId, silentLogger, TOKEN_HEADER } from '@reach/core';
import { benchEnvelope, heartbeats, raiseQuota, register, type Registered, type StackEndpoints } from '@reach/bench';
import { SchemaCodec } from '@reach/envelope';
import { createKafka, createProducer, produceAll, TOPICS, valueSubject, type Producer } from '@reach/kafka';
import type { Ledger } from './ledger.js';
import type { SteadyLoad } from './load.js';

const INGRESS_SUBJECT = valueSubject(TOPICS.ingress.name);
/** A batch whose send failed (the broker away longer than the producer's own retries) is sent again, the same records, for this long. */
const RETRY_FOR_MS = 60_000;
const RETRY_EVERY_MS = 500;
/** Batches in flight at once: while the broker is away they queue here, not in the producer. */
const MAX_IN_FLIGHT = 64;

/**
 * Steady load through the Kafka ingress (reach.ingress.v1, a producer's public way in), for the
 * rates the HTTP load cannot offer on a small machine: one batch a 10 ms tick, each message with
 * its own idempotency key, sent by an idempotent producer with acks=-1 as a registered producer
 * (its token in the `reach-token` header). A message counts as accepted once its batch is
 * acknowledged; a batch whose send fails is sent again, the same records (same ids and keys),
 * until acknowledged or RETRY_FOR_MS have passed — then its messages count as refused.
 */
export class KafkaLoad implements SteadyLoad {
  private timer: NodeJS.Timeout | undefined;
  private sent = 0;
  private started = 0;
  private inFlight = 0;
  private readonly pending = new Set<Promise<void>>();
  private producer!: Producer;
  private codec!: SchemaCodec;
  private sender!: Registered;
  private stopHeartbeats: () => void = () => undefined;

  constructor(
    private readonly s: StackEndpoints & { brokers: readonly string[]; schemaRegistryUrl: string },
    private readonly capability: string,
    private readonly run: string,
    private readonly ledger: Ledger,
  ) {}

  async open(rate: number): Promise<void> {
    this.codec = SchemaCodec.connect(this.s.schemaRegistryUrl, { maxPayloadBytes: 1 << 20 });
    await this.codec.init([{ subject: INGRESS_SUBJECT, schema: 'reach.v1.Envelope' }]);
    this.sender = await register(this.s, {
      agent_id: `chaos.producer.${this.run}`,
      agent_type: 'chaos-producer',
      capabilities: [],
      metadata: { max_concurrency: 1 },
      ttl_s: 60,
    });
    // A burst of a minute's traffic: after the load stalled (a broker kill, 64 sends in flight)
    // it catches up in one batch of one timestamp, which the default burst (1,000) refuses
    // 4129 — correct for a producer, but this run is about faults, not about its own quota.
    await raiseQuota(this.s, this.sender.agent_id, Math.max(1000, rate * 2), Math.max(1000, rate * 60));
    this.stopHeartbeats = heartbeats(this.s, [this.sender]);
    const kafka = createKafka({ brokers: this.s.brokers, clientId: `reach-chaos-load-${this.run}`, logger: silentLogger });
    // The stages' own producer and produce path: a send that failed resets the producer (a
    // kafkajs idempotent producer could stay wedged on refused sequence numbers after a broker restart).
    this.producer = await createProducer(kafka);
  }

  start(rate: number): void {
    this.started = Date.now();
    this.sent = 0;
    this.timer = setInterval(() => {
      const due = Math.floor(((Date.now() - this.started) / 1000) * rate);
      if (due <= this.sent || this.inFlight >= MAX_IN_FLIGHT) return;
      const keys: string[] = [];
      while (this.sent < due) keys.push(`chaos-${this.run}-${++this.sent}`);
      const p = this.send(keys).finally(() => this.pending.delete(p));
      this.pending.add(p);
    }, 10);
  }

  private async send(keys: readonly string[]): Promise<void> {
    this.inFlight++;
    const sentAt = Date.now();
    const batch = keys.map((key) => {
      const id = newMessageId(sentAt);
      const envelope = {
        ...benchEnvelope({
          id,
          traceId: randomBytes(16).toString('hex'),
          now: sentAt,
          capability: this.capability,
          producer: this.sender.agent_id,
          priority: 'NORMAL',
          payload: Buffer.from(JSON.stringify({ key })),
        }),
        idempotency_key: key,
      };
      const record = {
        topic: TOPICS.ingress.name,
        key: id,
        value: this.codec.encode(INGRESS_SUBJECT, envelope),
        headers: { [TOKEN_HEADER]: this.sender.token },
      };
      return { id, key, record };
    });
    try {
      while (Date.now() - sentAt < RETRY_FOR_MS) {
        try {
          await produceAll(
            this.producer,
            batch.map((b) => b.record),
          );
          for (const b of batch) this.ledger.accept(b.id, b.key, sentAt);
          return;
        } catch {
          await new Promise((r) => setTimeout(r, RETRY_EVERY_MS));
        }
      }
      this.ledger.refused += batch.length;
    } finally {
      this.inFlight--;
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.pending]);
    this.stopHeartbeats();
    await this.producer?.disconnect().catch(() => undefined);
  }
}
