import type avro from 'avsc';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import { ReachError } from '@reach/core';
import { registryConnection, schemaRegistryClient, type RegistryTls } from './registry-client.js';
import { schemaDef, type SchemaDef } from './schemas.js';

/** Confluent wire format: magic byte 0, 4-byte big-endian schema id, Avro body. */
export const MAGIC_BYTE = 0;
export const HEADER_BYTES = 5;

export interface CodecOptions {
  /** Payload limit (bytes) applied to every `payload` field on encode and decode. */
  maxPayloadBytes: number;
}

/** How to read the records of one writer schema id into the reader type. */
interface WriterPlan {
  /** null when the writer is the reader itself. */
  readonly resolver: avro.Resolver | null;
  /** Bounded structural pre-check of a body written with this writer schema (see compileGuard). */
  readonly guard: BodyGuard;
}

interface Reader {
  readonly def: SchemaDef;
  /** The id of the exact reader schema in the registry: what encode writes. */
  readonly id: number;
  /** Read plans for each writer schema id seen so far. */
  readonly writers: Map<number, WriterPlan>;
}

/**
 * avsc trusts the block counts of arrays and maps: a corrupt or hostile count (a few bytes,
 * e.g. 1e9 items) makes `fromBuffer` pre-allocate and fill an array of that length, reading
 * past the end of the buffer one phantom item at a time (out of memory, process crash), or
 * spin for minutes over a map of phantom entries — long before it reports the truncation.
 * Every record of the ingress topic comes from outside, so each body is first walked against
 * its writer schema by this guard, in time linear in its length: a block count larger than the
 * bytes left could possibly hold, a length past the end, an out-of-range union or enum index,
 * an `int` outside 32 bits, or an over-long varint is rejected before avsc sees the record.
 */
type BodyGuard = (buf: Buffer, pos: number) => number;

class GuardError extends Error {}

/** Block items of a type whose encoding can be empty (null, empty record) allowed per block. */
const MAX_EMPTY_ITEMS_PER_BLOCK = 4096;

function readVarint(buf: Buffer, at: { pos: number }): number {
  let f = 0;
  let mul = 1;
  let b: number;
  let bytes = 0;
  do {
    if (at.pos >= buf.length) throw new GuardError('truncated varint');
    if (++bytes > 10) throw new GuardError('varint longer than 10 bytes');
    b = buf[at.pos++]!;
    f += (b & 0x7f) * mul;
    mul *= 128;
  } while (b & 0x80);
  return f % 2 ? -(f + 1) / 2 : f / 2;
}

function skipBytes(buf: Buffer, at: { pos: number }, n: number): void {
  if (!(n >= 0) || n > buf.length - at.pos) throw new GuardError(`length ${n} runs past the end of the record`);
  at.pos += n;
}

interface AnyType {
  readonly typeName: string;
  readonly fields?: ReadonlyArray<{ readonly type: AnyType }>;
  readonly types?: readonly AnyType[];
  readonly itemsType?: AnyType;
  readonly valuesType?: AnyType;
  readonly symbols?: readonly string[];
  readonly size?: number;
  readonly underlyingType?: AnyType;
}

/** Smallest number of bytes any value of the type encodes to (recursion counts as 0). */
function minEncodedSize(t: AnyType, seen: Set<AnyType> = new Set()): number {
  if (seen.has(t)) return 0;
  switch (t.typeName) {
    case 'null':
      return 0;
    case 'boolean':
    case 'int':
    case 'long':
    case 'abstract:long':
    case 'enum':
    case 'string':
    case 'bytes':
    case 'array':
    case 'map':
    case 'union:unwrapped':
    case 'union:wrapped':
      return 1;
    case 'float':
      return 4;
    case 'double':
      return 8;
    case 'fixed':
      return t.size ?? 0;
    case 'record':
    case 'error': {
      seen.add(t);
      const n = (t.fields ?? []).reduce((sum, f) => sum + minEncodedSize(f.type, seen), 0);
      seen.delete(t);
      return n;
    }
    default:
      if (t.typeName.startsWith('logical:') && t.underlyingType) return minEncodedSize(t.underlyingType, seen);
      return 0;
  }
}

