import { ReachError, errorInfo, newId, type ErrorName, ERROR, type CodeOf } from '@reach/core';
import { envelopeToJson, type Envelope, type MessageState } from '@reach/envelope';
import { ackDeadlineAt, budgetDeadlineAt, decideAfterFailure, domainGate, routesDelta, routesView, type RoutesView } from '@reach/routing';
import { CLOSE } from '../agent-socket.js';
import { RESULT_STATUS_HEADER } from '../node-types.js';
import type { BusClock, BusTimer } from './clock.js';
import type { LocalConfig } from './local-config.js';
import type { LocalRegistry } from './local-registry.js';
import type { Timeline } from './timeline.js';

/** Where a connection's frames go: the node's side of an in-process connection (direct-transport.ts). */
export interface FrameSink {
  /** One server frame, as the JSON text a WebSocket would carry. */
  push(frame: string): void;
  /** The server closed the connection. */
  close(code: number, reason: string): void;
}

/** One frame an agent sent, as parsed JSON. */
export type AgentFrameJson = Record<string, unknown> & { type: string };

interface Delivery {
  readonly agentId: string;
  readonly seq: number;
  readonly envelope: Envelope;
  readonly attempt: number;
  readonly parent: string | null;
  readonly budgetAt: number;
  deadline: number;
  timer: BusTimer | undefined;
}

interface Connection {
  readonly id: string;
  readonly agentId: string;
  readonly sink: FrameSink;
  open: boolean;
}

/** One agent's delivery stream: its seq counter, its un-acked deliveries, its connection. */
interface Line {
  seq: number;
  readonly pending: Map<number, Delivery>;
  conn: Connection | undefined;
  grace: BusTimer | undefined;
}

interface AttemptRecord {
  attempt: number;
  agent_id: string;
  code: number;
  reason: string;
  at: string;
}

export interface DispatcherDeps {
  config: LocalConfig;
  clock: BusClock;
  registry: LocalRegistry;
  timeline: Timeline;
  random: () => number;
  /** Routes a message again (a retry: the next attempt, avoiding the agents that failed it). */
  route: (envelope: Envelope, attempt: number, exclude: readonly string[]) => void;
  /** A message an agent sends (`send` frame, or a result's correlated reply): through ingress. */
  ingest: (fields: Record<string, unknown>, producer: string) => string;
  receipt: (envelope: Envelope, outcome: { state: MessageState; code: number; reason: string }) => void;
}

const json = (frame: Record<string, unknown>): string => JSON.stringify(frame);

/**
 * The dispatcher of direct mode: per-agent seq and replay on reconnect (hello.last_seq), ack
 * deadlines (the message's timeout_ms, else REACH_ACK_TIMEOUT_MS, never past its budget) that
 * `progress` frames move, acks, results (with the correlated task_result for reply_to) and
 * rejects, and every failed attempt decided by @reach/routing's decideAfterFailure — a retry
 * after the same backoff, avoiding the agents that failed it, or REJECTED 3003 / DEAD
 * 3004-3006 with a failure receipt — exactly as services/dispatcher does with Kafka and Redis.
 */
export class LocalDispatcher {
  private readonly lines = new Map<string, Line>();
  private readonly history = new Map<string, AttemptRecord[]>();
  /** Answers of this many further deliveries of an agent are lost on the way (LocalReach.loseAnswers). */
  private readonly losing = new Map<string, number>();
  private readonly lost = new Set<string>();
  /** Connections that asked for the pre-flight view, with the view they were sent last. */
  private readonly routeWatchers = new Map<Connection, RoutesView>();
  private routesDue = false;

  constructor(private readonly d: DispatcherDeps) {}

  // ── connections ─────────────────────────────────────────────────────────────────────────

