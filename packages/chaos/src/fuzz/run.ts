import WebSocket from 'ws';
import { silentLogger, ERROR, RETRY_AFTER_HEADER, TOKEN_HEADER } from '@reach/core';
import { forEachLimit, heartbeats, raiseQuota, register, type Registered, type StackEndpoints } from '@reach/bench';
import { SchemaCodec } from '@reach/envelope';
import { createKafka, createProducer, produceAll, TOPICS, valueSubject, type OutRecord } from '@reach/kafka';
import { localStack } from '@reach/sdk/testing';
import { agentFrame, answerFor, httpCase, kafkaEnvelope, type Answer } from './cases.js';
import { Random } from './random.js';

/**
 * `pnpm fuzz`: generated inputs against the running stack, on every public way in — HTTP
 * submissions (bodies, headers, query), Kafka ingress records (Avro-valid envelopes with hostile
 * values), agent frames on the WebSocket, and the result frames an agent answers deliveries with.
 * It then checks what must hold whatever came in: no 5xx but 503, every accepted message
 * terminal, every result stored as sent (or refused to the agent with an error frame), every
 * service ready and a plain message still delivered at the end.
 */
export interface FuzzOptions {
  cases: number;
  seed: number;
  /** How long accepted messages get to reach a terminal state after the last case. */
  settleMs: number;
}

export interface SurfaceCount {
  surface: string;
  cases: number;
  accepted: number;
  /** Answers by HTTP status or error code, e.g. `400/4101`, `413/4102`, `close 4013`. */
  outcomes: Record<string, number>;
}

export interface FuzzReport {
  kind: 'reach-fuzz';
  options: FuzzOptions;
  seconds: number;
  surfaces: SurfaceCount[];
  /** Accepted messages (HTTP and Kafka) and how many reached DELIVERED / REJECTED / DEAD. */
  messages: { accepted: number; terminal: number; notTerminal: string[]; byState: Record<string, number> };
  /** Results answered with a result frame: stored exactly as sent, refused with an error frame, or changed (must be 0). */
  results: { sent: number; intact: number; refused: number; changed: string[]; missing: string[] };
  /** 5xx answers other than 503 (must be 0). */
  serverErrors: string[];
  servicesReady: Record<string, boolean>;
  canary: string;
  ok: boolean;
}

const TERMINAL = new Set(['DELIVERED', 'REJECTED', 'DEAD']);
const INGRESS_SUBJECT = valueSubject(TOPICS.ingress.name);
/** How long after its last record is sent a Kafka case may take to show in the read model. */
const KAFKA_SEEN_MS = 20_000;

const bump = (m: Record<string, number>, k: string) => void (m[k] = (m[k] ?? 0) + 1);

