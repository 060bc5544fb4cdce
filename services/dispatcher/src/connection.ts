import { WebSocket, type RawData } from 'ws';
import { ReachError, newId, toReachError, verifyToken, type Logger, type TokenClaims, type TokenSecret, TOKEN_HEADER } from '@reach/core';
import { envelopeFromJson, validateEnvelope, type SchemaCodec } from '@reach/envelope';
import { TOPICS, valueSubject } from '@reach/kafka';
import { AnswerTime, ackWindowOf, entryTooLateToSend, renewedAtSend } from './deadline-holds.js';
import { entryMessageId, entrySeq, frameOf, type EntryHead } from './entry.js';
import type { DispatcherMetrics } from './metrics.js';
import { untilStored } from './answer-retry.js';
import type { Outbox } from './outbox.js';
import type { Outcomes } from './outcomes.js';
import {
  CLOSE,
  acceptedFrame,
  errorFrame,
  errorFrameOf,
  parseAgentFrame,
  pingFrame,
  pongFrame,
  tokenRefreshedFrame,
  welcomeFrame,
  type AgentFrame,
  type FrameError,
  type HelloFrame,
  type SendFrame,
} from './protocol.js';
import type { ReplayBuffer } from './replay-buffer.js';

/**
 * One agent WebSocket (docs/design.md §4). Life: `auth` (waiting for hello, at most
 * REACH_WS_AUTH_TIMEOUT_MS) → `authenticating` (token checked, the connection claimed across
 * instances) → `open` (welcome sent, buffer replayed, deliveries flowing) → `closed`.
 *
 * Deliveries are sent strictly in seq order: `sentUpTo` is the highest seq sent. A delivery
 * announced by pub/sub is sent at once when it is the next one and the agent has read what it
 * was sent (less than half the buffer limit waits unread); anything else (a gap, a replay in
 * progress, a backlog) makes the connection re-read its buffer after `sentUpTo` ("pump").
 *
 * The pump goes at the agent's reading pace: it pauses while more than half the limit waits
 * unread, so the outbound buffer holds at most half the limit plus one frame, and a burst (a
 * replay, a consumer catching up, large payloads) never gets an agent that reads closed as
 * slow. An agent that stops reading is: its buffer does not drain for REACH_WS_SLOW_AFTER_MS
 * while deliveries wait (R-C5). A failed send drops the connection at once (R-C4). Either way
 * its un-acked deliveries stay in Redis for the replay of its next connection.
 */
export interface ConnectionConfig {
  pingIntervalMs: number;
  idleTimeoutMs: number;
  authTimeoutMs: number;
  maxBufferedBytes: number;
  /** An outbound buffer over half the limit that has not drained for this long, with deliveries waiting: slow. */
  slowAfterMs: number;
  maxPayloadBytes: number;
  tokenSecret: TokenSecret;
  /** How long a `send` waits for Kafka before answering 5002 (the record may still be written). */
  sendTimeoutMs: number;
  /** The ack window of a message without timeout_ms (REACH_ACK_TIMEOUT_MS): what a `progress` frame grants. */
  ackTimeoutMs: number;
}

/** What a connection needs from its gateway. */
export interface ConnectionHost {
  readonly config: ConnectionConfig;
  readonly buffer: ReplayBuffer;
  readonly outcomes: Outcomes;
  readonly outbox: Outbox;
  readonly codec: SchemaCodec;
  readonly metrics: DispatcherMetrics;
  readonly log: Logger;
  /** Is this token id revoked? */
  isRevoked(jti: string): Promise<boolean>;
  /** Checks a `refresh_token` frame's token for this agent; throws AUTH_FAILED. */
  verifyRenewal(agentId: string, token: string): Promise<TokenClaims>;
  /** Claims the agent for this connection (closing older ones anywhere); false when superseded. */
  register(conn: AgentConnection): Promise<boolean>;
  /** Forgets a closed connection (idempotent). */
  unregister(conn: AgentConnection): void;
  /** Announces the connection on reach.presence.v1. */
  presenceConnected(conn: AgentConnection): void;
  /** A deliver frame was written to the socket: its DELIVERING event is due (sent-ledger.ts). */
  sent(agent: string, seq: number, entry: string): void;
  /** A hello was refused (brute-force protection counts it against the source address). */
  helloRefused?(conn: AgentConnection): void;
  /** `subscribe_routes`: the connection gets the pre-flight view (routes-feed.ts); absent: refused. */
  subscribeRoutes?(conn: AgentConnection): Promise<void>;
  /** The connection no longer needs the view (it closed). */
  unsubscribeRoutes?(conn: AgentConnection): void;
}

