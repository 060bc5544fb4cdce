import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import avro from 'avsc';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ReachError, newMessageId } from '@reach/core';
import { schemaDef, type AgentRecord, type Envelope, type SchemaCodec } from '@reach/envelope';
import { SUBJECTS, frame, makeCodec } from './fake-registry.js';

/**
 * The decoder faces bytes from outside (reach.ingress.v1 is a public contract): whatever they
 * are, decoding must end quickly in either a value of the reader type or a ReachError 4101 /
 * 4102 / 4103 — never a crash, a hang, or an allocation proportional to a length prefix.
 */

const NOW = Date.UTC(2025, 5, 1, 12, 0, 0);
const ALLOWED = new Set([4101, 4102, 4103]);
/** A hang detector, not a benchmark: a decode takes microseconds; the broken one took minutes. */
const MAX_DECODE_MS = 2000;

/** Avro's zig-zag varint encoding of a (possibly huge) non-negative or negative integer. */
function zigzag(n: number): Buffer {
  let f = n >= 0 ? n * 2 : -n * 2 - 1;
  const out: number[] = [];
  do {
    const b = f % 128;
    f = Math.floor(f / 128);
    out.push(f >= 1 ? b | 0x80 : b);
  } while (f >= 1);
  return Buffer.from(out);
}

function envelope(): Envelope {
  return {
    message_id: newMessageId(NOW),
    message_type: 'task_request',
    capability: 'summarize',
    topic: null,
    target_agent_id: null,
    producer: 'agent-p',
    trace_id: 'trace-1',
    request_id: 'r',
    idempotency_key: null,
    session_id: 's',
    correlation_id: null,
    reply_to: null,
    priority: 'LOW',
    tags: ['t1', 't2'],
    retryable: true,
    timeout_ms: 1000,
    created_at: NOW,
    expire_at: NOW + 1,
    schema_version: 1,
    content_type: 'application/json',
    payload: Buffer.from('{"q":"hello"}'),
    headers: { a: 'b', traceparent: 'x' },
  };
}

function agentRecord(): AgentRecord {
  return {
    agent_id: 'agent-1',
    agent_type: 'summarizer',
    status: 'ONLINE',
    revision: 3,
    lease_id: 'lease',
    lease_expires_at: NOW,
    ttl_s: 30,
    endpoints: { ws: null, http: 'http://x', protocol_version: '1' },
    capabilities: [{ name: 'summarize', version: null, mode: 'handle', tags: ['en'], consumption: 'single', scope_json: null, constraints_json: null }],
    metadata: { max_concurrency: 1, region: null, timezone: null, model: null, domain: 'default', weight: 1, extra: { k: 'v' } },
    load: { current_load: 0, queue_length: 0, avg_latency_ms: 0, health: 1 },
    qos: 1,
    registered_at: NOW,
    updated_at: NOW,
  };
}

/** The Avro encoding of the fields of `schema` that come before `field` (a record is its fields, concatenated). */
function prefixBefore(schema: string, field: string, value: object): Buffer {
  const full = JSON.parse(schemaDef(schema).canonical) as { name: string; fields: Array<{ name: string }> };
  const index = full.fields.findIndex((f) => f.name === field);
  expect(index).toBeGreaterThan(0);
  const prefix = avro.Type.forSchema({ ...full, name: `${full.name}Prefix`, fields: full.fields.slice(0, index) } as avro.Schema);
  return prefix.toBuffer(value);
}

/** The Avro encoding of the fields of `schema` that come after `field`. */
function suffixAfter(schema: string, field: string, value: object): Buffer {
  const full = JSON.parse(schemaDef(schema).canonical) as { name: string; fields: Array<{ name: string }> };
  const index = full.fields.findIndex((f) => f.name === field);
  expect(index).toBeGreaterThan(0);
  const suffix = avro.Type.forSchema({ ...full, name: `${full.name}Suffix`, fields: full.fields.slice(index + 1) } as avro.Schema);
  return suffix.toBuffer(value);
}

async function outcome(codec: SchemaCodec, subject: string, bytes: Buffer): Promise<void> {
  const started = performance.now();
  let value: unknown;
  let error: unknown;
  try {
    value = await codec.decode(subject, bytes);
  } catch (err) {
    error = err;
  }
  const ms = performance.now() - started;
  expect(ms, 'decode took too long (hang)').toBeLessThan(MAX_DECODE_MS);
  if (error === undefined) {
    const reader = Object.values(SUBJECTS).find((s) => s.subject === subject)!;
    const bad: string[] = [];
    schemaDef(reader.schema).type.isValid(value, { errorHook: (path, v) => bad.push(`${path.join('.')}=${String(v)}`) });
    expect(bad, `a decoded value must be a valid reader value; bytes ${bytes.toString('hex')}`).toEqual([]);
  } else {
    if (!(error instanceof ReachError) || !ALLOWED.has(error.code)) {
      throw new Error(`decode failed with something other than a ReachError 4101/4102/4103: ${String(error)}`, { cause: error });
    }
  }
}