/** JSON with sorted keys: the read model may store an object's keys in another order. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

export async function runFuzz(o: FuzzOptions, progress: (line: string) => void = () => undefined): Promise<FuzzReport> {
  const started = Date.now();
  const stack = localStack();
  if (!stack.adminToken) throw new Error('no admin token: set REACH_ADMIN_TOKEN or run `reach up` first');
  const s: StackEndpoints = { registryUrl: stack.registryUrl, ingressUrl: stack.ingressUrl, wsUrl: stack.dispatcherUrl, adminToken: stack.adminToken };
  const r = new Random(o.seed);
  const run = `${o.seed.toString(36)}${Date.now().toString(36)}`;
  const capability = `fuzz_${run}`;
  const producer = await register(s, { agent_id: `fuzz.producer.${run}`, agent_type: 'fuzz', capabilities: [], metadata: { max_concurrency: 1 }, ttl_s: 60 });
  progress(await raiseQuota(s, producer.agent_id, 100_000, 100_000));
  const responder = await register(s, {
    agent_id: `fuzz.responder.${run}`,
    agent_type: 'fuzz',
    endpoints: { ws: s.wsUrl },
    capabilities: [{ name: capability, mode: 'handle' }],
    metadata: { max_concurrency: 512 },
    ttl_s: 60,
  });
  const framer = await register(s, {
    agent_id: `fuzz.frames.${run}`,
    agent_type: 'fuzz',
    endpoints: { ws: s.wsUrl },
    capabilities: [{ name: `fuzz_frames_${run}`, mode: 'handle' }],
    metadata: { max_concurrency: 1 },
    ttl_s: 60,
  });
  // The canary's own healthy agent: the responder answers with random rejects and silences, so
  // its circuit may well be open by the end (it was, once 16,000 of its deliveries came back).
  const canaryCapability = `fuzz_canary_${run}`;
  const canaryAgent = await register(s, {
    agent_id: `fuzz.canary.${run}`,
    agent_type: 'fuzz',
    endpoints: { ws: s.wsUrl },
    capabilities: [{ name: canaryCapability, mode: 'handle' }],
    metadata: { max_concurrency: 4 },
    ttl_s: 60,
  });
  const stopHeartbeats = heartbeats(s, [producer, responder, framer, canaryAgent]);
  const serverErrors: string[] = [];
  const accepted = new Set<string>();
  const answers = new Map<string, Answer>();
  const responderErrors: Record<string, number> = {};
  const responderSocket = await respond(s, responder, new Random(o.seed + 1), answers, responderErrors);
  // (it acks a canary payload; nothing else is sent to it)
  const canarySocket = await respond(s, canaryAgent, new Random(o.seed + 3), new Map(), {});

  const nHttp = Math.round(o.cases * 0.55);
  const nKafka = Math.round(o.cases * 0.2);
  const nFrames = o.cases - nHttp - nKafka;

  progress(`${nHttp} HTTP submissions…`);
  const http: SurfaceCount = { surface: 'HTTP POST /v1/messages', cases: nHttp, accepted: 0, outcomes: {} };
  // Cases with a bad or missing token go last: past REACH_AUTH_FAILURE_LIMIT failures a minute
  // the ingress answers every request from this address 429 (brute-force protection), which
  // made 49,843 of 55,000 cases refusals of the address instead of checks of their input.
  const httpCases = Array.from({ length: nHttp }, () => ({
    ...httpCase(r, capability),
    token: r.chance(0.03) ? r.pick(['', 'garbage', s.adminToken.slice(0, 10)]) : producer.token,
  }));
  httpCases.sort((a, b) => Number(a.token !== producer.token) - Number(b.token !== producer.token));
  await forEachLimit(httpCases, 24, async (c) => {
    const token = c.token;
    const res = await fetch(`${s.ingressUrl}/v1/messages${c.query}`, {
      method: 'POST',
      headers: { ...c.headers, ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: c.body,
    }).catch((err: unknown) => err as Error);
    if (res instanceof Error) {
      serverErrors.push(`HTTP: ${res.message}`);
      return;
    }
    const text = await res.text();
    let body: { message_id?: string; error?: { code?: number } } = {};
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      /* counted by status alone */
    }
    bump(http.outcomes, `${res.status}${body.error?.code ? `/${body.error.code}` : ''}`);
    // 503: a dependency away (retry). With ?wait_ms= the answer is the message's own outcome: its failure code's status (502 for
    // 3004 RETRIES_EXHAUSTED, 504 for 3002/3005) is the contract answer, not a server error.
    const outcomeOfWait = c.query !== '' && (body.error?.code ?? 0) >= ERROR.CIRCUIT_OPEN && (body.error?.code ?? 0) <= ERROR.EXPIRED;
    if (res.status >= 500 && res.status !== 503 && !outcomeOfWait)
      serverErrors.push(`HTTP ${res.status}: ${text.slice(0, 200)} for ${String(c.body).slice(0, 200)}`);
    if ((res.status === 200 || res.status === 202) && body.message_id) {
      http.accepted++;
      accepted.add(body.message_id);
    }
  });

  progress(`${nKafka} Kafka ingress records…`);
  const kafkaSurface: SurfaceCount = { surface: 'Kafka reach.ingress.v1', cases: nKafka, accepted: 0, outcomes: {} };
  const codec = SchemaCodec.connect(stack.schemaRegistryUrl, { maxPayloadBytes: 1 << 20 });
  await codec.init([{ subject: INGRESS_SUBJECT, schema: 'reach.v1.Envelope' }]);
  const kafka = createKafka({ brokers: (process.env.REACH_KAFKA_BROKERS ?? '127.0.0.1:9092').split(','), clientId: `reach-fuzz-${run}`, logger: silentLogger });
  const kafkaProducer = await createProducer(kafka);
  const kafkaIds: string[] = [];
  for (let done = 0; done < nKafka; ) {
    const batch: OutRecord[] = [];
    for (let i = 0; i < 100 && done < nKafka; i++, done++) {
      const env = kafkaEnvelope(r, producer.agent_id, capability);
      let value: Buffer;
      try {
        value = codec.encode(INGRESS_SUBJECT, env as never);
        bump(kafkaSurface.outcomes, 'framed');
      } catch {
        value = Buffer.concat([
          Buffer.from([0, 0, 0, 0, 1]),
          Buffer.from(JSON.stringify(env, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString('base64') : v))),
        ]);
        bump(kafkaSurface.outcomes, 'not encodable: sent as bad Avro');
      }
      if (typeof env.message_id === 'string' && env.message_id.startsWith('msg_')) kafkaIds.push(env.message_id);
      batch.push({ topic: TOPICS.ingress.name, key: String(env.message_id), value, headers: { [TOKEN_HEADER]: r.chance(0.03) ? 'garbage' : producer.token } });
    }
    await produceAll(kafkaProducer, batch);
  }

  const kafkaSentAt = Date.now();

  progress(`${nFrames} agent frames…`);
  const frames: SurfaceCount = { surface: 'WebSocket agent frames', cases: nFrames, accepted: 0, outcomes: {} };
  await fuzzFrames(s, framer, new Random(o.seed + 2), nFrames, frames);

  progress(`waiting up to ${Math.round(o.settleMs / 1000)} s for accepted messages to end…`);
  // Kafka records the ingress accepted reach the read model (refused ones do not: DLQ and a
  // receipt), a moment after ingress and tracker consumed them: looked for until they all are,
  // or KAFKA_SEEN_MS after the last one was sent.
  // (From now, not from the last send: the frames phase in between can outlast the window, and
  // then no Kafka case was looked for at all — 0 accepted of 20,000 in one 100,000-case run.)
  const seenUntil = Math.max(kafkaSentAt, Date.now()) + KAFKA_SEEN_MS;
  let unseen = kafkaIds;
  while (unseen.length > 0 && Date.now() < seenUntil) {
    const still: string[] = [];
    await forEachLimit(unseen, 24, async (id) => {
      if ((await statusOf(s, id)) !== undefined) {
        kafkaSurface.accepted++;
        accepted.add(id);
      } else still.push(id);
    });
    unseen = still;
    await new Promise((res) => setTimeout(res, 1_000));
  }
  const byState: Record<string, number> = {};
  const states = new Map<string, { status: string; result?: unknown }>();
  const deadline = Date.now() + o.settleMs;
  let open = [...accepted];
  while (open.length > 0 && Date.now() < deadline) {
    const still: string[] = [];
    await forEachLimit(open, 24, async (id) => {
      const st = await statusOf(s, id);
      if (st && TERMINAL.has(st.status)) states.set(id, st);
      else still.push(id);
    });
    open = still;
    if (open.length > 0) await new Promise((res) => setTimeout(res, 1_000));
  }
  for (const st of states.values()) bump(byState, st.status);

  // Results: stored as sent, or the frame refused to the agent (an error frame), never changed.
  const results = { sent: 0, intact: 0, refused: 0, changed: [] as string[], missing: [] as string[] };
  for (const [id, a] of answers) {
    if (a.kind !== 'result' && a.kind !== 'result-b64') continue;
    const st = states.get(id);
    if (!st || st.status !== 'DELIVERED') continue;
    results.sent++;
    const want = a.kind === 'result' ? { status: a.status, payload: a.payload } : { status: a.status, payload_b64: a.bytes.toString('base64') };
    if (st.result === undefined) results.missing.push(id);
    else if (canonical(st.result) === canonical(want)) results.intact++;
    else results.changed.push(`${id}: sent ${canonical(want).slice(0, 120)} stored ${canonical(st.result).slice(0, 120)}`);
  }
  const refusedFrames = Object.entries(responderErrors).reduce((n, [, v]) => n + v, 0);
  results.refused = Math.min(results.missing.length, refusedFrames);

  const servicesReady: Record<string, boolean> = {};
  for (const [name, url] of Object.entries(serviceUrls())) {
    servicesReady[name] = await fetch(`${url}/readyz`).then(
      (res) => res.ok,
      () => false,
    );
  }
  const canary = await canaryMessage(s, producer, canaryCapability);
  stopHeartbeats();
  responderSocket.stop();
  canarySocket.stop();
  await kafkaProducer.disconnect();

  const surfaces = [
    http,
    kafkaSurface,
    frames,
    { surface: 'result frames (the responder)', cases: answers.size, accepted: results.intact, outcomes: responderErrors },
  ];
  const ok =
    serverErrors.length === 0 &&
    open.length === 0 &&
    results.changed.length === 0 &&
    results.missing.length <= refusedFrames &&
    Object.values(servicesReady).every(Boolean) &&
    canary === 'DELIVERED';
  return {
    kind: 'reach-fuzz',
    options: o,
    seconds: (Date.now() - started) / 1000,
    surfaces,
    messages: { accepted: accepted.size, terminal: states.size, notTerminal: open.slice(0, 20), byState },
    results,
    serverErrors: serverErrors.slice(0, 20),
    servicesReady,
    canary,
    ok,
  };
}