function compileGuard(root: avro.Type): BodyGuard {
  type Walk = (buf: Buffer, at: { pos: number }) => void;
  const memo = new Map<AnyType, Walk>();
  const build = (t: AnyType): Walk => {
    const known = memo.get(t);
    if (known) return known;
    let impl: Walk = () => undefined;
    const walk: Walk = (buf, at) => impl(buf, at);
    memo.set(t, walk); // before building children: named types may be recursive
    impl = make(t);
    return walk;
  };
  const blocks =
    (itemMin: number, item: Walk): Walk =>
    (buf, at) => {
      for (;;) {
        let n = readVarint(buf, at);
        if (n === 0) return;
        if (n < 0) {
          n = -n;
          const size = readVarint(buf, at);
          if (size < 0 || size > buf.length - at.pos) throw new GuardError(`block size ${size} runs past the end of the record`);
        }
        const left = buf.length - at.pos;
        if (itemMin > 0 ? n > left / itemMin : n > MAX_EMPTY_ITEMS_PER_BLOCK) {
          throw new GuardError(`block count ${n} is larger than the ${left} bytes left can hold`);
        }
        for (let i = 0; i < n; i++) item(buf, at);
      }
    };
  const make = (t: AnyType): Walk => {
    switch (t.typeName) {
      case 'null':
        return () => undefined;
      case 'boolean':
        return (buf, at) => skipBytes(buf, at, 1);
      case 'int':
        // avsc reads an int as a long: without this, a 5+ byte varint decodes into an `int`
        // field the encoder then refuses (a record accepted here would fail at the next hop).
        return (buf, at) => {
          const n = readVarint(buf, at);
          if (n < -0x80000000 || n > 0x7fffffff) throw new GuardError(`int ${n} is out of the 32-bit range`);
        };
      case 'long':
      case 'abstract:long':
        return (buf, at) => void readVarint(buf, at);
      case 'float':
        return (buf, at) => skipBytes(buf, at, 4);
      case 'double':
        return (buf, at) => skipBytes(buf, at, 8);
      case 'string':
      case 'bytes':
        return (buf, at) => skipBytes(buf, at, readVarint(buf, at));
      case 'fixed': {
        const size = t.size ?? 0;
        return (buf, at) => skipBytes(buf, at, size);
      }
      case 'enum': {
        const count = t.symbols?.length ?? 0;
        return (buf, at) => {
          const i = readVarint(buf, at);
          if (!(i >= 0 && i < count)) throw new GuardError(`enum index ${i} out of range`);
        };
      }
      case 'union:unwrapped':
      case 'union:wrapped': {
        const branches = (t.types ?? []).map(build);
        return (buf, at) => {
          const i = readVarint(buf, at);
          const branch = i >= 0 && Number.isInteger(i) ? branches[i] : undefined;
          if (!branch) throw new GuardError(`union index ${i} out of range`);
          branch(buf, at);
        };
      }
      case 'record':
      case 'error': {
        const fields = (t.fields ?? []).map((f) => build(f.type));
        return (buf, at) => {
          for (const f of fields) f(buf, at);
        };
      }
      case 'array': {
        const items = t.itemsType!;
        return blocks(minEncodedSize(items), build(items));
      }
      case 'map': {
        const values = build(t.valuesType!);
        return blocks(1 + minEncodedSize(t.valuesType!), (buf, at) => {
          skipBytes(buf, at, readVarint(buf, at));
          values(buf, at);
        });
      }
      default:
        if (t.typeName.startsWith('logical:') && t.underlyingType) return make(t.underlyingType);
        throw new Error(`cannot guard Avro type ${t.typeName}`);
    }
  };
  const walk = build(root as unknown as AnyType);
  return (buf, pos) => {
    const at = { pos };
    walk(buf, at);
    return at.pos;
  };
}