  /** `hello`: welcomes the agent, replaces an older connection of it (4001), replays what it has not seen. */
  connect(hello: { agent_id: string; token: string; last_seq?: number }, sink: FrameSink): Connection {
    const { agent_id: agentId } = hello;
    const line = this.line(agentId);
    if (this.d.registry.tokenOf(agentId) !== hello.token) {
      sink.push(json({ type: 'error', code: ERROR.AUTH_FAILED, name: 'AUTH_FAILED', message: `agent ${agentId} is not registered with this token` }));
      sink.close(CLOSE.authFailed, 'auth failed');
      throw new ReachError('AUTH_FAILED', `agent ${agentId} is not registered with this token`);
    }
    const previous = line.conn;
    const conn: Connection = { id: newId('conn', this.d.clock.now()), agentId, sink, open: true };
    line.conn = conn;
    this.d.clock.cancel(line.grace);
    line.grace = undefined;
    if (previous?.open) this.closeConnection(previous, CLOSE.duplicate, 'replaced by a newer connection of this agent');
    this.d.registry.index.setPresence({ agent_id: agentId, connected: true, dispatcher_instance: 'local', connection_id: conn.id, at: this.d.clock.now() });
    this.routesChanged();
    const lastSeq = hello.last_seq ?? 0;
    sink.push(json({ type: 'welcome', connection_id: conn.id, heartbeat_ms: 15_000, resume_from: lastSeq }));
    for (const delivery of [...line.pending.values()].sort((a, b) => a.seq - b.seq)) if (delivery.seq > lastSeq) this.push(delivery);
    return conn;
  }

  /** The agent's side closed the connection (stop, or a dropped socket). */
  disconnected(conn: Connection): void {
    if (!conn.open) return;
    conn.open = false;
    this.gone(conn);
  }

  /** Drops an agent's connection as a network failure would (code 1006): the node reconnects and is replayed. */
  dropConnection(agentId: string): boolean {
    const conn = this.lines.get(agentId)?.conn;
    if (!conn?.open) return false;
    this.closeConnection(conn, 1006, 'connection lost');
    return true;
  }

  isConnected(agentId: string): boolean {
    return this.lines.get(agentId)?.conn?.open === true;
  }

  loseAnswers(agentId: string, deliveries: number): void {
    this.losing.set(agentId, (this.losing.get(agentId) ?? 0) + deliveries);
  }

  close(): void {
    for (const line of this.lines.values()) {
      if (line.conn?.open) this.closeConnection(line.conn, CLOSE.goingAway, 'the local control plane is closing');
      for (const delivery of line.pending.values()) this.d.clock.cancel(delivery.timer);
      line.pending.clear();
    }
  }

  // ── deliveries ──────────────────────────────────────────────────────────────────────────

  deliver(agentId: string, envelope: Envelope, attempt: number, parent: string | null): void {
    const now = this.d.clock.now();
    const line = this.line(agentId);
    const budgetAt = budgetDeadlineAt(envelope, this.d.config.budget);
    const delivery: Delivery = {
      agentId,
      seq: ++line.seq,
      envelope,
      attempt,
      parent,
      budgetAt,
      deadline: ackDeadlineAt(now, envelope.timeout_ms, this.d.config.ackTimeoutMs, budgetAt),
      timer: undefined,
    };
    line.pending.set(delivery.seq, delivery);
    this.d.timeline.record(envelope.message_id, {
      state: 'DELIVERING',
      at: new Date(now).toISOString(),
      attempt,
      service: 'dispatcher',
      agent_id: agentId,
      code: null,
      reason: null,
      detail: { seq: delivery.seq, deadline: new Date(delivery.deadline).toISOString(), instance: 'local' },
      parent,
    });
    this.armDeadline(delivery);
    if (line.conn?.open) this.push(delivery);
  }

  /** One frame from an agent's connection. */
  onFrame(conn: Connection, f: AgentFrameJson): void {
    if (!conn.open) return;
    const agentId = conn.agentId;
    switch (f.type) {
      case 'ack':
      case 'result':
      case 'reject':
        if (this.answerLost(agentId, this.seqOf(agentId, f))) return;
        if (f.type === 'ack') this.ack(agentId, Number(f.seq), String(f.message_id));
        else if (f.type === 'result') this.result(agentId, f);
        else this.reject(agentId, f);
        return;
      case 'progress':
        this.progress(agentId, Number(f.seq), String(f.message_id));
        return;
      case 'send':
        this.send(conn, f);
        return;
      case 'ping':
        conn.sink.push(json({ type: 'pong', ts: f.ts }));
        return;
      case 'subscribe_routes': {
        const view = this.routesOf(conn);
        this.routeWatchers.set(conn, view);
        conn.sink.push(json({ type: 'routes', full: true, ...view }));
        return;
      }
      case 'refresh_token':
        conn.sink.push(json({ type: 'token_refreshed', expires_at: new Date(this.d.clock.now() + 3600_000).toISOString() }));
        return;
      default:
        return;
    }
  }