function serviceUrls(): Record<string, string> {
  const port = (name: string, def: number) => process.env[name] ?? String(def);
  return {
    ingress: `http://127.0.0.1:${port('REACH_INGRESS_PORT', 7410)}`,
    registry: `http://127.0.0.1:${port('REACH_REGISTRY_PORT', 7411)}`,
    dispatcher: `http://127.0.0.1:${port('REACH_DISPATCHER_PORT', 7412)}`,
    tracker: `http://127.0.0.1:${port('REACH_TRACKER_PORT', 7413)}`,
    'dead-letter': `http://127.0.0.1:${port('REACH_DEAD_LETTER_PORT', 7414)}`,
    router: `http://127.0.0.1:${port('REACH_ROUTER_PORT', 7415)}`,
    'retry-scheduler': `http://127.0.0.1:${port('REACH_RETRY_SCHEDULER_PORT', 7416)}`,
  };
}

async function statusOf(s: StackEndpoints, id: string): Promise<{ status: string; result?: unknown } | undefined> {
  const res = await fetch(`${s.ingressUrl}/v1/messages/${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${s.adminToken}` } }).catch(
    () => undefined,
  );
  if (!res?.ok) {
    await res?.body?.cancel();
    return undefined;
  }
  return (await res.json()) as { status: string; result?: unknown };
}

