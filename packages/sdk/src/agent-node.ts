import { ReachError, silentLogger, type Logger } from '@reach/core';
import { DispatcherConnection } from './agent-connection.js';
import { AgentLease } from './agent-lease.js';
import { AgentReplacedError } from './agent-replaced.js';
import { AgentSender, sendFields } from './agent-sender.js';
import { DeliveryRunner } from './delivery-runner.js';
import type { AgentFrame, DeliverFrame } from './frames.js';
import { lazyDirectTransport } from './direct/lazy-transport.js';
import { modeOf } from './mode.js';
import { errorText, type NodeState } from './node-state.js';
import { NodeEventHub } from './node-events.js';
import { EVENT } from './node-types.js';
import type { AgentApi, AgentNodeOptions, Handler, NodeEvents, Reply, RequestOptions, SendOptions } from './node-types.js';
import { PendingRequests } from './pending-requests.js';
import { ReachClient } from './reach-client.js';
import { RoutesView, type RouteKind } from './routes-view.js';
import { networkTransport, type AgentConnection, type AgentTransport, type RegistryApi } from './transport.js';
import type { LoadReport, SendFields } from './types.js';

/*
 * AgentNode is a facade: the public API, the lifecycle (start, stop, signals) and the events.
 * Its parts (agent-lease.ts, agent-connection.ts, agent-sender.ts, delivery-runner.ts) talk
 * through the callbacks wired in the constructor:
 *
 *                     reconnect, refresh_token
 *   ┌────────────┐ ──────────────────────────────▶ ┌──────────────────────┐    frames
 *   │ AgentLease │                                 │ DispatcherConnection │ ◀──────────▶ dispatcher
 *   └────────────┘ ◀────────────────────────────── └──────────────────────┘
 *     │      ▲      register() after a refusal        │ deliver    ▲ answers    ▲ send frames
 *     ▼      │ load()                                 ▼            │            │
 *   registry │                                 node.onDeliver  node.sendFrame   │
 *   ┌────────┴───────┐   accept (the others)      │     │          ▲       ┌────┴────────┐
 *   │ DeliveryRunner │ ◀──────────────────────────┘     │          │       │ AgentSender │ ◀── send(), request()
 *   │                │ ── ack, reject, result ──────────┼──────────┘       │             │
 *   └────────────────┘                                  └── settle ──────▶ │             │ ──▶ PendingRequests
 *                                                     (receipts, replies)  └─────────────┘
 *
 * The connection keeps the RoutesView current (routes frames); the sender reads it.
 */

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

/**
 * An agent on Agent-Reach (R-G1): registers its capabilities, heartbeats its real load,
 * holds one WebSocket to the dispatcher (reconnecting with backoff, renewing its token before
 * it expires), runs deliveries through handlers (DeliveryRunner: concurrency limit, dedupe,
 * ack/reject/result), and sends, publishes and requests over the same socket.
 */
export class AgentNode implements AgentApi {
  private readonly log: Logger;
  private readonly registry: RegistryApi;
  private readonly lease: AgentLease;
  private readonly connection: DispatcherConnection;
  private readonly sender: AgentSender;
  private readonly runner: DeliveryRunner;
  private readonly requests = new PendingRequests();
  /** What this agent can reach, from the dispatcher's `routes` frames (pre-flight, R-G6). */
  private readonly routes = new RoutesView();
  private readonly events: NodeEventHub;
  private readonly abort = new AbortController();
  private state: NodeState = 'new';
  private stopping: Promise<void> | undefined;
  /** Set when a newer connection of this agent took over (4001): the node stopped for good. */
  private replacedBy: AgentReplacedError | undefined;
  private signalHandler: ((signal: NodeJS.Signals) => void) | undefined;

