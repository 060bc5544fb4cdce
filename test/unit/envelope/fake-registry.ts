import avro from 'avsc';
import type { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { SchemaCodec, schemaDef, type CodecOptions } from '@reach/envelope';

/**
 * An in-memory stand-in for the two calls SchemaCodec makes on @kafkajs/confluent-schema-registry:
 * `getRegistryIdBySchema(subject, { schema })` (the id of an exact schema under a subject) and
 * `getSchema(id)` (the writer schema of an id, as an avsc Type). Unknown subjects / ids fail the
 * way the real client does: an error carrying `status: 404`. `down` simulates an unreachable
 * registry (an error without an HTTP status). This is only for the pure codec logic; the real
 * registry is exercised by the integration suite.
 */
export class FakeRegistry {
  /** Ids start high and use every byte, so the big-endian framing is visible. */
  private nextId = 0x0a0b0c0d;
  private readonly bySubject = new Map<string, number>();
  private readonly byId = new Map<number, avro.Type>();
  readonly getSchemaCalls: number[] = [];
  readonly lookupCalls: string[] = [];
  down = false;

  private static key(subject: string, schema: unknown): string {
    return `${subject}\u0000${JSON.stringify(avro.Type.forSchema(schema as avro.Schema).schema())}`;
  }

  /** Registers a schema (JSON object or string) under a subject; returns its id. */
  register(subject: string, schema: unknown): number {
    const parsed = typeof schema === 'string' ? (JSON.parse(schema) as unknown) : schema;
    const key = FakeRegistry.key(subject, parsed);
    const known = this.bySubject.get(key);
    if (known !== undefined) return known;
    const id = this.nextId++;
    this.bySubject.set(key, id);
    this.byId.set(id, avro.Type.forSchema(parsed as avro.Schema));
    return id;
  }

  private unreachable(): Error {
    return Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8081'), { code: 'ECONNREFUSED' });
  }

  async getRegistryIdBySchema(subject: string, opts: { schema: string }): Promise<number> {
    this.lookupCalls.push(subject);
    if (this.down) throw this.unreachable();
    const id = this.bySubject.get(FakeRegistry.key(subject, JSON.parse(opts.schema)));
    if (id === undefined) throw Object.assign(new Error(`Subject '${subject}' not found.`), { status: 404 });
    return id;
  }

  async getSchema(id: number): Promise<avro.Type> {
    this.getSchemaCalls.push(id);
    if (this.down) throw this.unreachable();
    const type = this.byId.get(id);
    if (!type) throw Object.assign(new Error(`Schema ${id} not found`), { status: 404 });
    return type;
  }

  asClient(): SchemaRegistry {
    return this as unknown as SchemaRegistry;
  }
}

export const SUBJECTS = {
  envelope: { subject: 'reach.ingress.v1-value', schema: 'reach.v1.Envelope' },
  routed: { subject: 'reach.routed.v1-value', schema: 'reach.v1.RoutedDelivery' },
  status: { subject: 'reach.status.v1-value', schema: 'reach.v1.StatusEvent' },
  dlq: { subject: 'reach.dlq.v1-value', schema: 'reach.v1.DeadLetter' },
  agents: { subject: 'reach.agents.v1-value', schema: 'reach.v1.AgentRecord' },
  presence: { subject: 'reach.presence.v1-value', schema: 'reach.v1.Presence' },
  retry: { subject: 'reach.retry.v1-value', schema: 'reach.v1.RetryRequest' },
  // last: the fuzz tests pin the ids of the ones above
  statusBatches: { subject: 'reach.status-batches.v1-value', schema: 'reach.v1.StatusBatch' },
} as const;

/** A codec bound to every subject above (and `extra` ones), over a fresh FakeRegistry that knows each schema. */
export async function makeCodec(
  options: CodecOptions = { maxPayloadBytes: 256 * 1024 },
  extra: ReadonlyArray<{ subject: string; schema: string }> = [],
): Promise<{ codec: SchemaCodec; registry: FakeRegistry }> {
  const registry = new FakeRegistry();
  const bindings = [...Object.values(SUBJECTS), ...extra];
  for (const { subject, schema } of bindings) registry.register(subject, schemaDef(schema).canonical);
  const codec = new SchemaCodec(registry.asClient(), options);
  await codec.init(bindings);
  return { codec, registry };
}

/** Confluent framing by hand: magic 0, 4-byte big-endian id, body. */
export function frame(id: number, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(0, 0);
  head.writeUInt32BE(id, 1);
  return Buffer.concat([head, body]);
}