type Mutation =
  | { kind: 'set'; at: number; byte: number }
  | { kind: 'insert'; at: number; bytes: Uint8Array }
  | { kind: 'delete'; at: number; count: number }
  | { kind: 'truncate'; at: number }
  | { kind: 'varint'; at: number; n: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 12 }) }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), count: fc.integer({ min: 1, max: 16 }) }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  // A length / block count replaced by a huge (or negative) varint: what a corrupt prefix looks like.
  fc.record({
    kind: fc.constant('varint' as const),
    at: fc.nat(),
    n: fc.oneof(fc.integer({ min: -(2 ** 31), max: 2 ** 31 }), fc.constantFrom(2 ** 31 - 1, 2 ** 32, 1e9, 2 ** 52, -(2 ** 40), 2 ** 53 + 2)),
  }),
);

function mutate(original: Buffer, mutations: readonly Mutation[]): Buffer {
  let b = Buffer.from(original);
  for (const m of mutations) {
    // Never touch the 5-byte header here: the header has its own properties below.
    const span = Math.max(1, b.length - 5);
    const at = 5 + (m.at % span);
    switch (m.kind) {
      case 'set':
        if (at < b.length) b[at] = m.byte;
        break;
      case 'insert':
        b = Buffer.concat([b.subarray(0, at), Buffer.from(m.bytes), b.subarray(at)]);
        break;
      case 'delete':
        b = Buffer.concat([b.subarray(0, at), b.subarray(at + m.count)]);
        break;
      case 'truncate':
        b = b.subarray(0, at);
        break;
      case 'varint':
        b = Buffer.concat([b.subarray(0, at), zigzag(m.n), b.subarray(at + 1)]);
        break;
    }
  }
  return b;
}

describe('decoder fuzzing (fast-check)', () => {
  it('random bytes never crash or hang the decoder', async () => {
    const { codec } = await makeCodec();
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 400 }), async (bytes) => {
        await outcome(codec, SUBJECTS.envelope.subject, Buffer.from(bytes));
      }),
      { numRuns: 2000 },
    );
  });

  it('random bodies behind a valid header pointing at a known schema id never crash or hang', async () => {
    const { codec, registry } = await makeCodec();
    // Also an older writer version of the envelope, so the resolver path is fuzzed too.
    const current = JSON.parse(schemaDef('reach.v1.Envelope').canonical) as { fields: Array<{ name: string }> };
    const olderId = registry.register(SUBJECTS.envelope.subject, { ...current, fields: current.fields.filter((f) => f.name !== 'headers') });
    const subjects = Object.values(SUBJECTS).map((s) => s.subject);
    const ids = [...subjects.map((s) => codec.schemaId(s)), olderId];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...subjects), fc.constantFrom(...ids), fc.uint8Array({ minLength: 1, maxLength: 400 }), async (subject, id, body) => {
        await outcome(codec, subject, frame(id, Buffer.from(body)));
      }),
      { numRuns: 3000 },
    );
  });

  it('mutated valid records (flipped, inserted, deleted bytes, corrupt length prefixes) never crash or hang', async () => {
    const { codec, registry } = await makeCodec();
    const current = JSON.parse(schemaDef('reach.v1.Envelope').canonical) as { fields: Array<{ name: string }> };
    const older = { ...current, fields: current.fields.filter((f) => f.name !== 'headers' && f.name !== 'content_type') };
    const olderId = registry.register(SUBJECTS.envelope.subject, older);
    const { headers: _h, content_type: _c, ...oldValue } = envelope();
    const seeds: Array<{ subject: string; bytes: Buffer }> = [
      { subject: SUBJECTS.envelope.subject, bytes: codec.encode(SUBJECTS.envelope.subject, envelope()) },
      { subject: SUBJECTS.envelope.subject, bytes: frame(olderId, avro.Type.forSchema(older as avro.Schema).toBuffer(oldValue)) },
      { subject: SUBJECTS.agents.subject, bytes: codec.encode(SUBJECTS.agents.subject, agentRecord()) },
      {
        subject: SUBJECTS.retry.subject,
        bytes: codec.encode(SUBJECTS.retry.subject, {
          message_id: newMessageId(NOW),
          attempt: 1,
          not_before: NOW,
          code: 3002,
          reason: 'r',
          failed_agent_id: null,
          exclude_agent_ids: ['a', 'b'],
          first_attempt_at: NOW,
          envelope: envelope(),
        }),
      },
    ];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...seeds), fc.array(mutation, { minLength: 1, maxLength: 4 }), async (seed, mutations) => {
        await outcome(codec, seed.subject, mutate(seed.bytes, mutations));
      }),
      { numRuns: 3000 },
    );
  });

  it('any header (magic byte, id) in front of a valid body ends in a value or a typed error', async () => {
    const { codec } = await makeCodec();
    const body = codec.encode(SUBJECTS.envelope.subject, envelope()).subarray(5);
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 5, maxLength: 5 }), async (header) => {
        await outcome(codec, SUBJECTS.envelope.subject, Buffer.concat([Buffer.from(header), body]));
      }),
      { numRuns: 1000 },
    );
  });
});