  private ack(agentId: string, seq: number, messageId: string): void {
    const delivery = this.take(agentId, seq, messageId);
    if (delivery) this.delivered(delivery, undefined);
  }

  /** A handler's result: it answers the delivery like an ack, and goes back to reply_to as a correlated task_result. */
  private result(agentId: string, f: AgentFrameJson): void {
    const messageId = String(f.message_id);
    const line = this.line(agentId);
    const seq = typeof f.seq === 'number' ? f.seq : [...line.pending.values()].find((x) => x.envelope.message_id === messageId)?.seq;
    const delivery = seq === undefined ? undefined : this.take(agentId, seq, messageId);
    // Late (its deadline passed: it was retried) or a repeat: the attempt already has its outcome.
    if (!delivery) return;
    const status = f.status === 'error' ? 'error' : 'ok';
    const body = f.payload_b64 !== undefined ? { payload_b64: f.payload_b64 } : { payload: f.payload ?? null };
    this.delivered(delivery, { status, ...body });
    const original = delivery.envelope;
    if (!original.reply_to) return;
    const headers = (f.headers && typeof f.headers === 'object' ? f.headers : {}) as Record<string, string>;
    this.d.ingest(
      {
        message_type: 'task_result',
        target_agent_id: original.reply_to,
        correlation_id: original.message_id,
        trace_id: original.trace_id,
        request_id: original.request_id,
        session_id: original.session_id,
        priority: original.priority,
        content_type: typeof f.content_type === 'string' ? f.content_type : 'application/json',
        headers: { ...headers, [RESULT_STATUS_HEADER]: status },
        ...body,
      },
      agentId,
    );
  }

  private reject(agentId: string, f: AgentFrameJson): void {
    const seq = Number(f.seq);
    const delivery = this.take(agentId, seq, String(f.message_id));
    if (!delivery) return;
    const reason = typeof f.reason === 'string' && f.reason !== '' ? f.reason : 'rejected by the agent';
    // Only an explicit `retryable: true` asks for another attempt; a bare reject is final.
    const retryable = f.retryable === true;
    this.failed(delivery, ERROR.AGENT_REJECTED, reason, retryable, {
      seq,
      agent_code: f.code ?? null,
      agent_reason: f.reason ?? null,
      retryable: f.retryable ?? null,
    });
  }

  /** "Still working on it": the ack deadline moves to now + the delivery's window (never past its budget). */
  private progress(agentId: string, seq: number, messageId: string): void {
    const delivery = this.lines.get(agentId)?.pending.get(seq);
    if (!delivery || delivery.envelope.message_id !== messageId) return;
    const window = delivery.envelope.timeout_ms ?? this.d.config.ackTimeoutMs;
    delivery.deadline = Math.min(this.d.clock.now() + window, delivery.budgetAt);
    this.armDeadline(delivery);
  }

  private send(conn: Connection, f: AgentFrameJson): void {
    const { type: _type, client_ref: clientRef, ...fields } = f;
    try {
      const messageId = this.d.ingest(fields, conn.agentId);
      conn.sink.push(json({ type: 'accepted', client_ref: clientRef, message_id: messageId }));
    } catch (err) {
      const e = err instanceof ReachError ? err : new ReachError('INTERNAL', err instanceof Error ? err.message : String(err));
      conn.sink.push(json({ type: 'error', client_ref: clientRef, code: e.code, name: e.codeName, message: e.message }));
    }
  }

  // ── outcomes ────────────────────────────────────────────────────────────────────────────

  private delivered(delivery: Delivery, result: Record<string, unknown> | undefined): void {
    this.d.timeline.record(delivery.envelope.message_id, {
      state: 'DELIVERED',
      at: new Date(this.d.clock.now()).toISOString(),
      attempt: delivery.attempt,
      service: 'dispatcher',
      agent_id: delivery.agentId,
      code: null,
      reason: null,
      detail: result === undefined ? null : { result },
      parent: delivery.parent,
      ...(result === undefined ? {} : { result }),
    });
  }

