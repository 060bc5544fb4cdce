import { NonRetryableError, ReachError, newId, newMessageId, silentLogger, type Logger } from '@reach/core';
import { AgentReplacedError } from './agent-replaced.js';
import { CLOSE } from './agent-socket.js';
import { reconnectDelayMs } from './backoff.js';
import { DeliveryRunner } from './delivery-runner.js';
import { EarlyBeat } from './early-beat.js';
import type { AgentFrame, DeliverFrame, ServerFrame } from './frames.js';
import {
  EVENT,
  RECEIPT,
  TASK_REQUEST,
  TASK_RESULT,
  type AgentApi,
  type AgentNodeOptions,
  type Handler,
  type NodeEvents,
  type Reply,
  type RequestOptions,
  type SendOptions,
} from './node-types.js';
import { envelopeFields } from './payload.js';
import { PendingRequests, errorForCode, receiptOf } from './pending-requests.js';
import { RoutesView, type RouteKind } from './routes-view.js';
import { ReachClient } from './reach-client.js';
import { contextToHeaders } from './session.js';
import { refreshDelayMs, tokenLifetime } from './token-expiry.js';
import type { AgentDescriptor, CapabilitySpec, LoadReport, Registration, SendFields } from './types.js';
import { networkTransport, type AgentConnection, type AgentTransport, type RegistryApi } from './transport.js';
import { lazyDirectTransport } from './direct/lazy-transport.js';
import { modeOf } from './mode.js';

/** Frames kept while disconnected; beyond this the oldest go (the dispatcher retries their deliveries). */
const MAX_OUTBOX = 10_000;
/**
 * How long an answer (result, ack, reject) written to the socket stays "unsure": if the connection drops
 * within this time, it is written again on the next one. A dispatcher killed with SIGKILL loses
 * the frames it had read but not yet acted on, and the agent's hello.last_seq (the highest seq
 * it received) keeps the new dispatcher from replaying those deliveries: unanswered, they timed
 * out and ran again on another agent (`pnpm chaos`: 74 of 280,126 keys). An answer the
 * dispatcher did take is harmless twice (the seq is gone: it is ignored). A result goes again
 * with its ack: an ack re-sent alone would make the message DELIVERED without its result.
 */
const UNSURE_ANSWER_MS = 5_000;
/** A failed token refresh is tried again this soon (the old token still has a fifth of its life). */
const TOKEN_REFRESH_RETRY_MS = 5000;

interface PendingSend {
  frame: AgentFrame;
  resolve: (messageId: string) => void;
  reject: (err: ReachError) => void;
  timer: NodeJS.Timeout;
  /** The socket it was written to; undefined while it waits for a connection. */
  socket: AgentConnection | undefined;
}

type State = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

/**
 * How the node reaches Agent-Reach: `queued` (the default) through the services, `direct`
 * through the in-process LocalReach (the option's, else the process's shared one).
 */