/**
 * The responder: answers each delivery the fuzzed way (result then ack, as the SDKs do; a
 * reject; a bare ack), and reconnects like an SDK agent when the dispatcher closes its socket
 * (counted by close code). Stopped by its `stop()`.
 */
async function respond(s: StackEndpoints, reg: Registered, r: Random, answers: Map<string, Answer>, errors: Record<string, number>): Promise<{ stop(): void }> {
  let stopped = false;
  let current: WebSocket | undefined;
  const connect = async (): Promise<void> => {
    const ws = new WebSocket(s.wsUrl, { maxPayload: 8 << 20 });
    current = ws;
    ws.on('error', () => undefined);
    ws.on('close', (code) => {
      bump(errors, `closed ${code}`);
      if (!stopped) setTimeout(() => void connect().catch(() => undefined), 200);
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => ws.send(JSON.stringify({ type: 'hello', agent_id: reg.agent_id, token: reg.token })));
      ws.once('close', () => reject(new Error('closed before welcome')));
      ws.on('message', (data) => {
        const frame = JSON.parse(String(data)) as {
          type: string;
          ts?: number;
          seq?: number;
          code?: number;
          message?: { message_id: string; payload?: unknown };
        };
        if (frame.type === 'welcome') return resolve();
        if (frame.type === 'ping') return ws.send(JSON.stringify({ type: 'pong', ts: frame.ts }));
        if (frame.type === 'error') return bump(errors, `error ${frame.code}`);
        if (frame.type !== 'deliver' || !frame.message || typeof frame.seq !== 'number') return;
        const id = frame.message.message_id;
        const seq = frame.seq;
        const canary = (frame.message.payload as { canary?: boolean } | undefined)?.canary === true;
        const a: Answer = canary ? { kind: 'ack' } : (answers.get(id) ?? answerFor(r));
        answers.set(id, a);
        if (a.kind === 'result') ws.send(JSON.stringify({ type: 'result', message_id: id, status: a.status, payload: a.payload }));
        if (a.kind === 'result-b64') ws.send(JSON.stringify({ type: 'result', message_id: id, status: a.status, payload_b64: a.bytes.toString('base64') }));
        if (a.kind === 'reject') ws.send(JSON.stringify({ type: 'reject', seq, message_id: id, code: a.code, reason: a.reason, retryable: a.retryable }));
        else ws.send(JSON.stringify({ type: 'ack', seq, message_id: id }));
      });
    });
  };
  await connect();
  return {
    stop: () => {
      stopped = true;
      current?.close();
    },
  };
}