/** How long an unknown schema id is remembered, so garbage cannot make us ask the registry per record. */
const UNKNOWN_ID_TTL_MS = 30_000;

function hasPayload(value: unknown): value is { payload: Buffer } {
  return typeof value === 'object' && value !== null && Buffer.isBuffer((value as { payload?: unknown }).payload);
}

function isNotFound(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { status?: unknown }).status === 404;
}

/**
 * The largest framed record decode() reads. A record holds at most one payload plus a few KiB
 * of fields; anything far larger is a payload over the limit, refused before spending time
 * decoding it. The payload may come as base64 text: a status event carries a handler's binary
 * result as `payload_b64` in its detail, 4/3 of the bytes (256 KiB of bytes is 349,528
 * characters). A bound of bytes + 64 KiB refused binary results over ~246,000 bytes, and the
 * messages that carried them were never recorded DELIVERED.
 */
export function maxRecordBytes(maxPayloadBytes: number): number {
  return Math.ceil(maxPayloadBytes / 3) * 4 + 64 * 1024;
}

/**
 * Encodes and decodes the records of every Agent-Reach topic with Confluent framing.
 *
 * Services never register schemas: `init` looks up the id of each schema this build was
 * compiled with (`POST /subjects/{subject}` through the registry client) and fails loudly when
 * the deploy step did not register it. Decoding reads any writer version the registry knows
 * and resolves it into this build's reader schema (older writers keep working).
 */
export class SchemaCodec {
  private readonly readers = new Map<string, Reader>();
  private readonly unknownIds = new Map<number, number>();

  constructor(
    private readonly registry: SchemaRegistry,
    private readonly options: CodecOptions,
  ) {}

  /** `tls.ca`: extra CAs for an https registry (REACH_CA_FILE); basic auth comes from the URL's userinfo. */
  static connect(url: string, options: CodecOptions, tls: RegistryTls = {}): SchemaCodec {
    return new SchemaCodec(schemaRegistryClient(registryConnection(url, tls)), options);
  }

  /** Looks up the registry id of each (subject, schema name) pair. Must run before encode/decode. */
  async init(bindings: ReadonlyArray<{ subject: string; schema: string }>): Promise<void> {
    for (const { subject, schema } of bindings) {
      const def = schemaDef(schema);
      let id: number;
      try {
        id = await this.registry.getRegistryIdBySchema(subject, { type: 'AVRO' as never, schema: def.canonical } as never);
      } catch (err) {
        if (isNotFound(err) || (err instanceof Error && /404|not found/i.test(err.message))) {
          throw new ReachError(
            'UNKNOWN_SCHEMA',
            `schema ${schema} is not registered under subject ${subject}; run the deploy step (reach up / reach schemas register) first`,
            { cause: err, retryable: false },
          );
        }
        throw new ReachError('DEPENDENCY_UNAVAILABLE', `schema registry unavailable while looking up ${subject}: ${(err as Error).message}`, { cause: err });
      }
      this.readers.set(subject, { def, id, writers: new Map([[id, { resolver: null, guard: compileGuard(def.type) }]]) });
    }
  }

  private reader(subject: string): Reader {
    const r = this.readers.get(subject);
    if (!r) throw new Error(`codec has no schema bound to subject ${subject}; pass it to init()`);
    return r;
  }

  schemaId(subject: string): number {
    return this.reader(subject).id;
  }

  private checkPayload(value: unknown): void {
    if (hasPayload(value) && value.payload.length > this.options.maxPayloadBytes) {
      throw new ReachError('PAYLOAD_TOO_LARGE', `payload is ${value.payload.length} bytes; the limit is ${this.options.maxPayloadBytes}`);
    }
    const env = (value as { envelope?: unknown } | null)?.envelope;
    if (env !== undefined && env !== null) this.checkPayload(env);
  }