type State = 'auth' | 'authenticating' | 'open' | 'closed';

const INGRESS_SUBJECT = valueSubject(TOPICS.ingress.name);
/** Entries read from the buffer per round trip while pumping. */
const PUMP_BATCH = 256;
/** Bound of the message id → seq map of sent, unanswered deliveries (oldest forgotten first). */
const MAX_INFLIGHT = 100_000;
/** How often a paused replay checks whether the agent has read enough to go on. */
const DRAIN_POLL_MS = 10;

export class AgentConnection {
  readonly id = newId('conn');
  readonly openedAt = Date.now();
  agentId: string | undefined;
  generation = 0;
  /** Set when a newer connection of the same agent took over (closed with 4001). */
  replaced = false;
  /** Counted in the connections gauge. */
  counted = false;
  /**
   * The agent closed the socket itself with 1000 (a graceful stop: the SDKs drain, answer and
   * deregister first). What it left unanswered is then handed back, not the agent failing.
   */
  closedNormally = false;

  private state: State = 'auth';
  private token = '';
  private claims: TokenClaims | undefined;
  private lastSeen = Date.now();
  private lastPingAt = Date.now();
  private sentUpTo = 0;
  /** Deliveries with seq ≤ this were buffered before the connection opened: replays. */
  private replayUpTo = 0;
  private pumping = false;
  private pumpAgain = false;
  private readonly inflight = new Map<string, number>();
  /** When each in-flight seq was sent on this socket, for the dispatch-duration histogram. */
  private readonly sentAt = new Map<number, number>();
  /** How long this agent takes to answer lately: the send margin for its budgets. */
  private readonly answerTime = new AnswerTime();
  /** The handshake's outcome has been counted (reach_dispatcher_connect_attempts_total). */
  private attemptCounted = false;
  /** Frames that arrived after hello, before welcome: handled once open. */
  private early: AgentFrame[] = [];
  private log: Logger;

  constructor(
    private readonly host: ConnectionHost,
    private readonly ws: WebSocket,
    private readonly headerToken: string | undefined,
    /** The peer's address, for the failed-authentication budget (auth-throttle.ts). */
    readonly remoteAddress?: string,
  ) {
    this.log = host.log.child({ connection_id: this.id });
    ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    ws.on('close', (code) => this.closed(code));
    // Errors (e.g. a frame over maxPayload) are followed by 'close'; ws already closes the socket.
    ws.on('error', (err) => this.log.debug({ err, agent_id: this.agentId }, 'websocket error'));
  }

  get isOpen(): boolean {
    return this.state === 'open';
  }

  /** The security domain of the token the connection runs on (the producer's, R-A8). */
  get domain(): string {
    return this.claims?.dom || 'default';
  }

  /** A `routes` frame of the pre-flight view (routes-feed.ts); false once the connection is gone. */
  sendRoutes(frame: string): boolean {
    return this.isOpen && this.send(frame);
  }

  /** The id (jti) of the token the connection runs on, once authenticated. */
  get tokenId(): string | undefined {
    return this.claims?.jti;
  }

  /** Read through a getter so checks after an await are not narrowed away by the compiler. */
  private get isClosed(): boolean {
    return this.state === 'closed';
  }