/**
 * Bug: avsc trusts the block count of an array or map. A record of a few dozen bytes whose
 * `tags` count says 1e9 made `fromBuffer` allocate `new Array(1e9)` and fill it with phantom
 * items read past the end of the buffer (heap out of memory: the consuming process died); the
 * same count on the `headers` map spun for ~30 s (and for ever with a larger count) before
 * reporting a truncated buffer. The codec now walks each body against its writer schema first,
 * bounded by the bytes present, and refuses such a record with 4101.
 *
 * The hostile records are also decoded in a child process with a small heap and a deadline, so
 * that a regression fails this test instead of killing or hanging the test runner.
 */
describe('regression: avsc-unbounded-block-count (huge array/map count from a corrupt prefix → OOM or hang)', () => {
  const hostile = (): Array<{ name: string; subject: string; bytes: Buffer }> => {
    const env = envelope();
    const agent = agentRecord();
    const envId = 0x0a0b0c0d;
    const agentsId = envId + 4; // makeCodec registers subjects in SUBJECTS order
    const tail = Buffer.from([0x02, 0x61]);
    return [
      {
        name: 'Envelope.tags count 1e9',
        subject: SUBJECTS.envelope.subject,
        bytes: frame(envId, Buffer.concat([prefixBefore('reach.v1.Envelope', 'tags', env), zigzag(1e9), tail])),
      },
      {
        name: 'Envelope.tags count 2^31-1',
        subject: SUBJECTS.envelope.subject,
        bytes: frame(envId, Buffer.concat([prefixBefore('reach.v1.Envelope', 'tags', env), zigzag(2 ** 31 - 1), tail])),
      },
      // Negative block count (-n followed by the block's byte size): the other block form.
      {
        name: 'Envelope.tags count -1e9 with size',
        subject: SUBJECTS.envelope.subject,
        bytes: frame(envId, Buffer.concat([prefixBefore('reach.v1.Envelope', 'tags', env), zigzag(-1e9), zigzag(2), tail])),
      },
      {
        name: 'Envelope.headers count 1e9',
        subject: SUBJECTS.envelope.subject,
        bytes: frame(envId, Buffer.concat([prefixBefore('reach.v1.Envelope', 'headers', env), zigzag(1e9), tail])),
      },
      {
        name: 'Envelope.headers count 2^52',
        subject: SUBJECTS.envelope.subject,
        bytes: frame(envId, Buffer.concat([prefixBefore('reach.v1.Envelope', 'headers', env), zigzag(2 ** 52), tail])),
      },
      {
        name: 'AgentRecord.capabilities count 1e9',
        subject: SUBJECTS.agents.subject,
        bytes: frame(agentsId, Buffer.concat([prefixBefore('reach.v1.AgentRecord', 'capabilities', agent), zigzag(1e9), tail])),
      },
    ];
  };

  it('refuses each hostile record with 4101, in-process', async () => {
    const { codec } = await makeCodec();
    expect(codec.schemaId(SUBJECTS.agents.subject)).toBe(0x0a0b0c0d + 4);
    for (const h of hostile()) {
      const started = performance.now();
      let caught: unknown;
      try {
        await codec.decode(h.subject, h.bytes);
      } catch (err) {
        caught = err;
      }
      expect(performance.now() - started, h.name).toBeLessThan(MAX_DECODE_MS);
      expect(caught, h.name).toBeInstanceOf(ReachError);
      expect((caught as ReachError).code, h.name).toBe(4101);
      expect((caught as ReachError).message, h.name).toMatch(/block count/);
    }
  });

  it('refuses each hostile record with 4101 in a separate process (128 MiB heap, 15 s deadline)', async () => {
    const records = hostile();
    const envelopeUrl = pathToFileURL(createRequire(import.meta.url).resolve('@reach/envelope')).href;
    // A separate process, not a worker thread: V8 aborts the whole process on the huge array
    // ("invalid size error"), which no worker resource limit contains.
    const code = `
      const { SchemaCodec } = await import(${JSON.stringify(envelopeUrl)});
      const input = JSON.parse(await new Promise((resolve) => { let s = ''; process.stdin.on('data', (d) => (s += d)); process.stdin.on('end', () => resolve(s)); }));
      let next = 0x0a0b0c0d;
      const ids = new Map();
      const registry = {
        async getRegistryIdBySchema(subject) { if (!ids.has(subject)) ids.set(subject, next++); return ids.get(subject); },
        async getSchema() { throw Object.assign(new Error('not found'), { status: 404 }); },
      };
      const codec = new SchemaCodec(registry, { maxPayloadBytes: 262144 });
      await codec.init(input.subjects);
      const out = [];
      for (const r of input.records) {
        try { await codec.decode(r.subject, Buffer.from(r.hex, 'hex')); out.push('decoded'); }
        catch (e) { out.push(e && e.code !== undefined ? e.code : String(e)); }
      }
      process.stdout.write(JSON.stringify(out));
    `;
    const input = JSON.stringify({ subjects: Object.values(SUBJECTS), records: records.map((r) => ({ subject: r.subject, hex: r.bytes.toString('hex') })) });
    const result = await new Promise<{ status: number | null; signal: string | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, ['--max-old-space-size=128', '--input-type=module', '-e', code], { stdio: ['pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      child.on('close', (status, signal) => {
        clearTimeout(timer);
        resolve({ status, signal, stdout, stderr });
      });
      child.stdin.end(input);
    });
    expect(
      result.signal,
      `the decoding process was killed by ${result.signal} (SIGKILL: still busy after 15 s; SIGABRT: V8 aborted on the allocation); stderr: ${result.stderr.slice(-500)}`,
    ).toBeNull();
    expect(result.status, `the decoding process died (out of memory?); stderr: ${result.stderr.slice(-500)}`).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual(records.map(() => 4101));
  });
});

