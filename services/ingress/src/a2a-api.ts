import {
  A2A_CAPABILITY_PREFIX,
  A2A_PROTOCOL_VERSION,
  A2A_RPC_PATH,
  A2aError,
  capabilityCard,
  envelopeBodyOf,
  isReachTerminal,
  parseEventId,
  settledLength,
  reachErrorInfo,
  systemCard,
  taskOf,
  taskStateOf,
  TERMINAL_TASK_STATES,
  type SendMessageRequest,
  type StreamEvent,
  type Task,
  type TaskState,
} from '@reach/a2a';
import { bearer, toReachError, type Logger, type ReachError, ERROR, A2A_VERSION_HEADER } from '@reach/core';
import { envelopeFromJson, type AgentRecord, type Envelope, type SchemaCodec } from '@reach/envelope';
import type { Producer } from '@reach/kafka';
import { statusRecord, type HttpServer, type Reply, type Request } from '@reach/service-kit';
import { provisionalRow, type Acceptor } from './acceptance.js';
import type { A2aReadModel, A2aRow } from './a2a-read.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './a2a-read.js';
import type { A2aOps } from './a2a-ops.js';
import { registerA2aRest } from './a2a-rest.js';
import { jsonRpcFrame, SSE_HEADERS, streamTask } from './a2a-stream.js';
import type { Authenticator, Principal } from './auth.js';
import type { CancelMarks } from './cancel-mark.js';
import { produceWithin, PRODUCE_TIMEOUT_MS } from './http-api.js';
import type { IdempotencyStore } from './idempotency.js';
import type { IngressMetrics } from './metrics.js';
import type { RecentMessages } from './recent.js';
import type { ResultWaiter } from './result-waiter.js';

/**
 * Agent-Reach as an A2A 1.0 server (docs/a2a.md), on ingress: Agent Cards from the live
 * registry view, and the JSON-RPC binding. A message goes through the same Acceptor (auth,
 * quotas, idempotency) and onto the same topics as `POST /v1/messages`; tasks, their state
 * and their streams are read from the message read model. No task state is kept here.
 */
export interface A2aDeps {
  http: HttpServer;
  producer: Producer;
  codec: SchemaCodec;
  acceptor: Acceptor;
  auth: Authenticator;
  idempotency: IdempotencyStore;
  /** Marks a canceled message ended for the dispatcher (cancel-mark.ts). */
  cancels: Pick<CancelMarks, 'mark'>;
  read: A2aReadModel;
  recent: RecentMessages;
  waiter: ResultWaiter;
  metrics: IngressMetrics;
  /** The agents of the registry view, live or not (the cards keep the ones that take work). */
  agents: () => Iterable<AgentRecord>;
  isLive: (agent: AgentRecord) => boolean;
  service: string;
  instance: string;
  /** Longest blocking SendMessage (REACH_MAX_WAIT_MS). */
  maxWaitMs: number;
  /** Longest one SSE response lasts before the client is asked to resume (REACH_A2A_STREAM_MAX_MS). */
  streamMaxMs: number;
  /** The base URL the cards advertise (REACH_A2A_PUBLIC_URL); empty: from the request's Host. */
  publicUrl: string;
  version: string;
  log: Logger;
  /** Resolves when the service stops: open streams end so their clients resume elsewhere. */
  closing: Promise<void>;
}

type RpcId = string | number | null;

/**
 * How long CancelTask waits for the tracker to write the message's end before it answers from
 * the cancel mark alone (docs/a2a.md: the tracker lags by some 100 ms in normal operation).
 */
const CANCEL_SETTLE_MS = 5_000;

/** The A2A error for a refusal from the Acceptor or a dependency, with our code as an ErrorInfo detail. */
function a2aErrorOf(e: ReachError): A2aError {
  const data = [reachErrorInfo(e.code, e.codeName)];
  switch (e.codeName) {
    case 'AUTH_FAILED':
      return new A2aError('AuthenticationError', e.message, data);
    case 'INVALID_ENVELOPE':
    case 'PAYLOAD_TOO_LARGE':
      return new A2aError('InvalidParamsError', e.message, data);
    default:
      return new A2aError('InternalError', `${e.code} ${e.codeName}: ${e.message}`, data);
  }
}