function transportOf(options: AgentNodeOptions): AgentTransport {
  if (modeOf(options.mode) === 'direct') return lazyDirectTransport(options.reach);
  if (!options.registryUrl || !options.dispatcherUrl) {
    throw new Error('AgentNode needs registryUrl and dispatcherUrl in queued mode (or mode: "direct", AGENT_REACH_MODE=direct)');
  }
  return networkTransport(options.registryUrl, options.dispatcherUrl, options.tls);
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * An agent on Agent-Reach (R-G1): registers its capabilities, heartbeats its real load,
 * holds one WebSocket to the dispatcher (reconnecting with backoff, renewing its token before
 * it expires), runs deliveries through handlers (DeliveryRunner: concurrency limit, dedupe,
 * ack/reject/result), and sends, publishes and requests over the same socket.
 */
export class AgentNode implements AgentApi {
  private readonly log: Logger;
  private readonly transport: AgentTransport;
  private readonly registry: RegistryApi;
  private readonly random: () => number;
  private readonly runner: DeliveryRunner;
  /** A heartbeat as soon as the load crosses the busy line, not half a lease later. */
  private readonly earlyBeat: EarlyBeat;
  private readonly requests = new PendingRequests();
  /** What this agent can reach, from the dispatcher's `routes` frames (pre-flight, R-G6). */
  private readonly routes = new RoutesView();
  private readonly sends = new Map<string, PendingSend>();
  private readonly listeners = new Map<keyof NodeEvents, Set<(arg: never) => void>>();
  private readonly abort = new AbortController();
  private readonly sleepers = new Set<{ timer: NodeJS.Timeout; wake: () => void }>();
  private outbox: AgentFrame[] = [];
  /** Results, acks and rejects written lately, with the socket and time (see UNSURE_ANSWER_MS). */
  private unsure: Array<{ frame: AgentFrame; socket: AgentConnection; at: number }> = [];
  private state: State = 'new';
  private registration: Registration | undefined;
  private capabilities: CapabilitySpec[] = [];
  private socket: AgentConnection | undefined;
  /** The highest seq received: acked, being processed, or queued here (sent as hello.last_seq). */
  private lastSeq = 0;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private heartbeatEveryMs = 0;
  private beating = false;
  private refreshTimer: NodeJS.Timeout | undefined;
  private loop: Promise<void> | undefined;
  private needsRegister = false;
  private stopping: Promise<void> | undefined;
  /** Set when a newer connection of this agent took over (4001): the node stopped for good. */
  private replacedBy: AgentReplacedError | undefined;
  /** The connection a connect() in progress replaces (the dispatcher closes it with 4001). */
  private superseded: AgentConnection | undefined;
  private signalHandler: ((signal: NodeJS.Signals) => void) | undefined;

  constructor(private readonly options: AgentNodeOptions) {
    this.log = options.logger ?? silentLogger;
    this.transport = transportOf(options);
    this.registry = this.transport.registry;
    this.random = options.random ?? Math.random;
    const maxConcurrency = options.descriptor.metadata?.max_concurrency ?? 10;
    this.earlyBeat = new EarlyBeat({
      maxConcurrency,
      running: () => this.runner.running,
      beat: () => {
        if (!this.registration || this.state === 'stopping' || this.state === 'stopped') return true; // nothing to tell
        if (this.beating) return false; // one is on its way: try again after the gap
        void this.beat();
        return true;
      },
    });
    this.runner = new DeliveryRunner({
      maxConcurrency,
      onLoadChanged: () => this.earlyBeat.changed(),
      dedupe: options.dedupe,
      ...(options.reportProgress === undefined ? {} : { reportProgress: options.reportProgress }),
      log: this.log,
      agentId: () => this.agentId,
      send: (frame) => this.sendFrame(frame),
      api: this,
      signal: this.abort.signal,
    });
  }

  // ── declaring what the agent does ─────────────────────────────────────────────────────

  /** Serves a capability (mode `handle`: exactly one agent gets each message). Call before start(). */
  handle<P = unknown, R = unknown>(capability: string, handler: Handler<P, R>): this {
    this.beforeStart('handle');
    this.runner.handle(capability, handler as Handler);
    return this;
  }

  /** Subscribes to a topic (mode `subscribe`: every subscriber gets a copy). Call before start(). */
  subscribe<P = unknown>(topic: string, handler: Handler<P, unknown>): this {
    this.beforeStart('subscribe');
    this.runner.subscribe(topic, handler as Handler);
    return this;
  }

  /** Handles messages addressed to this agent by id (target_agent_id) that are no reply to its own requests. */
  onDirect<P = unknown, R = unknown>(handler: Handler<P, R>): this {
    this.runner.setDirect(handler as Handler);
    return this;
  }

  on<K extends keyof NodeEvents>(event: K, listener: (arg: NodeEvents[K]) => void): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener as (arg: never) => void);
    return () => set.delete(listener as (arg: never) => void);
  }

  // ── what the node is ──────────────────────────────────────────────────────────────────

  /** The agent id the registry gave (undefined before start()). */
  get agentId(): string | undefined {
    return this.registration?.agent_id;
  }

  /** The current agent token (for the HTTP API or Kafka ingress). */
  get token(): string | undefined {
    return this.registration?.token;
  }

  get connected(): boolean {
    return this.socket?.isOpen ?? false;
  }

  get status(): State {
    return this.state;
  }

  /** What the next heartbeat will report. */
  load(): LoadReport {
    return this.runner.load();
  }

  /** The HTTP API (docs/design.md §3) as this agent: submit with wait, status, timeline, traces. Needs ingressUrl. */
  client(): ReachClient {
    if (!this.options.ingressUrl) throw new Error('AgentNode.client() needs the ingressUrl option');
    return new ReachClient({
      ingressUrl: this.options.ingressUrl,
      registryUrl: this.options.registryUrl,
      token: this.token,
      ...(this.options.tls ? { tls: this.options.tls } : {}),
    });
  }

  // ── lifecycle ─────────────────────────────────────────────────────────────────────────

  /** Registers, starts heartbeating and connects; resolves once the dispatcher has welcomed the agent. */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`AgentNode.start() called twice (state ${this.state})`);
    this.state = 'starting';
    this.capabilities = this.declaredCapabilities();
    try {
      await this.register();
      this.startHeartbeat();
      await this.connect();
    } catch (err) {
      this.log.error({ err: message(err) }, 'agent failed to start');
      await this.shutdown(0);
      throw err;
    }
    if (this.state === 'starting') this.state = 'running';
    if (this.options.handleSignals ?? true) this.installSignalHandlers();
  }

  /**
   * Stops taking work (queued and new deliveries go back to the dispatcher, retryable), waits
   * up to drainTimeoutMs for running handlers, sends their acks, deregisters and closes.
   */
  stop(options: { drainTimeoutMs?: number } = {}): Promise<void> {
    if (this.state === 'stopped') return Promise.resolve();
    this.stopping ??= this.shutdown(options.drainTimeoutMs ?? this.options.drainTimeoutMs ?? 10_000);
    return this.stopping;
  }

  /**
   * start() (unless started), then serves until the node stops: resolves after stop(), SIGTERM
   * or SIGINT; rejects with AgentReplacedError when a newer connection of the agent took over
   * (4001) — another process runs as this agent, and this one stopped without reconnecting.
   */
  async run(): Promise<void> {
    if (this.state === 'new') await this.start();
    if (this.state !== 'stopped') await new Promise<void>((resolve) => this.on('stopped', () => resolve()));
    if (this.replacedBy) throw this.replacedBy;
  }

  /** True once a newer connection of this agent took over (4001) and the node stopped. */
  get replaced(): boolean {
    return this.replacedBy !== undefined;
  }

  // ── sending ───────────────────────────────────────────────────────────────────────────

  /**
   * Sends one message over the WebSocket (`send` frame); resolves with its message id once the
   * dispatcher accepted it, rejects with the `error` frame's code. While disconnected it waits
   * for the next connection, up to sendTimeoutMs. `{ preflight: true }` checks a capability or
   * topic against the local routes view first (2001, 2003, 3001 without sending; a message with
   * expire_at, which the router parks instead, only for 2003).
   */
  send(fields: SendFields, options: { preflight?: boolean } = {}): Promise<string> {
    if (this.state === 'stopped' || this.state === 'stopping') {
      return Promise.reject(new ReachError('CONNECTION_CLOSED', 'the agent node is stopped'));
    }
    const targets = [fields.capability, fields.topic, fields.target_agent_id].filter((t) => t !== undefined && t !== null && t !== '');
    if (targets.length !== 1) {
      return Promise.reject(new NonRetryableError('INVALID_ENVELOPE', `exactly one of capability, topic, target_agent_id must be set (got ${targets.length})`));
    }
    if (options.preflight === true && this.preflightOn) {
      // A message with expire_at may wait for an agent: the router parks it rather than refuse it.
      const mayWait = fields.expire_at !== undefined && fields.expire_at !== null;
      const refused = fields.capability
        ? this.routes.refusal('capability', fields.capability, { mayWait })
        : fields.topic
          ? this.routes.refusal('topic', fields.topic, { mayWait })
          : undefined;
      if (refused) return Promise.reject(refused);
    }
    const clientRef = newId('ref');
    // The id is chosen here so a request can wait for its answer before the send completes.
    const body = envelopeFields({ ...fields, message_id: fields.message_id ?? newMessageId() });
    if (this.agentId) body.producer = this.agentId;
    const frame = { ...body, type: 'send', client_ref: clientRef } as AgentFrame;
    const timeoutMs = this.options.sendTimeoutMs ?? 10_000;
    return new Promise<string>((resolve, reject) => {
      const pending: PendingSend = {
        frame,
        resolve,
        reject,
        socket: undefined,
        timer: setTimeout(() => {
          this.sends.delete(clientRef);
          reject(new ReachError('CONNECT_TIMEOUT', `the dispatcher did not accept message ${String(body.message_id)} within ${timeoutMs} ms`));
        }, timeoutMs),
      };
      this.sends.set(clientRef, pending);
      this.writeSend(pending);
    });
  }

  /** Publishes an event to a topic: every subscriber gets a copy (R-B8). */
  publish(topic: string, payload: unknown, options: SendOptions = {}): Promise<string> {
    return this.send({ topic, message_type: EVENT, payload, ...this.sendFields(options) }, { preflight: options.preflight ?? false });
  }

  /** R-G1's name for publish(). */
  emit(topic: string, payload: unknown, options: SendOptions = {}): Promise<string> {
    return this.publish(topic, payload, options);
  }

  /**
   * Asks the agent serving `capability` and resolves with its result (R-C9): the request
   * carries reply_to = this agent; the result comes back as a task_result correlated by the
   * request's message id. Rejects with 2001 when nobody offers the capability (pre-flight,
   * R-G6), 3002 on timeout, or the code of a failure receipt.
   */
  async request<R = unknown>(capability: string, payload: unknown, options: RequestOptions = {}): Promise<R> {
    return (await this.requestReply<R>(capability, payload, options)).payload;
  }

  /** request() with the reply's context fragments and the whole result message. */
  async requestReply<R = unknown>(capability: string, payload: unknown, options: RequestOptions = {}): Promise<Reply<R>> {
    const agentId = this.agentId;
    if (!agentId) throw new ReachError('CONNECTION_CLOSED', 'request() needs a started node (reply_to is this agent)');
    if ((options.preflight ?? true) && this.preflightOn) {
      // The local view when the dispatcher sent one (no round trip; 2001, 2003 or 3001), else the registry.
      const refused = this.routes.refusal('capability', capability);
      if (refused) throw refused;
      if (this.routes.verdict('capability', capability) === undefined && !(await this.registryOffers(capability))) {
        throw new NonRetryableError('NO_ROUTE', `no live agent offers ${capability}`, { details: { capability } });
      }
    }
    const timeoutMs = options.timeoutMs ?? this.options.requestTimeoutMs ?? 30_000;
    const messageId = newMessageId();
    const context = options.context ?? {};
    const reply = this.requests.wait<R>(messageId, capability, context, timeoutMs);
    try {
      await this.send({
        ...this.sendFields(options),
        message_id: messageId,
        message_type: TASK_REQUEST,
        capability,
        payload,
        reply_to: agentId,
        timeout_ms: timeoutMs,
        headers: { ...options.headers, ...contextToHeaders(context) },
      });
    } catch (err) {
      this.requests.forget(messageId);
      throw err;
    }
    return reply;
  }

  /**
   * Pre-flight (R-G6): would a message to `capability` (or a topic) be routed now? From the
   * node's local view (the dispatcher's `routes` frames: ONLINE, connected, domain allowed,
   * circuit not open) once it has one, else from the registry (any ONLINE agent offers it).
   */
  async canReach(name: string, kind: RouteKind = 'capability'): Promise<boolean> {
    const verdict = this.routes.verdict(kind, name);
    if (verdict !== undefined) return verdict === 0;
    return kind === 'capability' ? this.registryOffers(name) : true;
  }

  /** The local routes view's verdict: 0 routable, else the refusal code; undefined before the first view arrived or for a name it does not hold. */
  routeVerdict(name: string, kind: RouteKind = 'capability'): number | undefined {
    return this.routes.verdict(kind, name);
  }

  /**
   * The local routes view: `off` (preflight: false), `waiting` (no complete view on the current
   * connection yet: nothing is refused from it) or `ready`.
   */
  get routesView(): 'off' | 'waiting' | 'ready' {
    if (!this.preflightOn) return 'off';
    return this.routes.ready ? 'ready' : 'waiting';
  }

  private get preflightOn(): boolean {
    return this.options.preflight ?? true;
  }

  private async registryOffers(capability: string): Promise<boolean> {
    const agents = await this.registry.list({ capability }, this.registration?.token ?? this.options.token);
    return agents.some((a) => (a.status ?? 'ONLINE') === 'ONLINE');
  }

  private sendFields(options: SendOptions): Partial<SendFields> {
    return {
      session_id: options.sessionId,
      headers: options.headers,
      priority: options.priority,
      idempotency_key: options.idempotencyKey,
      trace_id: options.traceId,
      traceparent: options.traceparent,
      tags: options.tags,
    };
  }

  // ── registration, heartbeats, token refresh ──────────────────────────────────────────

  private beforeStart(what: string): void {
    if (this.state !== 'new') throw new Error(`${what}() must be called before start(): capabilities are registered at start`);
  }

  private declaredCapabilities(): CapabilitySpec[] {
    const byName = new Map<string, CapabilitySpec>();
    for (const c of this.options.descriptor.capabilities ?? []) {
      const spec: CapabilitySpec = typeof c === 'string' ? { name: c, mode: 'handle' } : { mode: 'handle', ...c };
      byName.set(spec.name, spec);
    }
    const handled = new Set(this.runner.capabilityNames);
    const subscribed = new Set(this.runner.topicNames);
    for (const name of handled) if (!byName.has(name)) byName.set(name, { name, mode: 'handle' });
    for (const name of subscribed) if (!byName.has(name)) byName.set(name, { name, mode: 'subscribe' });
    for (const spec of byName.values()) {
      const served = spec.mode === 'subscribe' ? subscribed.has(spec.name) : handled.has(spec.name);
      if (!served) this.log.warn({ capability: spec.name }, 'capability declared without a handler: its deliveries will be rejected');
    }
    return [...byName.values()];
  }

  private async register(): Promise<Registration> {
    const previous = this.registration;
    const descriptor: AgentDescriptor = {
      ...this.options.descriptor,
      // Re-registering under the same id replaces the record atomically (R-A3) and keeps the delivery stream.
      agent_id: previous?.agent_id ?? this.options.descriptor.agent_id,
      capabilities: this.capabilities,
    };
    const reg = await this.registerWithBestToken(descriptor, previous);
    if (previous && reg.agent_id !== previous.agent_id) {
      this.log.warn({ agent_id: reg.agent_id, previous_agent_id: previous.agent_id }, 'the registry gave a new agent id; the delivery stream starts over');
      this.lastSeq = 0;
    }
    this.registration = reg;
    this.scheduleTokenRefresh();
    this.log.info(
      { agent_id: reg.agent_id, lease_id: reg.lease_id, heartbeat_interval_ms: reg.heartbeat_interval_ms },
      previous ? 're-registered' : 'registered',
    );
    if (!previous) for (const w of reg.warnings ?? []) this.log.warn({ agent_id: reg.agent_id, field: w.field }, `registry: ${w.message}`);
    this.fire('registered', { agent_id: reg.agent_id, lease_id: reg.lease_id });
    return reg;
  }

  /**
   * Re-registering an existing id needs the agent's own token (or the admin token): the
   * enrollment token may only create ids (so nobody hijacks a live agent). So the agent's
   * current token goes first while it is valid; the configured token is the fallback, e.g.
   * after the old token expired or was revoked.
   */
  private async registerWithBestToken(descriptor: AgentDescriptor, previous: Registration | undefined): Promise<Registration> {
    const own = previous && (tokenLifetime(previous.token)?.expiresAt ?? Infinity) > Date.now() + 1000 ? previous.token : undefined;
    const tokens = [...new Set([own, this.options.token].filter((t) => t !== undefined))];
    if (tokens.length === 0) return this.registry.register(descriptor);
    for (let i = 0; ; i++) {
      try {
        return await this.registry.register(descriptor, tokens[i]);
      } catch (err) {
        const last = i === tokens.length - 1;
        if (last || !(err instanceof ReachError && err.codeName === 'AUTH_FAILED')) throw err;
        this.log.warn({ agent_id: previous?.agent_id, err: err.message }, 'registration refused the agent token; trying the configured token');
      }
    }
  }

  /** Heartbeats come from a timer, independent of deliveries, so running handlers never delay them. */
  private startHeartbeat(): void {
    const every = this.registration!.heartbeat_interval_ms;
    if (this.heartbeatTimer && every === this.heartbeatEveryMs) return;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatEveryMs = every;
    this.heartbeatTimer = setInterval(() => void this.beat(), every);
  }

  private async beat(): Promise<void> {
    const reg = this.registration;
    if (this.beating || !reg || this.state === 'stopped') return;
    this.beating = true;
    try {
      const load = this.load();
      this.earlyBeat.sent(load.current_load);
      await this.registry.heartbeat(reg.agent_id, reg.token, load);
    } catch (err) {
      const status = err instanceof ReachError ? err.details?.http_status : undefined;
      if (err instanceof ReachError && (err.codeName === 'AUTH_FAILED' || status === 404 || status === 410)) {
        // The lease is gone (expired while we were away) or the token was refused: register again.
        this.log.warn({ agent_id: reg.agent_id, code: err.code, err: err.message }, 'heartbeat refused; re-registering');
        this.reconnect({ reRegister: true, immediate: true });
      } else {
        this.log.warn({ agent_id: reg.agent_id, err: message(err) }, 'heartbeat failed');
      }
    } finally {
      this.beating = false;
    }
  }

  private scheduleTokenRefresh(delay = refreshDelayMs(this.registration!.token, Date.now(), this.options.tokenRefreshRatio ?? 0.8)): void {
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => void this.refreshToken(), delay);
  }

  /**
   * Renews the token before it expires without dropping the connection: re-register (which
   * issues a new token), then hand the new token to the open connection (`refresh_token`).
   * Without an open connection the reconnect loop does both. A failed re-registration is
   * tried again shortly while the old token still lives; once it has expired the dispatcher
   * closes the connection (4003) and the reconnect loop re-registers.
   */
  private async refreshToken(): Promise<void> {
    if (this.state !== 'running') return;
    if (this.loop || !this.socket?.isOpen) {
      this.reconnect({ reRegister: true, immediate: true });
      return;
    }
    this.log.info({ agent_id: this.agentId }, 'token nears expiry; re-registering and renewing it on the open connection');
    try {
      await this.register(); // schedules the next refresh
      this.startHeartbeat();
    } catch (err) {
      this.log.warn({ agent_id: this.agentId, err: message(err) }, 'token refresh failed; trying again');
      this.scheduleTokenRefresh(TOKEN_REFRESH_RETRY_MS);
      return;
    }
    const token = this.registration!.token;
    if (!this.socket?.send({ type: 'refresh_token', token })) this.reconnect({ reRegister: false, immediate: true });
  }

  // ── the connection ────────────────────────────────────────────────────────────────────

  /**
   * Opens a connection and makes it current. The previous one (a token refresh) stays open
   * until the new one is welcomed, so no delivery is dropped in between; its in-flight work is
   * acked on the new one.
   */
  private async connect(): Promise<void> {
    const reg = this.registration!;
    // The dispatcher closes the previous connection with 4001 when this one says hello: that
    // 4001 is this node's own doing, not another process taking the agent.
    this.superseded = this.socket;
    const { socket, welcome } = await this.transport
      .open({
        hello: { agent_id: reg.agent_id, token: reg.token, last_seq: this.lastSeq },
        connectTimeoutMs: this.options.connectTimeoutMs ?? 10_000,
        pingIntervalMs: this.options.pingIntervalMs ?? 15_000,
        idleTimeoutMs: this.options.idleTimeoutMs ?? 30_000,
        log: this.log,
        onFrame: (frame) => this.onFrame(frame),
        onClose: (code, reason, s) => this.onSocketClose(code, reason, s),
      })
      .finally(() => {
        this.superseded = undefined;
      });
    if (this.state === 'stopping' || this.state === 'stopped') {
      socket.close(1000, 'agent stopping');
      throw new ReachError('CONNECTION_CLOSED', 'the node stopped while connecting');
    }
    const previous = this.socket;
    this.socket = socket;
    if (previous && previous !== socket) previous.close(1000, 'replaced by a new connection');
    this.log.info(
      { agent_id: reg.agent_id, connection_id: welcome.connection_id, last_seq: this.lastSeq, resume_from: welcome.resume_from },
      'connected to the dispatcher',
    );
    // The pre-flight view, kept up to date over this socket (a dispatcher that does not know the
    // frame answers with an error: the node then asks the registry, as before). What an earlier
    // connection's dispatcher said is forgotten: no verdict until this one's full view arrives.
    this.routes.reset();
    if (this.preflightOn) socket.send({ type: 'subscribe_routes' });
    this.flushOutbox();
    for (const pending of this.sends.values()) if (!pending.socket) this.writeSend(pending);
    this.fire('connected', { agent_id: reg.agent_id, connection_id: welcome.connection_id });
  }

  private onSocketClose(code: number, reason: string, socket: AgentConnection): void {
    // Sends written to this socket and not accepted may or may not have arrived: the caller decides.
    for (const [ref, pending] of this.sends) {
      if (pending.socket !== socket) continue;
      clearTimeout(pending.timer);
      this.sends.delete(ref);
      pending.reject(new ReachError('CONNECTION_CLOSED', `connection closed (${code}) before the dispatcher accepted the message`));
    }
    if (socket !== this.socket) return;
    this.socket = undefined;
    // The view came on this connection and is no longer kept current: it decides nothing until the next one's.
    this.routes.reset();
    this.resendUnsure(socket);
    this.fire('disconnected', { code, reason });
    if (this.state === 'stopping' || this.state === 'stopped') return;
    if (code === CLOSE.duplicate && socket !== this.superseded) {
      this.onReplaced();
      return;
    }
    if (code === CLOSE.duplicate) return; // replaced by the connection this node is opening
    this.log.warn({ agent_id: this.agentId, code, reason }, 'connection to the dispatcher lost; reconnecting');
    this.reconnect({ reRegister: code === CLOSE.authFailed, immediate: false });
  }

  /**
   * 4001: a newer connection of this agent (another process with the same agent id) holds it
   * now. Reconnecting would take the agent back from it, and it would do the same: the two
   * would take turns forever. So the newer one wins and this node stops, without deregistering
   * (that would end the other's registration too) and without heartbeats for an agent that is
   * not its own any more. What its handlers still run is answered nowhere: those deliveries are
   * replayed to the newer connection.
   */
  private onReplaced(): void {
    const agentId = this.agentId ?? '';
    this.replacedBy = new AgentReplacedError(agentId);
    this.log.error({ agent_id: agentId }, 'agent taken over by a newer connection (4001): stopping this node without deregistering');
    this.fire('replaced', { agent_id: agentId });
    this.earlyBeat.stop();
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.heartbeatTimer = undefined;
    this.refreshTimer = undefined;
    this.stopping ??= this.shutdown(this.options.drainTimeoutMs ?? 10_000, { deregister: false });
  }

  /**
   * The one reconnect loop: backoff 1 s doubling to 32 s plus jitter (R-G1), re-registering
   * first when the token was refused or is due. Concurrent triggers join the running loop.
   */
  private reconnect(opts: { reRegister: boolean; immediate: boolean }): void {
    if (opts.reRegister) this.needsRegister = true;
    if (this.loop || this.state === 'stopping' || this.state === 'stopped') return;
    this.loop = (async () => {
      let attempt = 0;
      let wait = !opts.immediate;
      while (this.state === 'running' || this.state === 'starting') {
        if (wait) {
          const delay = reconnectDelayMs(attempt++, this.random, this.options.reconnect);
          this.log.debug({ agent_id: this.agentId, delay_ms: delay, attempt }, 'reconnecting after backoff');
          await this.sleep(delay);
          if (this.state !== 'running' && this.state !== 'starting') return;
        }
        wait = true;
        try {
          if (this.needsRegister) {
            this.needsRegister = false;
            try {
              await this.register();
            } catch (err) {
              this.needsRegister = true;
              throw err;
            }
            this.startHeartbeat();
          }
          await this.connect();
          return;
        } catch (err) {
          if (err instanceof ReachError && err.codeName === 'AUTH_FAILED') this.needsRegister = true;
          this.log.warn({ agent_id: this.agentId, attempt, err: message(err) }, 'reconnect failed');
        }
      }
    })().finally(() => {
      this.loop = undefined;
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const sleeper = {
        wake: () => {
          clearTimeout(sleeper.timer);
          this.sleepers.delete(sleeper);
          resolve();
        },
        timer: setTimeout(() => sleeper.wake(), ms),
      };
      this.sleepers.add(sleeper);
    });
  }

  private sendFrame(frame: AgentFrame): void {
    const socket = this.socket;
    if (socket?.send(frame)) {
      if (frame.type === 'result' || frame.type === 'ack' || frame.type === 'reject') this.keepUnsure(frame, socket);
      return;
    }
    // Not connected: keep acks, rejects and results for the next connection instead of losing them.
    this.outbox.push(frame);
    if (this.outbox.length > MAX_OUTBOX) {
      this.outbox.shift();
      this.log.warn({ agent_id: this.agentId }, 'outbox full: dropping the oldest frame (its delivery will be retried by the dispatcher)');
    }
  }

  private keepUnsure(frame: AgentFrame, socket: AgentConnection): void {
    const now = Date.now();
    let drop = 0;
    while (drop < this.unsure.length && now - this.unsure[drop]!.at > UNSURE_ANSWER_MS) drop++;
    if (drop > 0) this.unsure = this.unsure.slice(drop);
    if (this.unsure.length >= MAX_OUTBOX) this.unsure.shift();
    this.unsure.push({ frame, socket, at: now });
  }

  /** The answers written to a socket that just closed, lately enough to be lost with it, go out again. */
  private resendUnsure(socket: AgentConnection): void {
    const since = Date.now() - UNSURE_ANSWER_MS;
    const again = this.unsure.filter((u) => u.socket === socket && u.at >= since).map((u) => u.frame);
    this.unsure = this.unsure.filter((u) => u.socket !== socket);
    if (again.length === 0) return;
    this.log.info({ agent_id: this.agentId, answers: again.length }, 'connection lost right after answers: they go out again on the next connection');
    this.outbox.unshift(...again);
  }

  private flushOutbox(): void {
    const frames = this.outbox;
    this.outbox = [];
    for (const f of frames) this.sendFrame(f);
  }

  private writeSend(pending: PendingSend): void {
    if (this.socket?.isOpen && this.socket.send(pending.frame)) pending.socket = this.socket;
  }

  // ── frames from the dispatcher ────────────────────────────────────────────────────────

  private onFrame(frame: ServerFrame): void {
    switch (frame.type) {
      case 'deliver':
        this.onDeliver(frame);
        return;
      case 'routes':
        this.routes.apply(frame);
        return;
      case 'accepted': {
        const pending = this.sends.get(frame.client_ref);
        if (!pending) return;
        clearTimeout(pending.timer);
        this.sends.delete(frame.client_ref);
        pending.resolve(frame.message_id);
        return;
      }
      case 'error': {
        const pending = frame.client_ref ? this.sends.get(frame.client_ref) : undefined;
        if (pending) {
          clearTimeout(pending.timer);
          this.sends.delete(frame.client_ref!);
          pending.reject(errorForCode(frame.code, frame.message || frame.name, { name: frame.name }));
        } else {
          this.log.warn({ agent_id: this.agentId, code: frame.code, name: frame.name, err: frame.message }, 'error from the dispatcher');
        }
        return;
      }
      default:
        return;
    }
  }

  private onDeliver(d: DeliverFrame): void {
    const m = d.message;
    if (d.seq > this.lastSeq) this.lastSeq = d.seq;
    const log = this.log.child({ agent_id: this.agentId, trace_id: m.trace_id, message_id: m.message_id, seq: d.seq });
    // Answers to this node's own sends are settled here and never reach a handler.
    if (m.message_type === RECEIPT) {
      const receipt = receiptOf(m);
      log.info({ about_message_id: receipt.message_id, code: receipt.code, status: receipt.status }, 'failure receipt');
      this.requests.settleReceipt(receipt);
      this.fire('receipt', receipt);
      this.runner.ack(d);
      return;
    }
    if (m.message_type === TASK_RESULT && m.correlation_id && this.requests.has(m.correlation_id)) {
      this.requests.settleResult(m);
      this.runner.ack(d);
      return;
    }
    this.runner.accept(d, log);
  }

  private fire<K extends keyof NodeEvents>(event: K, arg: NodeEvents[K]): void {
    for (const listener of this.listeners.get(event) ?? []) {
      try {
        (listener as (a: NodeEvents[K]) => void)(arg);
      } catch (err) {
        this.log.error({ event, err: message(err) }, 'event listener threw');
      }
    }
  }

  // ── shutdown ──────────────────────────────────────────────────────────────────────────

  private installSignalHandlers(): void {
    const onSignal = (signal: NodeJS.Signals) => {
      this.log.info({ agent_id: this.agentId, signal }, 'signal received: stopping the agent');
      // After a graceful stop the signal is raised again, so the process ends the way it would have without us.
      void this.stop().finally(() => process.kill(process.pid, signal));
    };
    this.signalHandler = onSignal;
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  }

  private async shutdown(drainTimeoutMs: number, opts: { deregister: boolean } = { deregister: true }): Promise<void> {
    const wasStarted = this.state !== 'new';
    this.state = 'stopping';
    this.earlyBeat.stop();
    if (this.signalHandler) {
      process.off('SIGTERM', this.signalHandler);
      process.off('SIGINT', this.signalHandler);
    }
    this.runner.stopAccepting();
    let drainTimer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      this.runner.idle().then(() => true),
      new Promise<boolean>((resolve) => {
        drainTimer = setTimeout(() => resolve(false), drainTimeoutMs);
      }),
    ]);
    clearTimeout(drainTimer);
    if (!drained) {
      this.log.warn({ agent_id: this.agentId, running: this.runner.running }, 'handlers still running after the drain timeout; abandoning them');
      this.abort.abort();
    }
    // The acks of finished work leave before the agent deregisters.
    await this.socket?.flushed();
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    for (const s of [...this.sleepers]) s.wake();
    const reg = this.registration;
    if (wasStarted && reg && opts.deregister) {
      try {
        await this.registry.deregister(reg.agent_id, reg.token);
        this.log.info({ agent_id: reg.agent_id }, 'deregistered');
      } catch (err) {
        this.log.warn({ agent_id: reg.agent_id, err: message(err) }, 'deregistration failed; the lease will expire');
      }
    }
    this.state = 'stopped';
    this.socket?.close(1000, 'agent stopped');
    this.socket = undefined;
    const closed = new ReachError('CONNECTION_CLOSED', 'the agent node stopped');
    for (const p of this.sends.values()) {
      clearTimeout(p.timer);
      p.reject(closed);
    }
    this.sends.clear();
    this.requests.failAll(closed);
    this.fire('stopped', {});
  }
}