/**
 * Bug: avsc reads an Avro `int` with its 64-bit varint reader and never checks the range, so a
 * record whose `timeout_ms` (or `schema_version`, `attempt`, `code`) carries a 6-byte varint
 * decoded into an "int" of 2^40 — a value avsc's own encoder refuses. Such an envelope passed
 * decoding and validation at ingress and then failed with 4101 when the router re-encoded it
 * into a RoutedDelivery, one hop later. Found by the mutation fuzz above. The codec's guard now
 * refuses an out-of-range int at decode time.
 */
describe('regression: avsc-int-read-as-long (an int field decoded outside 32 bits)', () => {
  it('refuses an Envelope whose timeout_ms / schema_version does not fit an int, with 4101', async () => {
    const { codec } = await makeCodec();
    const id = codec.schemaId(SUBJECTS.envelope.subject);
    const env = envelope();
    for (const n of [2 ** 31, 2 ** 40, -(2 ** 31) - 1]) {
      // timeout_ms is ["null","int"]: branch 1, then the int.
      const timeout = frame(
        id,
        Buffer.concat([prefixBefore('reach.v1.Envelope', 'timeout_ms', env), zigzag(1), zigzag(n), suffixAfter('reach.v1.Envelope', 'timeout_ms', env)]),
      );
      const version = frame(
        id,
        Buffer.concat([prefixBefore('reach.v1.Envelope', 'schema_version', env), zigzag(n), suffixAfter('reach.v1.Envelope', 'schema_version', env)]),
      );
      for (const bytes of [timeout, version]) {
        let caught: unknown;
        try {
          await codec.decode(SUBJECTS.envelope.subject, bytes);
        } catch (err) {
          caught = err;
        }
        expect(caught).toBeInstanceOf(ReachError);
        expect((caught as ReachError).code).toBe(4101);
        expect((caught as ReachError).message).toMatch(/out of the 32-bit range/);
      }
    }
    // The extremes of the int range are fine, and the crafted frames match the real encoding.
    for (const n of [2 ** 31 - 1, -(2 ** 31)]) {
      const bytes = frame(
        id,
        Buffer.concat([prefixBefore('reach.v1.Envelope', 'timeout_ms', env), zigzag(1), zigzag(n), suffixAfter('reach.v1.Envelope', 'timeout_ms', env)]),
      );
      expect(bytes.equals(codec.encode(SUBJECTS.envelope.subject, { ...env, timeout_ms: n }))).toBe(true);
      expect((await codec.decode<Envelope>(SUBJECTS.envelope.subject, bytes)).timeout_ms).toBe(n);
    }
  });
});