  constructor(private readonly options: AgentNodeOptions) {
    this.log = options.logger ?? silentLogger;
    this.events = new NodeEventHub(this.log);
    const transport = transportOf(options);
    this.registry = transport.registry;
    const maxConcurrency = options.descriptor.metadata?.max_concurrency ?? 10;
    const state = () => this.state;
    this.lease = new AgentLease({
      registry: this.registry,
      options,
      maxConcurrency,
      log: this.log,
      state,
      load: () => this.load(), // node.load(), looked up each time: a heartbeat reports what it says
      running: () => this.runner.running,
      onRegistered: (reg, previous) => {
        if (previous && reg.agent_id !== previous.agent_id) this.connection.restartStream();
        this.events.fire('registered', { agent_id: reg.agent_id, lease_id: reg.lease_id });
      },
      connection: () => this.connection,
    });
    this.connection = new DispatcherConnection({
      transport,
      lease: this.lease,
      options,
      log: this.log,
      state,
      routes: this.routes,
      onDeliver: (d) => this.onDeliver(d),
      onReplaced: () => this.onReplaced(),
      fire: (event, arg) => this.events.fire(event, arg),
    });
    this.sender = new AgentSender({
      connection: this.connection,
      registry: this.registry,
      requests: this.requests,
      routes: this.routes,
      options,
      state,
      agentId: () => this.agentId,
      token: () => this.token,
      onReceipt: (receipt) => this.events.fire('receipt', receipt),
    });
    this.runner = new DeliveryRunner({
      maxConcurrency,
      onLoadChanged: () => this.lease.loadChanged(),
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
    return this.events.on(event, listener);
  }

  // ── what the node is ──────────────────────────────────────────────────────────────────

  /** The agent id the registry gave (undefined before start()). */
  get agentId(): string | undefined {
    return this.lease.registration?.agent_id;
  }

  /** The current agent token (for the HTTP API or Kafka ingress). */
  get token(): string | undefined {
    return this.lease.registration?.token;
  }

  get connected(): boolean {
    return this.connection.isOpen;
  }

  get status(): NodeState {
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
    this.lease.declare(this.runner.capabilityNames, this.runner.topicNames);
    try {
      await this.lease.register();
      await this.connection.connect();
    } catch (err) {
      this.log.error({ err: errorText(err) }, 'agent failed to start');
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

  // ── sending (AgentSender) ─────────────────────────────────────────────────────────────

  /**
   * Sends one message over the WebSocket (`send` frame); resolves with its message id once the
   * dispatcher accepted it, rejects with the `error` frame's code. While disconnected it waits
   * for the next connection, up to sendTimeoutMs. `{ preflight: true }` checks a capability or
   * topic against the local routes view first (2001, 2003, 3001 without sending; a message with
   * expire_at, which the router parks instead, only for 2003).
   */
  send(fields: SendFields, options: { preflight?: boolean } = {}): Promise<string> {
    return this.sender.send(fields, options);
  }

  /** Publishes an event to a topic: every subscriber gets a copy (R-B8). */
  publish(topic: string, payload: unknown, options: SendOptions = {}): Promise<string> {
    return this.send({ topic, message_type: EVENT, payload, ...sendFields(options) }, { preflight: options.preflight ?? false });
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
  requestReply<R = unknown>(capability: string, payload: unknown, options: RequestOptions = {}): Promise<Reply<R>> {
    return this.sender.requestReply<R>(capability, payload, options);
  }

  /**
   * Pre-flight (R-G6): would a message to `capability` (or a topic) be routed now? From the
   * node's local view (the dispatcher's `routes` frames: ONLINE, connected, domain allowed,
   * circuit not open) once it has one, else from the registry (any ONLINE agent offers it).
   */
  canReach(name: string, kind: RouteKind = 'capability'): Promise<boolean> {
    return this.sender.canReach(name, kind);
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

  // ── between the parts ─────────────────────────────────────────────────────────────────

  /** The open connection (tests reach it through the node). */
  private get socket(): AgentConnection | undefined {
    return this.connection.socket;
  }

  /** The runner's answers (ack, reject, result, progress) go out through here. */
  private sendFrame(frame: AgentFrame): void {
    this.connection.sendFrame(frame);
  }

  private onDeliver(d: DeliverFrame): void {
    const m = d.message;
    const log = this.log.child({ agent_id: this.agentId, trace_id: m.trace_id, message_id: m.message_id, seq: d.seq });
    if (this.sender.settle(d, log)) this.runner.ack(d);
    else this.runner.accept(d, log);
  }

  private beforeStart(what: string): void {
    if (this.state !== 'new') throw new Error(`${what}() must be called before start(): capabilities are registered at start`);
  }

  // ── shutdown ──────────────────────────────────────────────────────────────────────────

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
    this.events.fire('replaced', { agent_id: agentId });
    this.lease.stopEarlyBeats();
    this.lease.stopTimers();
    this.stopping ??= this.shutdown(this.options.drainTimeoutMs ?? 10_000, { deregister: false });
  }

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
    this.lease.stopEarlyBeats();
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
    await this.connection.flushed();
    this.lease.stopTimers();
    this.connection.wake();
    if (wasStarted && opts.deregister) await this.lease.deregister();
    this.state = 'stopped';
    const closed = new ReachError('CONNECTION_CLOSED', 'the agent node stopped');
    this.connection.close(closed);
    this.requests.failAll(closed);
    this.events.fire('stopped', {});
  }
}