function header(req: Request, name: string): string | undefined {
  const v = req.headers[name];
  const first = Array.isArray(v) ? v[0] : v;
  return first === undefined || first === '' ? undefined : first;
}

/** The A2A-Version asked for (header or query, spec §3.6.1); an empty one means 0.3 (§3.6.2). */
export function checkVersion(asked: string | undefined): void {
  const v = asked?.trim() ?? '';
  const majorMinor = /^(\d+)\.(\d+)/.exec(v);
  if (!majorMinor || `${majorMinor[1]}.${majorMinor[2]}` !== A2A_PROTOCOL_VERSION)
    throw new A2aError('VersionNotSupportedError', `A2A-Version ${v === '' ? '(none: 0.3)' : v} is not supported; this server speaks ${A2A_PROTOCOL_VERSION}`);
}

function rpcReply(id: RpcId, result: unknown): Reply {
  return { status: 200, body: { jsonrpc: '2.0', id, result }, headers: { [A2A_VERSION_HEADER]: A2A_PROTOCOL_VERSION } };
}

function rpcError(id: RpcId, err: A2aError): Reply {
  // JSON-RPC errors travel in a 200 answer, but a missing or bad credential is also an HTTP 401.
  const status = err.errorName === 'AuthenticationError' ? 401 : 200;
  return {
    status,
    body: { jsonrpc: '2.0', id, error: err.toJsonRpc() },
    headers: { [A2A_VERSION_HEADER]: A2A_PROTOCOL_VERSION, ...(status === 401 ? { 'www-authenticate': 'Bearer' } : {}) },
  };
}

/** The Reach statuses a task in `state` can be in (ListTasks' coarse filter), from taskStateOf itself. */
export function statusesFor(state: TaskState): string[] {
  const out = new Set<string>();
  for (const status of ['PENDING', 'ROUTED', 'DELIVERING', 'DELIVERED', 'REJECTED', 'DEAD'])
    for (const attempt of [0, 1])
      for (const code of [null, ERROR.NO_ROUTE, ERROR.AGENT_REJECTED, ERROR.CANCELED, ERROR.INTERNAL])
        for (const result of [null, { status: 'error' }]) if (taskStateOf({ status, attempt, code, result }) === state) out.add(status);
  return [...out];
}

interface PageToken {
  u: string;
  m: string;
}

function encodeToken(row: A2aRow): string {
  return Buffer.from(JSON.stringify({ u: row.updated_at.toISOString(), m: row.message_id } satisfies PageToken)).toString('base64url');
}

function decodeToken(token: string): { updatedAt: Date; messageId: string } {
  try {
    const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as PageToken;
    const updatedAt = new Date(t.u);
    if (typeof t.m !== 'string' || Number.isNaN(updatedAt.getTime())) throw new Error('bad');
    return { updatedAt, messageId: t.m };
  } catch {
    throw new A2aError('InvalidParamsError', 'pageToken is not one this server gave');
  }
}

function objectParams(params: unknown): Record<string, unknown> {
  if (params === undefined || params === null) return {};
  if (typeof params !== 'object' || Array.isArray(params)) throw new A2aError('InvalidParamsError', 'params must be an object');
  return params as Record<string, unknown>;
}

function taskIdOf(p: Record<string, unknown>): string {
  if (typeof p.id !== 'string' || p.id === '') throw new A2aError('InvalidParamsError', 'params.id (the task id) is required');
  return p.id;
}