  /**
   * A failed attempt (3002 no ack in time, 1002 the connection died and the agent did not come
   * back, 3003 rejected): retried after the backoff on another agent when one exists, or ended.
   */
  private failed(
    delivery: Delivery,
    code: CodeOf<'ACK_TIMEOUT' | 'CONNECTION_CLOSED' | 'AGENT_REJECTED'>,
    reason: string,
    failureRetryable: boolean,
    detail: Record<string, unknown>,
  ): void {
    const { envelope: env, agentId, attempt } = delivery;
    const now = this.d.clock.now();
    let history = this.history.get(env.message_id);
    if (!history) this.history.set(env.message_id, (history = []));
    history.push({ attempt, agent_id: agentId, code, reason, at: new Date(now).toISOString() });
    const decision = decideAfterFailure(
      {
        attempt,
        envelopeRetryable: env.retryable,
        failureRetryable,
        messageType: env.message_type,
        expireAt: env.expire_at,
        budgetDeadline: delivery.budgetAt,
        now,
      },
      this.d.config.retry,
      this.d.random(),
    );
    const base = { at: new Date(now).toISOString(), service: 'dispatcher', agent_id: agentId, parent: delivery.parent };
    switch (decision.kind) {
      case 'retry': {
        const exclude = [...new Set(history.map((h) => h.agent_id))];
        this.d.timeline.record(env.message_id, {
          ...base,
          state: 'PENDING',
          attempt: decision.nextAttempt,
          code,
          reason: `attempt ${attempt} failed (${errorInfo(code).name}): ${reason}`.slice(0, 1000),
          detail: {
            ...detail,
            failed_attempt: attempt,
            failed_agent_id: agentId,
            exclude_agent_ids: exclude,
            delay_ms: decision.delayMs,
            not_before: new Date(decision.notBefore).toISOString(),
          },
        });
        this.d.clock.after(decision.delayMs, () => this.d.route(env, decision.nextAttempt, exclude));
        return;
      }
      case 'rejected': {
        this.d.timeline.record(env.message_id, { ...base, state: 'REJECTED', attempt, code: ERROR.AGENT_REJECTED, reason, detail });
        this.d.receipt(env, { state: 'REJECTED', code: ERROR.AGENT_REJECTED, reason: `${agentId}: ${reason}` });
        return;
      }
      case 'dead': {
        const name = errorInfo(decision.code).name as ErrorName;
        const why = `${decision.why}; last failure: ${errorInfo(code).name} from ${agentId}: ${reason}`.slice(0, 2000);
        this.d.timeline.record(env.message_id, { ...base, state: 'DEAD', attempt, code: decision.code, reason: why, detail: { ...detail, attempts: history } });
        this.d.receipt(env, { state: 'DEAD', code: decision.code, reason: new ReachError(name, why).message });
        return;
      }
    }
  }

  // ── the pre-flight view (routes frames) ────────────────────────────────────────────────

  /**
   * Something that decides routing changed (an agent registered, heartbeated, connected, left):
   * every watching connection gets what changed for it, once, on the next turn.
   */
  routesChanged(): void {
    if (this.routesDue || this.routeWatchers.size === 0) return;
    this.routesDue = true;
    setImmediate(() => {
      this.routesDue = false;
      for (const [conn, before] of this.routeWatchers) {
        if (!conn.open) {
          this.routeWatchers.delete(conn);
          continue;
        }
        const after = this.routesOf(conn);
        const delta = routesDelta(before, after);
        this.routeWatchers.set(conn, after);
        if (delta) conn.sink.push(json({ type: 'routes', full: false, ...delta }));
      }
    });
  }

  private routesOf(conn: Connection): RoutesView {
    return this.routesFor(conn.agentId);
  }

  /** What agent `agentId` can reach now: the view its `routes` frames follow. */
  routesFor(agentId: string): RoutesView {
    const index = this.d.registry.index;
    return routesView({
      index,
      producer: agentId,
      domain: index.agent(agentId)?.metadata.domain || 'default',
      now: this.d.clock.now(),
      reconnectGraceMs: this.d.config.reconnectGraceMs,
      hooks: { domainAllowed: domainGate(index, this.d.registry.grants) },
    });
  }