/** Sends `n` fuzzed frames on an agent's socket, reconnecting whenever the dispatcher closes it. */
async function fuzzFrames(s: StackEndpoints, reg: Registered, r: Random, n: number, out: SurfaceCount): Promise<void> {
  let sent = 0;
  while (sent < n) {
    const ws = new WebSocket(s.wsUrl);
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.on('error', () => undefined);
    ws.on('message', (data) => {
      try {
        const f = JSON.parse(String(data)) as { type: string; code?: number; ts?: number };
        if (f.type === 'error') bump(out.outcomes, `error ${f.code}`);
        if (f.type === 'ping') ws.send(JSON.stringify({ type: 'pong', ts: f.ts }));
      } catch {
        bump(out.outcomes, 'unparsable server frame');
      }
    });
    const opened = await new Promise<boolean>((resolve) => {
      ws.once('open', () => resolve(true));
      void closed.then(() => resolve(false));
    });
    if (!opened) {
      bump(out.outcomes, 'connect refused');
      await new Promise((res) => setTimeout(res, 200));
      continue;
    }
    ws.send(JSON.stringify({ type: 'hello', agent_id: reg.agent_id, token: reg.token }));
    let open = true;
    void closed.then((code) => {
      open = false;
      bump(out.outcomes, `close ${code}`);
    });
    while (open && sent < n) {
      ws.send(agentFrame(r, reg.agent_id));
      sent++;
      if (sent % 50 === 0) await new Promise((res) => setTimeout(res, 5)); // let the server answer
    }
    if (open) ws.close();
    await closed;
  }
}

/** One plain message after everything: still delivered end to end. */
async function canaryMessage(s: StackEndpoints, producer: Registered, capability: string): Promise<string> {
  const post = () =>
    fetch(`${s.ingressUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${producer.token}` },
      body: JSON.stringify({ capability, payload: { canary: true } }),
    }).catch((err: unknown) => err as Error);
  let res = await post();
  // The bad-token cases may have this address throttled for the rest of its window: wait it out.
  if (!(res instanceof Error) && res.status === 429) {
    const waitS = Number(res.headers.get(RETRY_AFTER_HEADER)) || 60;
    await new Promise((r) => setTimeout(r, waitS * 1000 + 500));
    res = await post();
  }
  if (res instanceof Error) return `failed: ${res.message}`;
  const body = (await res.json()) as { message_id?: string };
  if (!body.message_id) return `HTTP ${res.status}`;
  for (let i = 0; i < 60; i++) {
    const st = await statusOf(s, body.message_id);
    if (st && TERMINAL.has(st.status)) return st.status;
    await new Promise((r) => setTimeout(r, 500));
  }
  return 'not terminal';
}