  /** Encodes a value with the subject's reader schema. Throws 4101 when the value does not fit it. */
  encode<T>(subject: string, value: T): Buffer {
    const { def, id } = this.reader(subject);
    this.checkPayload(value);
    let body: Buffer;
    try {
      body = def.type.toBuffer(value);
    } catch (err) {
      const paths: string[] = [];
      def.type.isValid(value, { errorHook: (path) => paths.push(path.join('.')) });
      throw new ReachError('INVALID_ENVELOPE', `value does not match ${def.name}${paths.length ? ` at ${paths.join(', ')}` : ''}`, { cause: err });
    }
    const out = Buffer.allocUnsafe(HEADER_BYTES + body.length);
    out.writeUInt8(MAGIC_BYTE, 0);
    out.writeUInt32BE(id, 1);
    body.copy(out, HEADER_BYTES);
    return out;
  }

  /**
   * Decodes a framed record into the subject's reader type. Errors are typed: 4101 for
   * truncated or garbage bytes, 4103 for a schema id the registry does not know (or one that
   * cannot be read as this subject's type), 4102 for an oversized payload, 5002 when the
   * registry cannot be reached (retryable: the record is fine, the dependency is not).
   */
  async decode<T>(subject: string, buf: Buffer | null | undefined): Promise<T> {
    const reader = this.reader(subject);
    if (!buf || buf.length < HEADER_BYTES + 1) {
      throw new ReachError('INVALID_ENVELOPE', `record of ${buf?.length ?? 0} bytes is too short for a framed Avro record`);
    }
    if (buf[0] !== MAGIC_BYTE) {
      throw new ReachError('INVALID_ENVELOPE', `record starts with byte ${buf[0]}, not the Confluent magic byte 0`);
    }
    if (buf.length > maxRecordBytes(this.options.maxPayloadBytes)) {
      throw new ReachError('PAYLOAD_TOO_LARGE', `record of ${buf.length} bytes exceeds the payload limit of ${this.options.maxPayloadBytes}`);
    }
    const id = buf.readUInt32BE(1);
    const { resolver, guard } = reader.writers.get(id) ?? (await this.writerPlan(reader, id));
    const body = buf.subarray(HEADER_BYTES);
    let value: T;
    try {
      if (guard(body, 0) !== body.length) throw new GuardError('trailing data');
      value = (resolver ? reader.def.type.fromBuffer(body, resolver) : reader.def.type.fromBuffer(body)) as T;
    } catch (err) {
      throw new ReachError('INVALID_ENVELOPE', `record body is not a valid ${reader.def.name} (schema id ${id}): ${(err as Error).message}`, { cause: err });
    }
    this.checkPayload(value);
    return value;
  }

  private async writerPlan(reader: Reader, id: number): Promise<WriterPlan> {
    const unknownUntil = this.unknownIds.get(id);
    if (unknownUntil !== undefined && unknownUntil > Date.now()) {
      throw new ReachError('UNKNOWN_SCHEMA', `schema id ${id} is unknown to the registry`);
    }
    let writer: avro.Type;
    try {
      writer = (await this.registry.getSchema(id)) as unknown as avro.Type;
    } catch (err) {
      if (isNotFound(err)) {
        if (this.unknownIds.size > 10_000) this.unknownIds.clear();
        this.unknownIds.set(id, Date.now() + UNKNOWN_ID_TTL_MS);
        throw new ReachError('UNKNOWN_SCHEMA', `schema id ${id} is unknown to the registry`, { cause: err });
      }
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `schema registry unavailable while fetching schema id ${id}: ${(err as Error).message}`, { cause: err });
    }
    let plan: WriterPlan;
    try {
      plan = { resolver: reader.def.type.createResolver(writer), guard: compileGuard(writer) };
    } catch (err) {
      throw new ReachError('UNKNOWN_SCHEMA', `schema id ${id} cannot be read as ${reader.def.name}: ${(err as Error).message}`, { cause: err });
    }
    reader.writers.set(id, plan);
    return plan;
  }
}