  // ── plumbing ────────────────────────────────────────────────────────────────────────────

  private line(agentId: string): Line {
    let line = this.lines.get(agentId);
    if (!line) this.lines.set(agentId, (line = { seq: 0, pending: new Map(), conn: undefined, grace: undefined }));
    return line;
  }

  /** The pending delivery `seq` of the agent, when it is this message: removed, its deadline cancelled. */
  private take(agentId: string, seq: number, messageId: string): Delivery | undefined {
    const line = this.lines.get(agentId);
    const delivery = line?.pending.get(seq);
    if (!line || !delivery || delivery.envelope.message_id !== messageId) return undefined;
    line.pending.delete(seq);
    this.d.clock.cancel(delivery.timer);
    return delivery;
  }

  private armDeadline(delivery: Delivery): void {
    this.d.clock.cancel(delivery.timer);
    delivery.timer = this.d.clock.after(delivery.deadline - this.d.clock.now(), () => {
      const taken = this.take(delivery.agentId, delivery.seq, delivery.envelope.message_id);
      if (!taken) return;
      const window = delivery.envelope.timeout_ms ?? this.d.config.ackTimeoutMs;
      this.failed(taken, ERROR.ACK_TIMEOUT, `no ack from ${delivery.agentId} within ${window} ms`, true, { seq: delivery.seq });
    });
  }

  private push(delivery: Delivery): void {
    const conn = this.lines.get(delivery.agentId)?.conn;
    if (!conn?.open) return;
    const env = delivery.envelope;
    conn.sink.push(
      json({
        type: 'deliver',
        seq: delivery.seq,
        attempt: delivery.attempt,
        // The node reads the deadline against its own (wall) clock: skipped time is taken off.
        deadline: delivery.deadline - this.d.clock.skipped,
        message: envelopeToJson(env),
      }),
    );
  }

  /** The delivery an answer is about: its seq, or (a result without one) the pending delivery of its message. */
  private seqOf(agentId: string, f: AgentFrameJson): number | undefined {
    if (typeof f.seq === 'number') return f.seq;
    return [...(this.lines.get(agentId)?.pending.values() ?? [])].find((x) => x.envelope.message_id === f.message_id)?.seq;
  }

  /** Results, acks and rejects of a delivery whose answers are being lost never arrive (only that delivery's: a redelivery's do). */
  private answerLost(agentId: string, seq: number | undefined): boolean {
    if (seq === undefined) return false;
    const key = `${agentId}|${seq}`;
    if (this.lost.has(key)) return true;
    const n = this.losing.get(agentId) ?? 0;
    if (n <= 0) return false;
    if (n === 1) this.losing.delete(agentId);
    else this.losing.set(agentId, n - 1);
    this.lost.add(key);
    return true;
  }

  private closeConnection(conn: Connection, code: number, reason: string): void {
    if (!conn.open) return;
    conn.open = false;
    conn.sink.close(code, reason);
    this.gone(conn);
  }

  /**
   * The connection is gone: the agent is unreachable. Its un-acked deliveries wait for it to
   * reconnect within REACH_WS_RECONNECT_GRACE_MS (then replay), else fail over at once (1002).
   */
  private gone(conn: Connection): void {
    const line = this.line(conn.agentId);
    if (line.conn !== conn) return;
    line.conn = undefined;
    this.d.registry.index.setPresence({
      agent_id: conn.agentId,
      connected: false,
      dispatcher_instance: 'local',
      connection_id: conn.id,
      at: this.d.clock.now(),
    });
    this.routeWatchers.delete(conn);
    this.routesChanged();
    line.grace = this.d.clock.after(this.d.config.reconnectGraceMs, () => {
      line.grace = undefined;
      this.routesChanged(); // no longer "reconnecting": unreachable
      for (const delivery of [...line.pending.values()].sort((a, b) => a.seq - b.seq)) {
        const taken = this.take(conn.agentId, delivery.seq, delivery.envelope.message_id);
        if (taken)
          this.failed(taken, ERROR.CONNECTION_CLOSED, `the connection of ${conn.agentId} died and it did not come back within the grace`, true, {
            seq: taken.seq,
          });
      }
    });
  }
}
