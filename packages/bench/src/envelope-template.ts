import type { Envelope, SchemaCodec } from '@reach/envelope';
import { varintLength, writeVarint } from './avro-varint.js';

/**
 * The load generator's records, made cheap: the envelope is Avro-encoded (with the schema
 * registry's framing) once, and each message is a copy of that template with its three
 * per-message fields written in place — message_id and trace_id (fixed-length strings, so their
 * length prefixes never change) and created_at (a varint, the same length for every
 * millisecond of the next decades). The bench's own CPU then stays small next to the stack's,
 * and is not what limits the offered rate.
 */

const ID_SENTINEL = 'msg_ZZZZZZZZZZZZZZZZZZZZZZZZZZ'; // 30 chars, the length of msg_ + ULID
const TRACE_SENTINEL = 'f0e1d2c3b4a5968778695a4b3c2d1e0f'; // 32 hex chars

export interface TemplateFields {
  subject: string;
  capability: string;
  producer: string;
  priority: Envelope['priority'];
  payload: Buffer;
}

export class EnvelopeTemplate {
  private constructor(
    private readonly bytes: Buffer,
    private readonly idAt: number,
    private readonly traceAt: number,
    private readonly createdAt: number,
    private readonly createdLen: number,
  ) {}

  /** Encodes the template and finds where the per-message fields sit; checks a patched copy decodes back. */
  static async build(codec: SchemaCodec, f: TemplateFields, now = Date.now()): Promise<EnvelopeTemplate> {
    const encode = (createdAt: number) => codec.encode(f.subject, templateEnvelope(f, createdAt));
    const a = encode(now);
    const b = encode(now + 1);
    // created_at+1 changes the zig-zag varint's first byte (and no other field): that is where it starts.
    let createdAt = 0;
    while (createdAt < a.length && a[createdAt] === b[createdAt]) createdAt++;
    const idAt = a.indexOf(ID_SENTINEL, 0, 'latin1');
    const traceAt = a.indexOf(TRACE_SENTINEL, 0, 'latin1');
    if (idAt < 0 || traceAt < 0 || createdAt >= a.length) throw new Error('envelope template: per-message fields not found in the encoded record');
    const t = new EnvelopeTemplate(a, idAt, traceAt, createdAt, varintLength(now));
    const probe = { id: 'msg_01JTESTTESTTESTTESTTESTTES', trace: '0123456789abcdef0123456789abcdef', now: now + 12345 };
    const back = await codec.decode<Envelope>(f.subject, t.record(probe.id, probe.trace, probe.now)!);
    if (back.message_id !== probe.id || back.trace_id !== probe.trace || back.created_at !== probe.now || back.capability !== f.capability) {
      throw new Error('envelope template: a patched record does not decode to its fields');
    }
    return t;
  }

  /**
   * The framed record of one message, or undefined when `now` no longer fits the template's
   * created_at length (the caller builds a new template; it does not happen before 2039).
   */
  record(messageId: string, traceId: string, now: number): Buffer | undefined {
    if (varintLength(now) !== this.createdLen || messageId.length !== ID_SENTINEL.length || traceId.length !== TRACE_SENTINEL.length) return undefined;
    const out = Buffer.allocUnsafe(this.bytes.length);
    this.bytes.copy(out);
    out.write(messageId, this.idAt, 'latin1');
    out.write(traceId, this.traceAt, 'latin1');
    writeVarint(out, this.createdAt, now);
    return out;
  }
}

/** A complete envelope for the ingress topic. */
export function benchEnvelope(o: {
  id: string;
  traceId: string;
  now: number;
  capability: string;
  producer: string;
  priority: Envelope['priority'];
  payload: Buffer;
}): Envelope {
  return {
    message_id: o.id,
    message_type: 'task_request',
    capability: o.capability,
    topic: null,
    target_agent_id: null,
    producer: o.producer,
    trace_id: o.traceId,
    request_id: null,
    idempotency_key: null,
    session_id: null,
    correlation_id: null,
    reply_to: null,
    priority: o.priority,
    tags: [],
    retryable: true,
    timeout_ms: null,
    created_at: o.now,
    expire_at: null,
    schema_version: 1,
    content_type: 'application/json',
    payload: o.payload,
    headers: {},
  };
}

function templateEnvelope(f: TemplateFields, now: number): Envelope {
  return benchEnvelope({
    id: ID_SENTINEL,
    traceId: TRACE_SENTINEL,
    now,
    capability: f.capability,
    producer: f.producer,
    priority: f.priority,
    payload: f.payload,
  });
}