  // ── inbound ──────────────────────────────────────────────────────────────────────────────

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.state === 'closed') return;
    this.lastSeen = Date.now();
    const text = isBinary ? undefined : Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8');
    const frame: AgentFrame | FrameError =
      text === undefined ? { type: 'invalid', message: 'binary frames are not part of the protocol' } : parseAgentFrame(text);
    if (this.state === 'auth') {
      if (frame.type !== 'hello') {
        this.authFailed(frame.type === 'invalid' ? `the first frame must be hello (${frame.message})` : `the first frame must be hello, got ${frame.type}`);
        return;
      }
      void this.hello(frame);
      return;
    }
    if (frame.type === 'invalid') {
      this.send(errorFrame('INVALID_ENVELOPE', frame.message, frame.client_ref));
      return;
    }
    if (this.state === 'authenticating') this.early.push(frame);
    else this.enqueue(frame);
  }

  /**
   * Frames about the same message are handled in the order the agent sent them: an agent that
   * sends `result` then `ack` must see the result recorded before the ack removes the delivery
   * (concurrent handling lost the result). Frames about different messages run concurrently —
   * serialising a whole connection made acks queue behind each other's Redis round trips.
   */
  private readonly perMessage = new Map<string, Promise<void>>();
  private enqueue(frame: AgentFrame): void {
    const messageId = frame.type === 'ack' || frame.type === 'progress' || frame.type === 'reject' || frame.type === 'result' ? frame.message_id : undefined;
    if (messageId === undefined) {
      void this.handle(frame);
      return;
    }
    const previous = this.perMessage.get(messageId) ?? Promise.resolve();
    const run = () => this.handle(frame);
    const next = previous.then(run, run);
    this.perMessage.set(messageId, next);
    void next.finally(() => {
      if (this.perMessage.get(messageId) === next) this.perMessage.delete(messageId);
    });
  }

  private async hello(f: HelloFrame): Promise<void> {
    this.state = 'authenticating';
    let claims: TokenClaims;
    try {
      const token = f.token ?? this.headerToken;
      claims = verifyToken(token, this.host.config.tokenSecret);
      if (f.agent_id !== undefined && f.agent_id !== claims.sub) throw new ReachError('AUTH_FAILED', `agent_id ${f.agent_id} is not the token's agent`);
      if (await this.host.isRevoked(claims.jti)) throw new ReachError('AUTH_FAILED', 'token revoked');
      this.token = token!;
    } catch (err) {
      const e = toReachError(err);
      if (e.codeName === 'AUTH_FAILED') this.authFailed(e.message);
      else this.unavailable(e);
      return;
    }
    this.claims = claims;
    this.agentId = claims.sub;
    this.log = this.log.child({ agent_id: claims.sub });
    try {
      if (!(await this.host.register(this)) || this.isClosed) return;
      const current = await this.host.buffer.currentSeq(claims.sub);
      // A last_seq beyond the agent's counter means the counter was reset (Redis lost its
      // data): everything buffered now is new to the agent, so replay from the start.
      const resumeFrom = f.last_seq !== undefined && f.last_seq <= current ? f.last_seq : 0;
      if (this.state !== 'authenticating') return;
      this.sentUpTo = resumeFrom;
      this.replayUpTo = current;
      this.state = 'open';
      this.send(welcomeFrame(this.id, this.host.config.pingIntervalMs, resumeFrom));
      this.host.metrics.connects.inc();
      this.countAttempt('connected');
      this.host.presenceConnected(this);
      this.log.info({ generation: this.generation, resume_from: resumeFrom, current_seq: current }, 'agent connected');
      const early = this.early;
      this.early = [];
      for (const frame of early) this.enqueue(frame);
      await this.pump(); // the replay: every un-acked delivery after resume_from, in order
    } catch (err) {
      this.unavailable(toReachError(err));
    }
  }

  private async handle(frame: AgentFrame): Promise<void> {
    const agent = this.agentId!;
    const clientRef = frame.type === 'send' ? frame.client_ref : undefined;
    try {
      switch (frame.type) {
        case 'ack': {
          const outcome = await untilStored('ack', () => this.host.outcomes.ack(agent, frame.seq, frame.message_id), this.log);
          if (outcome === 'mismatch') this.send(errorFrame('INVALID_ENVELOPE', `seq ${frame.seq} is not message ${frame.message_id}`));
          else this.answered(frame.message_id, frame.seq, 'ack');
          return;
        }
        case 'progress': {
          // The ack window again from now: the message's own timeout, else the default.
          const window = (head: EntryHead) => ackWindowOf(head, this.host.config.ackTimeoutMs);
          const outcome = await untilStored('progress', () => this.host.buffer.extendDeadline(agent, frame.seq, frame.message_id, window), this.log);
          if (outcome === 'mismatch') this.send(errorFrame('INVALID_ENVELOPE', `seq ${frame.seq} is not message ${frame.message_id}`));
          return;
        }
        case 'reject': {
          const outcome = await untilStored('reject', () => this.host.outcomes.reject(agent, frame.seq, frame.message_id, frame), this.log);
          if (outcome === 'mismatch') this.send(errorFrame('INVALID_ENVELOPE', `seq ${frame.seq} is not message ${frame.message_id}`));
          else this.answered(frame.message_id, frame.seq, 'reject');
          return;
        }
        case 'result': {
          // Delivered on this connection, else the seq the agent names (a result re-sent after
          // a reconnect); outcomes.result checks that seq holds this message.
          const seq = this.inflight.get(frame.message_id) ?? frame.seq;
          await this.host.outcomes.result(agent, this.token, frame, seq);
          // A result answers its delivery like an ack does.
          if (seq !== undefined) this.answered(frame.message_id, seq, 'ack');
          return;
        }
        case 'send':
          await this.sendMessage(frame);
          return;
        case 'ping':
          this.send(pongFrame(frame.ts ?? Date.now()));
          return;
        case 'pong':
          return;
        case 'hello':
          this.send(errorFrame('INVALID_ENVELOPE', 'already authenticated: hello is only valid as the first frame'));
          return;
        case 'subscribe_routes':
          if (!this.host.subscribeRoutes) throw new ReachError('INVALID_ENVELOPE', 'this dispatcher serves no routes view');
          await this.host.subscribeRoutes(this);
          return;
        case 'refresh_token': {
          // The SDK's token renewal on the open connection: sends after this carry the new token.
          let claims: TokenClaims;
          try {
            claims = await this.host.verifyRenewal(agent, frame.token);
          } catch (err) {
            const e = toReachError(err);
            if (e.codeName !== 'AUTH_FAILED') throw e;
            this.authFailed(e.message);
            return;
          }
          if (this.isClosed) return;
          this.token = frame.token;
          this.claims = claims;
          this.send(tokenRefreshedFrame(claims.exp));
          return;
        }
      }
    } catch (err) {
      const e = toReachError(err);
      if (e.codeName === 'INTERNAL') this.log.error({ err, frame: frame.type }, 'frame failed');
      this.send(errorFrameOf(e, clientRef));
    }
  }

  /** `send`: the agent produces a message through its connection (same checks as ingress). */
  private async sendMessage(frame: SendFrame): Promise<void> {
    try {
      if (this.claims && this.claims.exp * 1000 <= Date.now()) throw new ReachError('AUTH_FAILED', 'token expired');
      const traceparent = typeof frame.envelope.traceparent === 'string' ? frame.envelope.traceparent : undefined;
      const envelope = envelopeFromJson(frame.envelope, { producer: this.agentId!, ...(traceparent ? { traceparent } : {}) });
      const invalid = validateEnvelope(envelope, { maxPayloadBytes: this.host.config.maxPayloadBytes });
      if (invalid) throw invalid;
      const headers: Record<string, string> = { [TOKEN_HEADER]: this.token };
      if (traceparent) headers.traceparent = traceparent;
      const record = {
        topic: TOPICS.ingress.name,
        key: envelope.session_id ?? envelope.message_id,
        value: this.host.codec.encode(INGRESS_SUBJECT, envelope),
        headers,
      };
      await withTimeout(
        this.host.outbox.send([record]),
        this.host.config.sendTimeoutMs,
        () => new ReachError('DEPENDENCY_UNAVAILABLE', 'Kafka did not confirm the message in time; it may still be written'),
      );
      this.host.metrics.sends.inc({ outcome: 'accepted' });
      this.send(acceptedFrame(frame.client_ref, envelope.message_id));
    } catch (err) {
      this.host.metrics.sends.inc({ outcome: 'error' });
      throw err;
    }
  }

  private forget(messageId: string, seq: number): void {
    if (this.inflight.get(messageId) === seq) this.inflight.delete(messageId);
    this.sentAt.delete(seq);
  }

  /** An ack or reject of a delivery sent on this socket: how long the agent took to answer. */
  private answered(messageId: string, seq: number, outcome: 'ack' | 'reject'): void {
    const sent = this.sentAt.get(seq);
    if (sent !== undefined) {
      const ms = performance.now() - sent;
      this.host.metrics.dispatchSeconds.observe({ outcome }, ms / 1000);
      this.answerTime.observe(ms);
    }
    this.forget(messageId, seq);
  }

  /** Counts the handshake once, by how it ended (the connect success rate's numerator and denominator). */
  private countAttempt(outcome: 'connected' | 'auth_failed' | 'unavailable' | 'aborted'): void {
    if (this.attemptCounted) return;
    this.attemptCounted = true;
    this.host.metrics.connectAttempts.inc({ outcome });
  }

  // ── outbound ─────────────────────────────────────────────────────────────────────────────

  /** A new buffer entry of this agent, announced by the consuming instance. */
  deliver(entry: string): void {
    if (this.state !== 'open') return; // the replay after welcome reads it from the buffer
    const seq = entrySeq(entry);
    if (seq === undefined || seq <= this.sentUpTo) return;
    if (!this.pumping && seq === this.sentUpTo + 1 && !this.backedUp) {
      // Its consumer or promoter checked the budget with the base margin; an agent answering
      // slowly needs a wider one (tooLateToSend). Not sent, the deadline sweep ends it DEAD.
      if (this.answerTime.widensMargin && entryTooLateToSend(entry, Date.now(), this.answerTime.ms)) this.skip(seq);
      else this.sendEntry(seq, entry);
    } else void this.pump();
  }

  /** Sends every buffered entry after `sentUpTo`, in order; coalesces concurrent calls. */
  async pump(): Promise<void> {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    const agent = this.agentId!;
    try {
      do {
        this.pumpAgain = false;
        for (;;) {
          const { entries } = await this.host.buffer.readAfter(agent, this.sentUpTo, PUMP_BATCH);
          let stale = false;
          // Entries that sat here past their time (behind a replay or a backlog the agent was
          // slow to read) get their ack window from now, before they go out (renewedAtSend).
          const now = Date.now();
          const renewals = entries.flatMap(({ seq, entry }) => {
            const until = seq > this.sentUpTo ? renewedAtSend(entry, now, this.host.config.ackTimeoutMs) : undefined;
            return until === undefined ? [] : [{ agent, seq, until }];
          });
          if (renewals.length > 0) await this.host.buffer.holdDeadlines(renewals);
          for (const { seq, entry } of entries) {
            if (seq <= this.sentUpTo) continue;
            // Not sent too late either (routed-consumer.ts pastBudget): a delivery the consumer kept
            // back as past its budget is buffered but never announced, and the gap it leaves
            // brings the pump here. Skipped, the deadline sweep ends it DEAD 3005.
            if (entryTooLateToSend(entry, now, this.answerTime.ms)) {
              this.skip(seq);
              continue;
            }
            // A replay or a burst may be megabytes: send it at the pace the agent reads, so that
            // our own burst never makes a healthy agent look slow. After such a wait, read again
            // (the rest may have been swept meanwhile and retried elsewhere).
            if (this.backedUp) {
              if (!(await this.drained())) return;
              stale = true;
              break;
            }
            if (this.state !== 'open' || !this.sendEntry(seq, entry)) return;
          }
          if (!stale && entries.length < PUMP_BATCH) break;
        }
      } while (this.pumpAgain && this.state === 'open');
    } catch (err) {
      // Redis is away: nothing is lost (the entries stay buffered); the next ping tick pumps again.
      this.log.warn({ err }, 'could not read the replay buffer');
    } finally {
      this.pumping = false;
    }
  }

  /** More than half the buffer limit waits unread: deliveries wait for the agent to read. */
  private get backedUp(): boolean {
    return this.ws.bufferedAmount > this.host.config.maxBufferedBytes / 2;
  }

  /**
   * Waits until the outbound buffer is down to half its limit; false if the connection closed.
   * A buffer that does not shrink for REACH_WS_SLOW_AFTER_MS is an agent that stopped reading:
   * closed as slow (R-C5), its deliveries stay buffered for its next connection.
   */
  private async drained(): Promise<boolean> {
    let lowest = this.ws.bufferedAmount;
    let drainedAt = Date.now();
    while (this.state === 'open' && this.backedUp) {
      await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
      const now = Date.now();
      if (this.ws.bufferedAmount < lowest) [lowest, drainedAt] = [this.ws.bufferedAmount, now];
      else if (now - drainedAt >= this.host.config.slowAfterMs && this.state === 'open') {
        this.closeSlow(`outbound buffer not drained for ${now - drainedAt} ms`);
        return false;
      }
    }
    return this.state === 'open';
  }

  /** Passes over entry `seq` without sending it (too late for its budget). */
  private skip(seq: number): void {
    this.sentUpTo = seq;
  }

  /** Sends a delivery; its caller checked the pace (the buffer bound is theirs to keep, not send's). */
  private sendEntry(seq: number, entry: string): boolean {
    if (!this.send(frameOf(entry), false)) return false;
    this.sentUpTo = seq;
    this.host.sent(this.agentId!, seq, entry);
    const mid = entryMessageId(entry);
    if (mid !== undefined) {
      if (this.inflight.size >= MAX_INFLIGHT) this.inflight.delete(this.inflight.keys().next().value!);
      this.inflight.set(mid, seq);
      if (this.sentAt.size >= MAX_INFLIGHT) this.sentAt.delete(this.sentAt.keys().next().value!);
      this.sentAt.set(seq, performance.now());
    }
    this.host.metrics.deliveriesSent.inc();
    if (seq <= this.replayUpTo) this.host.metrics.replayedFrames.inc();
    return true;
  }

  /**
   * Sends a text frame; false (and the connection is gone) when it could not. `limitBuffer`:
   * close the connection as slow when more than the limit waited unread before this frame —
   * for control frames (pings, accepted, errors), which an agent that sends but never reads
   * could otherwise pile up. Deliveries are paced by their callers instead (backedUp).
   */
  private send(text: string, limitBuffer = true): boolean {
    if (this.state === 'closed') return false;
    if (this.ws.readyState !== WebSocket.OPEN) {
      this.dropFailed(new Error('socket is not open'));
      return false;
    }
    const unread = this.ws.bufferedAmount;
    this.ws.send(text, (err) => {
      if (err) this.dropFailed(err);
    });
    if (limitBuffer && unread > this.host.config.maxBufferedBytes) {
      this.closeSlow('outbound buffer over its limit');
      return false;
    }
    return true;
  }

  /** Closes an agent that does not read as slow (1013); its deliveries stay buffered (R-C5). */
  private closeSlow(why: string): void {
    this.host.metrics.slowDisconnects.inc();
    this.log.warn({ buffered: this.ws.bufferedAmount, agent_id: this.agentId }, `agent too slow: ${why}; closing (its deliveries stay buffered)`);
    this.close(CLOSE.SLOW, 'outbound buffer over limit', true);
  }

  // ── heartbeats and limits ────────────────────────────────────────────────────────────────

  /** Called by the gateway's sweep: auth timeout, idle timeout, token expiry, pings. */
  tick(now: number): void {
    if (this.state === 'auth' || this.state === 'authenticating') {
      if (this.state === 'auth' && now - this.openedAt >= this.host.config.authTimeoutMs) this.authFailed('no hello within the auth timeout');
      return;
    }
    if (this.state !== 'open') return;
    if (now - this.lastSeen >= this.host.config.idleTimeoutMs) {
      this.send(errorFrame('HEARTBEAT_TIMEOUT', `no frame for ${now - this.lastSeen} ms`));
      this.close(CLOSE.HEARTBEAT_TIMEOUT, 'heartbeat timeout');
      return;
    }
    if (this.claims && this.claims.exp * 1000 <= now) {
      this.authFailed('token expired');
      return;
    }
    if (now - this.lastPingAt >= this.host.config.pingIntervalMs) {
      this.lastPingAt = now;
      if (this.send(pingFrame(now))) void this.pump(); // also heals a pub/sub message lost in a Redis reconnect
    }
  }

  // ── closing ──────────────────────────────────────────────────────────────────────────────

  /** Closes with 4003 (also used by the gateway when the token is revoked). */
  authFailed(reason: string): void {
    if (this.state === 'auth' || this.state === 'authenticating') {
      this.countAttempt('auth_failed');
      this.host.helloRefused?.(this);
    }
    this.host.metrics.authFailures.inc();
    this.log.info({ reason }, 'auth failed');
    this.send(errorFrame('AUTH_FAILED', reason));
    this.close(CLOSE.AUTH_FAILED, 'auth failed');
  }

  private unavailable(err: ReachError): void {
    this.countAttempt('unavailable');
    this.log.warn({ err }, 'connection refused: a dependency is unavailable');
    this.send(errorFrameOf(err));
    this.close(CLOSE.SLOW, 'try again later');
  }

  /** A newer connection of this agent took over. */
  replace(): void {
    this.replaced = true;
    this.send(errorFrame('CONNECTION_CLOSED', 'replaced by a newer connection of this agent'));
    this.close(CLOSE.DUPLICATE, 'duplicate connection');
  }

  /** A send failed: drop the connection at once, nothing more goes to a half-dead socket. */
  private dropFailed(err: Error): void {
    if (this.state === 'closed') return;
    this.host.metrics.failedSends.inc();
    this.log.warn({ err }, 'send failed; dropping the connection');
    this.state = 'closed';
    this.ws.terminate();
    this.host.unregister(this);
  }

  close(code: number, reason: string, terminateSoon = false): void {
    if (this.state === 'closed') return;
    this.countAttempt('aborted');
    this.state = 'closed';
    this.host.metrics.closes.inc({ code: String(code) });
    try {
      this.ws.close(code, reason);
    } catch (err) {
      this.log.debug({ err }, 'close failed');
    }
    // A slow peer may never read our close frame (it sits behind megabytes of data).
    setTimeout(() => this.ws.terminate(), terminateSoon ? 1000 : 5000).unref();
    this.host.unregister(this);
  }

  private closed(code: number): void {
    this.countAttempt('aborted');
    this.closedNormally = code === 1000;
    if (this.state !== 'closed') {
      this.state = 'closed';
      this.host.metrics.closes.inc({ code: String(code) });
    }
    this.host.unregister(this);
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