export function registerA2aApi(d: A2aDeps): void {
  const reporter = { service: d.service, instance: d.instance };

  const baseUrl = (req: Request): string => {
    if (d.publicUrl !== '') return d.publicUrl.replace(/\/+$/, '');
    const tls = (req.raw.socket as { encrypted?: boolean }).encrypted === true;
    return `${tls ? 'https' : 'http'}://${header(req, 'host') ?? '127.0.0.1'}`;
  };
  const live = (): AgentRecord[] => [...d.agents()].filter(d.isLive);

  const cardReply = (body: unknown): Reply => ({ status: 200, body, headers: { 'cache-control': 'max-age=10', [A2A_VERSION_HEADER]: A2A_PROTOCOL_VERSION } });
  d.http.route('GET', '/.well-known/agent-card.json', (req) => cardReply(systemCard(baseUrl(req), live(), d.version)));
  d.http.route('GET', `${A2A_CAPABILITY_PREFIX}{capability}/.well-known/agent-card.json`, (req) => {
    const card = capabilityCard(baseUrl(req), req.params.capability!, live(), d.version);
    if (!card) return { status: 404, body: { error: { code: 404, name: 'NOT_FOUND', message: `no live agent offers ${req.params.capability}` } } };
    return cardReply(card);
  });

  /** The task of a message the caller may read, or TaskNotFoundError (unknown and hidden look alike, spec §3.3.2). */
  const readableTask = async (who: Principal, id: string): Promise<A2aRow> => {
    const row = (await d.read.task(id)) ?? recentRow(id);
    if (!row || !isParty(who, row)) throw new A2aError('TaskNotFoundError', `task ${id} not found`);
    return row;
  };
  const isParty = (who: Principal, row: A2aRow): boolean =>
    who.admin || row.producer === who.agentId || row.agent_id === who.agentId || row.target_agent_id === who.agentId;
  const recentRow = (id: string): A2aRow | undefined => {
    const r = d.recent.get(id)?.message;
    return r ? { ...r, session_id: null, idempotency_key: null } : undefined;
  };

  /** Accepts the A2A message as an envelope and puts it on the pipeline; the task's id and row (or a provisional one). */
  const submit = async (
    who: Principal,
    token: string | undefined,
    params: unknown,
    bound: string | undefined,
  ): Promise<{ id: string; envelope: Envelope; fresh: boolean }> => {
    const req = objectParams(params) as unknown as SendMessageRequest;
    const now = Date.now();
    let envelope: Envelope;
    try {
      envelope = envelopeFromJson(envelopeBodyOf(req, bound), { producer: who.agentId, now });
    } catch (err) {
      if (err instanceof A2aError) throw err;
      throw a2aErrorOf(toReachError(err));
    }
    const acceptance = await d.acceptor.accept({ envelope, token, via: { kind: 'http', a2aMessageId: req.message.messageId } }, now);
    d.metrics.count('http', acceptance);
    switch (acceptance.outcome) {
      case 'rejected':
        throw a2aErrorOf(acceptance.error);
      case 'duplicate':
        return { id: acceptance.originalId, envelope, fresh: false };
      case 'accepted': {
        try {
          await produceWithin(d.producer, acceptance.records, PRODUCE_TIMEOUT_MS);
        } catch (err) {
          if (envelope.idempotency_key !== null) await d.idempotency.release(envelope.producer, envelope.idempotency_key, envelope.message_id);
          throw err;
        }
        const row = provisionalRow(envelope, 'PENDING', reporter, now);
        d.recent.remember(row.message, row.event, now);
        return { id: envelope.message_id, envelope, fresh: true };
      }
    }
  };

  /** The task as it stands (a just-accepted message the read model has not caught up with: SUBMITTED). */
  const currentTask = async (
    id: string,
    envelope: Envelope | undefined,
    includeArtifacts = true,
  ): Promise<{ task: Task; row: A2aRow | undefined; position: number }> => {
    const [row, timeline] = await Promise.all([d.read.task(id), d.read.timeline(id)]);
    const known = row ?? recentRow(id);
    // The position a stream continues from: the settled part of the timeline (task.ts SETTLE_MS).
    const position = settledLength(timeline, Date.now());
    if (known) return { task: taskOf(known, { timelineLength: position, includeArtifacts }), row: known, position };
    if (!envelope) throw new A2aError('TaskNotFoundError', `task ${id} not found`);
    const p = provisionalRow(envelope, 'PENDING', reporter, Date.now()).message;
    const provisional: A2aRow = { ...p, session_id: envelope.session_id, idempotency_key: envelope.idempotency_key };
    return { task: taskOf(provisional, { timelineLength: 0, includeArtifacts }), row: undefined, position: 0 };
  };

  const sendMessage = async (who: Principal, token: string | undefined, params: unknown, bound: string | undefined): Promise<unknown> => {
    const { id, envelope } = await submit(who, token, params, bound);
    const config = (objectParams(params).configuration ?? {}) as { returnImmediately?: boolean };
    if (config.returnImmediately !== true) {
      // Blocking (the default, spec §3.2.2): until the task is terminal, within the message's own timeout.
      const waitMs = Math.min(d.maxWaitMs, envelope.timeout_ms ?? d.maxWaitMs);
      await d.waiter.wait(id, waitMs);
    }
    return { task: (await currentTask(id, envelope)).task };
  };

  /** A stream of the task: the Task first, then the timeline after the resume point (or after what the Task shows). */
  const openStream = async (
    frame: (e: StreamEvent) => string,
    id: string,
    envelope: Envelope | undefined,
    lastEventId: string | undefined,
    mustBeLive: boolean,
  ): Promise<Reply> => {
    const { task, position } = await currentTask(id, envelope);
    const terminal = TERMINAL_TASK_STATES.has(task.status.state);
    if (mustBeLive && terminal && lastEventId === undefined)
      // Spec §3.1.6; a client resuming with Last-Event-ID still gets what it missed (docs/a2a.md).
      throw new A2aError('UnsupportedOperationError', `task ${id} is in a terminal state (${task.status.state}); GetTask returns it`);
    const resume = lastEventId !== undefined ? parseEventId(lastEventId) : undefined;
    const first: StreamEvent = resume ? { id: lastEventId!.trim(), event: { task }, final: false } : { id: String(position), event: { task }, final: terminal };
    return {
      status: 200,
      headers: { ...SSE_HEADERS, [A2A_VERSION_HEADER]: A2A_PROTOCOL_VERSION },
      stream: (res) =>
        streamTask(res, {
          read: d.read,
          taskId: id,
          frame,
          first,
          from: resume ?? { position, sawArtifactOfNext: false },
          maxMs: d.streamMaxMs,
          log: d.log,
          closing: d.closing,
        }),
    };
  };

  const listTasks = async (who: Principal, params: unknown): Promise<unknown> => {
    const p = objectParams(params);
    const pageSize = p.pageSize === undefined ? DEFAULT_PAGE_SIZE : Number(p.pageSize);
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE)
      throw new A2aError('InvalidParamsError', `pageSize must be 1…${MAX_PAGE_SIZE}`);
    const state = typeof p.status === 'string' && p.status !== '' && p.status !== 'TASK_STATE_UNSPECIFIED' ? (p.status as TaskState) : undefined;
    const after = typeof p.statusTimestampAfter === 'string' ? new Date(p.statusTimestampAfter) : undefined;
    if (after && Number.isNaN(after.getTime())) throw new A2aError('InvalidParamsError', 'statusTimestampAfter must be an ISO 8601 time');
    const statuses = state ? statusesFor(state) : undefined;
    if (statuses && statuses.length === 0) throw new A2aError('InvalidParamsError', `status ${state} is not a task state`);
    const { rows, total } = await d.read.page({
      producer: who.admin ? undefined : who.agentId,
      sessionId: typeof p.contextId === 'string' && p.contextId !== '' ? p.contextId : undefined,
      statuses,
      updatedAfter: after,
      cursor: typeof p.pageToken === 'string' && p.pageToken !== '' ? decodeToken(p.pageToken) : undefined,
      limit: pageSize,
    });
    const includeArtifacts = p.includeArtifacts === true;
    // The coarse status filter is refined by the mapping itself (a DEAD row may be FAILED or CANCELED).
    const tasks = rows
      .filter((r) => state === undefined || taskStateOf(r) === state)
      .map((r) => {
        const t = taskOf(r, { timelineLength: 0, includeArtifacts });
        delete (t.metadata as { reach: { position?: number } }).reach.position;
        return t;
      });
    const last = rows.at(-1);
    return { tasks, nextPageToken: rows.length === pageSize && last ? encodeToken(last) : '', pageSize, totalSize: total };
  };

  const cancelTask = async (who: Principal, params: unknown): Promise<unknown> => {
    const id = taskIdOf(objectParams(params));
    const row = await readableTask(who, id);
    if (isReachTerminal(row.status)) {
      const state = taskStateOf(row);
      const why = row.status === 'DELIVERED' ? 'it was delivered and can no longer be canceled' : `it already ended ${row.status}`;
      throw new A2aError('TaskNotCancelableError', `task ${id} is ${state}: ${why}`, [reachErrorInfo(row.code ?? 0, row.status)]);
    }
    // Atomic with the agents' acks: an ack that came first wins (delivered); after the mark the
    // dispatcher refuses the agent's answer, so the message never turns DELIVERED.
    if (!(await d.cancels.mark(id)))
      throw new A2aError('TaskNotCancelableError', `task ${id} was delivered (its agent acknowledged it) and can no longer be canceled`);
    // A new terminal outcome in the timeline: DEAD 3007 CANCELED, at the attempt the message is in.
    const envelope = envelopeOfRow(row);
    const reason = `canceled by ${who.agentId} (A2A CancelTask)`;
    await produceWithin(
      d.producer,
      [statusRecord(d.codec, { state: 'DEAD', envelope, ...reporter, attempt: row.attempt, agentId: row.agent_id, code: ERROR.CANCELED, reason })],
      PRODUCE_TIMEOUT_MS,
    );
    // The answer is the outcome the read model settles on. One race is left open by the mark: an
    // ack whose DELIVERED was produced (and so left the ack journal) just before the mark. That
    // DELIVERED is ahead of the cancel on the message's partition, so the tracker writes it
    // first and it stays (the first terminal state wins; fold.ts isAhead): the cancel then
    // answers what the task became, never CANCELED for a task that completed.
    const settled = await settledOutcome(id);
    if (settled && !(settled.status === 'DEAD' && settled.code === ERROR.CANCELED)) {
      const state = taskStateOf(settled);
      throw new A2aError(
        'TaskNotCancelableError',
        `task ${id} is ${state}: it was ${settled.status} before the cancel took effect and can no longer be canceled`,
        [reachErrorInfo(settled.code ?? 0, settled.status)],
      );
    }
    const canceled: A2aRow = settled ?? { ...row, status: 'DEAD', code: ERROR.CANCELED, reason, updated_at: new Date() };
    // The position a stream resumes from, settled as currentTask's (task.ts SETTLE_MS).
    const timeline = await d.read.timeline(id).catch(() => []);
    return taskOf(canceled, { timelineLength: settledLength(timeline, Date.now()) });
  };

  /**
   * The message's terminal row once the tracker has written it (within CANCEL_SETTLE_MS);
   * undefined when the read model lags longer — the mark then stands for the outcome.
   */
  const settledOutcome = async (id: string): Promise<A2aRow | undefined> => {
    const until = Date.now() + CANCEL_SETTLE_MS;
    for (let delay = 20; ; delay = Math.min(delay * 2, 250)) {
      // The read model away: the cancel took effect all the same (the mark); answer from it.
      const row = await d.read.task(id).catch(() => undefined);
      if (row && isReachTerminal(row.status)) return row;
      if (Date.now() + delay > until) return undefined;
      await new Promise((r) => setTimeout(r, delay));
    }
  };

  const handle = async (req: Request, bound: string | undefined): Promise<Reply> => {
    let rpcId: RpcId = null;
    try {
      let body: unknown;
      try {
        body = await req.json();
      } catch {
        throw new A2aError('JSONParseError');
      }
      const call = body as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
      if (call === null || typeof call !== 'object' || Array.isArray(call))
        throw new A2aError('InvalidRequestError', 'the body must be one JSON-RPC 2.0 request object');
      if (typeof call.id === 'string' || typeof call.id === 'number') rpcId = call.id;
      if (call.jsonrpc !== '2.0' || typeof call.method !== 'string') throw new A2aError('InvalidRequestError', 'jsonrpc must be "2.0" and method a string');
      const { who, token, lastEventId } = ops.caller(req);
      switch (call.method) {
        case 'SendMessage':
          return rpcReply(rpcId, await sendMessage(who, token, call.params, bound));
        case 'SendStreamingMessage':
          return await ops.sendStreaming(who, token, call.params, bound, lastEventId, jsonRpcFrame(rpcId));
        case 'GetTask':
          return rpcReply(rpcId, await ops.getTask(who, call.params));
        case 'ListTasks':
          return rpcReply(rpcId, await listTasks(who, call.params));
        case 'CancelTask':
          return rpcReply(rpcId, await cancelTask(who, call.params));
        case 'SubscribeToTask':
          return await ops.subscribe(who, call.params, lastEventId, jsonRpcFrame(rpcId));
        case 'CreateTaskPushNotificationConfig':
        case 'GetTaskPushNotificationConfig':
        case 'ListTaskPushNotificationConfigs':
        case 'DeleteTaskPushNotificationConfig':
          throw new A2aError('PushNotificationNotSupportedError', 'push notifications are not offered: stream (resumable) or poll GetTask');
        case 'GetExtendedAgentCard':
          throw new A2aError('UnsupportedOperationError', 'there is no extended Agent Card');
        default:
          throw new A2aError('MethodNotFoundError', `method ${call.method} does not exist`);
      }
    } catch (err) {
      return rpcError(rpcId, ops.internalError(err));
    }
  };

  const ops: A2aOps = {
    // The credential first (a caller without one learns nothing else), then the version.
    caller: (req) => {
      const token = bearer(req.headers.authorization);
      let who: Principal;
      try {
        who = d.auth.authenticate(token);
      } catch (err) {
        throw a2aErrorOf(toReachError(err));
      }
      checkVersion(header(req, A2A_VERSION_HEADER) ?? req.query.get('A2A-Version') ?? undefined);
      return { who, token, lastEventId: header(req, 'last-event-id') };
    },
    sendMessage,
    sendStreaming: async (who, token, params, bound, lastEventId, frame) => {
      const { id, envelope, fresh } = await submit(who, token, params, bound);
      return openStream(frame, id, envelope, fresh ? undefined : lastEventId, false);
    },
    getTask: async (who, params) => {
      const id = taskIdOf(objectParams(params));
      await readableTask(who, id);
      return (await currentTask(id, undefined)).task;
    },
    listTasks,
    cancelTask,
    subscribe: async (who, params, lastEventId, frame) => {
      const id = taskIdOf(objectParams(params));
      await readableTask(who, id);
      return openStream(frame, id, undefined, lastEventId, true);
    },
    internalError: (err) => {
      if (err instanceof A2aError) return err;
      const e = toReachError(err);
      if (e.codeName === 'INTERNAL') d.log.error({ err }, 'a2a request failed');
      return a2aErrorOf(e);
    },
  };

  d.http.route('POST', A2A_RPC_PATH, (req) => handle(req, undefined));
  d.http.route('POST', `${A2A_CAPABILITY_PREFIX}{capability}`, (req) => handle(req, req.params.capability!));
  registerA2aRest(d.http, ops);
}

/** The envelope fields a status event needs, from the message's row (the payload is not kept there). */
function envelopeOfRow(row: A2aRow): Envelope {
  return {
    message_id: row.message_id,
    message_type: row.message_type,
    capability: row.capability,
    topic: row.topic,
    target_agent_id: row.target_agent_id,
    producer: row.producer,
    trace_id: row.trace_id,
    request_id: null,
    idempotency_key: row.idempotency_key,
    session_id: row.session_id,
    correlation_id: row.correlation_id ?? null,
    reply_to: row.reply_to ?? null,
    priority: 'NORMAL',
    tags: [],
    retryable: false,
    timeout_ms: null,
    created_at: row.created_at.getTime(),
    expire_at: null,
    schema_version: 1,
    content_type: 'application/json',
    payload: Buffer.alloc(0),
    headers: {},
  };
}
