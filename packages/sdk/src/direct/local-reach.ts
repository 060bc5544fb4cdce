import { PRODUCER_DOMAIN_HEADER, ReachError, errorInfo, isKnownCode, silentLogger, type ErrorName, type Logger, ERROR } from '@reach/core';
import { envelopeFromJson, receiptEnvelope, validateEnvelope, type Envelope, type MessageState } from '@reach/envelope';
import type { DomainGrant, RoutesView } from '@reach/routing';
import { EMPTY_RULES, formatDiagnostic, parseRules, type RuleSet } from '@reach/rules';
import type { AgentInfo, AgentQuery } from '../registry-client.js';
import type { LoadReport, Registration } from '../types.js';
import { BusClock } from './clock.js';
import { localConfig, type LocalConfig } from './local-config.js';
import { LocalDispatcher, type AgentFrameJson, type FrameSink } from './local-dispatcher.js';
import { LocalRegistry } from './local-registry.js';
import { LocalRouter } from './local-router.js';
import { Timeline, isTerminal, type MessageRow, type TimelineEntry } from './timeline.js';

export interface LocalReachOptions {
  /**
   * REACH_* options as the services read them (same names, defaults and checks), e.g.
   * `{ REACH_ACK_TIMEOUT_MS: '2000', REACH_MAX_RETRIES: '5' }`. Unset: the services' defaults.
   */
  env?: Readonly<Record<string, string | undefined>>;
  /** Multiplies every duration the control plane waits (ack timeout, backoff, budgets, holds). Default 1. */
  timeScale?: number;
  /** ReachRules (docs/rules.md) as YAML text; invalid rules throw with their line numbers. */
  rules?: string;
  /** Cross-domain grants (R-A8), as `PUT /v1/grants` makes them. */
  grants?: readonly DomainGrant[];
  /** [0, 1) for scoring jitter and backoff jitter; inject for deterministic tests. */
  random?: () => number;
  logger?: Logger;
}

/** How a test submits a message (the HTTP ingress API of docs/design.md §3, in-process). */
export interface SubmitOptions {
  /** The producer the message comes from; default `local-client`. */
  producer?: string;
  /** Waits up to this long for the handler's result (as `?wait_ms=`). */
  waitMs?: number;
}

/** One in-process connection of an agent (direct-transport.ts holds the node's side). */
export interface LocalConnection {
  /** A frame from the agent, as the JSON a WebSocket would carry. */
  send(frame: string): void;
  /** The agent closed it. */
  close(): void;
}

const LOCAL_CLIENT = 'local-client';

let shared: LocalReach | undefined;

/**
 * Agent-Reach in one process (`AGENT_REACH_MODE=direct`, R-G5): the registry, router,
 * dispatcher, retry-scheduler and tracker of queued mode as small in-memory parts that use the
 * same packages for every decision — @reach/agents for descriptors, leases and QoS,
 * @reach/rules and @reach/routing for candidates, scoring, stickiness, saturation, domains,
 * deadlines, backoff and failure outcomes — and the same wire frames towards nodes. So an agent
 * sees what it sees in production: deliveries arrive asynchronously with a seq, an attempt and
 * a deadline; an answer is an ack, a result or a reject; a retry comes after a backoff,
 * possibly to the same node again (its dedupe answers it); and each message has a timeline with
 * the states and codes of `GET /v1/messages/{id}/events`. What is not here: Kafka, PostgreSQL,
 * Redis, authentication, quotas, circuit breakers and server-side lanes (README "Direct mode").
 */
export class LocalReach {
  readonly clock = new BusClock();
  readonly config: LocalConfig;
  private readonly log: Logger;
  private readonly timeline = new Timeline();
  private readonly registry: LocalRegistry;
  private readonly router: LocalRouter;
  private readonly dispatcher: LocalDispatcher;
  private readonly random: () => number;
  private readonly idempotency = new Map<string, string>();
  private ruleSet: RuleSet = EMPTY_RULES;
  private closed = false;

  constructor(options: LocalReachOptions = {}) {
    this.config = localConfig(options.env ?? {}, options.timeScale ?? 1);
    this.log = options.logger ?? silentLogger;
    this.random = options.random ?? Math.random;
    if (options.rules !== undefined) this.setRules(options.rules);
    this.registry = new LocalRegistry(this.config.registry, this.clock, options.grants ?? []);
    const receipt = (env: Envelope, outcome: { state: MessageState; code: number; reason: string }): void => this.receipt(env, outcome);
    this.dispatcher = new LocalDispatcher({
      config: this.config,
      clock: this.clock,
      registry: this.registry,
      timeline: this.timeline,
      random: this.random,
      route: (env, attempt, exclude) => this.route(env, attempt, exclude),
      ingest: (fields, producer) => this.ingest(fields, producer),
      receipt,
    });
    this.router = new LocalRouter({
      config: this.config,
      clock: this.clock,
      registry: this.registry,
      timeline: this.timeline,
      rules: () => this.ruleSet,
      random: this.random,
      deliver: (agentId, env, attempt, parent) => this.dispatcher.deliver(agentId, env, attempt, parent),
      receipt,
    });
  }

  /** The process's own LocalReach: what `AGENT_REACH_MODE=direct` nodes join when given none. */
  static shared(): LocalReach {
    if (!shared || shared.closed) shared = new LocalReach();
    return shared;
  }

  // ── the registry's agent API (RegistryApi of transport.ts) ───────────────────────────────

  register(descriptor: unknown): Registration {
    const reg = this.registry.register(descriptor);
    this.dispatcher.routesChanged();
    return reg;
  }

  heartbeat(agentId: string, token: string, load: LoadReport): void {
    this.authorize(agentId, token);
    this.registry.heartbeat(agentId, load);
    this.dispatcher.routesChanged();
  }

  deregister(agentId: string, token: string): void {
    if (this.registry.tokenOf(agentId) === undefined) return;
    this.authorize(agentId, token);
    this.registry.deregister(agentId);
    this.dispatcher.routesChanged();
  }

  /**
   * What agent `agentId` can reach now, by capability and topic (0 or the refusal code; a name
   * nobody offers is absent): the view its node's pre-flight follows (`routes` frames).
   */
  routesFor(agentId: string): RoutesView {
    return this.dispatcher.routesFor(agentId);
  }

  agents(query: AgentQuery = {}): AgentInfo[] {
    return this.registry.list(query);
  }

  /** The agent a token was issued to (the producer of what it submits); undefined for any other token. */
  agentOfToken(token: string | undefined): string | undefined {
    return token === undefined ? undefined : this.registry.agentOfToken(token);
  }

  // ── the dispatcher's socket (the node's transport) ──────────────────────────────────────

  /** `hello`: the connection is welcomed (the first frame on `sink`), then replayed from last_seq. */
  connect(hello: { agent_id: string; token: string; last_seq?: number }, sink: FrameSink): LocalConnection {
    if (this.closed) throw new ReachError('CONNECTION_CLOSED', 'the local control plane is closed');
    const conn = this.dispatcher.connect(hello, sink);
    // An agent became routable: parked messages are routed again (the dead-letter service's redrive).
    setImmediate(() => this.router.redrive());
    return {
      send: (text) => {
        let frame: AgentFrameJson;
        try {
          frame = JSON.parse(text) as AgentFrameJson;
        } catch {
          return;
        }
        this.dispatcher.onFrame(conn, frame);
      },
      close: () => this.dispatcher.disconnected(conn),
    };
  }

  // ── what a test does (the HTTP API of docs/design.md §3, in-process) ────────────────────────────

  /**
   * `POST /v1/messages`: accepted as PENDING (or the original id for a repeated idempotency key).
   * With `waitMs`, as `?wait_ms=`: the row once the handler's result is in (or a publish fanned
   * out); a message that failed throws its own code, a wait that ran out 3002 — like ingress.
   */
  async submit(fields: Record<string, unknown>, options: SubmitOptions = {}): Promise<MessageRow> {
    const id = this.ingest(fields, options.producer ?? LOCAL_CLIENT);
    if (options.waitMs === undefined) return this.status(id)!;
    const row = await this.waitFor(id, (r) => isTerminal(r.status) || r.result !== undefined, options.waitMs).catch(() => undefined);
    if (row?.result !== undefined) return row;
    if (row?.status === 'DELIVERED') {
      // A publish has no result of its own: the wait is answered with its copies (as ingress does).
      const fanned = this.events(id).find((e) => (e.detail as { fanned_out?: unknown } | null)?.fanned_out);
      const copies = (fanned?.detail as { fanned_out?: { copies: unknown[]; copies_total: number } } | undefined)?.fanned_out;
      return copies ? { ...row, copies: copies.copies, copies_total: copies.copies_total } : row;
    }
    const details = { message_id: id, status: row?.status ?? this.status(id)?.status ?? 'PENDING' };
    if (row) {
      const code = row.code !== null && isKnownCode(row.code) ? row.code : ERROR.INTERNAL;
      throw new ReachError(errorInfo(code).name as ErrorName, row.reason ?? errorInfo(code).description, {
        details: { ...details, http_status: errorInfo(code).httpStatus },
      });
    }
    throw new ReachError('ACK_TIMEOUT', `no result within ${options.waitMs} ms (status ${details.status})`, { details: { ...details, http_status: 504 } });
  }

  /** `GET /v1/messages/{id}`; undefined for a message this control plane never saw. */
  status(messageId: string): MessageRow | undefined {
    return this.timeline.statusOf(messageId);
  }

  /** `GET /v1/messages/{id}/events`: the timeline, oldest first. */
  events(messageId: string): TimelineEntry[] {
    return this.timeline.eventsOf(messageId);
  }

  /**
   * Resolves with the message's row once `until` holds (default: a terminal state); rejects after
   * `timeoutMs` of real time (default 10 s) with what the row was then.
   */
  waitFor(messageId: string, until: MessageState | ((row: MessageRow) => boolean) = isTerminalRow, timeoutMs = 10_000): Promise<MessageRow> {
    const done = typeof until === 'function' ? until : (row: MessageRow) => row.status === until;
    const abort = new AbortController();
    const timer = setTimeout(() => {
      const row = this.status(messageId);
      abort.abort(new Error(`message ${messageId} is ${row ? `${row.status} (attempt ${row.attempt})` : 'unknown'} after ${timeoutMs} ms`));
    }, timeoutMs);
    return this.timeline.until(messageId, done, abort.signal).finally(() => clearTimeout(timer));
  }

  /**
   * Moves the control plane's time forward: backoffs, ack deadlines, holds and parking that end
   * within `ms` happen now, in order. Leases of connected agents move along (their heartbeats
   * would have gone on). Resolves once what that set off has run.
   */
  async skipTime(ms: number): Promise<void> {
    this.clock.skip(ms);
    this.registry.renewLeases((id) => this.dispatcher.isConnected(id));
    await new Promise((resolve) => setImmediate(resolve));
  }

  /** Fault: the answers (result, ack, reject) of the agent's next `deliveries` deliveries are lost on the way. */
  loseAnswers(agentId: string, deliveries = 1): void {
    this.dispatcher.loseAnswers(agentId, deliveries);
  }

  /** Fault: the agent's connection drops (1006); the node reconnects with its backoff and is replayed. */
  dropConnection(agentId: string): boolean {
    return this.dispatcher.dropConnection(agentId);
  }

  /** Replaces the ReachRules (as a changed REACH_RULES_FILE would); invalid rules throw with their positions. */
  setRules(yaml: string): void {
    const parsed = parseRules(yaml, 'rules.yaml');
    if (!parsed.rules) throw new Error(`invalid ReachRules:\n${parsed.diagnostics.map(formatDiagnostic).join('\n')}`);
    this.ruleSet = parsed.rules;
  }

  /** Closes every connection and cancels every timer. */
  close(): void {
    this.closed = true;
    this.dispatcher.close();
    this.clock.clear();
  }

  // ── the pipeline ────────────────────────────────────────────────────────────────────────

  /** Ingress: the same envelope building and checks as `POST /v1/messages`, PENDING, then routed. */
  private ingest(fields: Record<string, unknown>, producer: string): string {
    const now = this.clock.now();
    const env = envelopeFromJson(fields, { producer, now });
    const invalid = validateEnvelope(env, { maxPayloadBytes: this.config.maxPayloadBytes }, now);
    if (invalid) throw invalid;
    if (env.idempotency_key !== null) {
      const key = `${producer}\n${env.idempotency_key}`;
      const original = this.idempotency.get(key);
      if (original !== undefined) return original;
      this.idempotency.set(key, env.message_id);
    }
    // The producer's security domain, from its registration (ingress takes it from the token).
    const domain = this.registry.index.agent(producer)?.metadata.domain || 'default';
    const routed: Envelope = { ...env, headers: { ...env.headers, [PRODUCER_DOMAIN_HEADER]: domain } };
    this.timeline.record(env.message_id, {
      state: 'PENDING',
      at: new Date(now).toISOString(),
      attempt: 0,
      service: 'ingress',
      agent_id: null,
      code: null,
      reason: null,
      detail: null,
    });
    // Routed after the sender has its answer, as the pipeline does it: nothing is synchronous.
    setImmediate(() => this.route(routed, 0, []));
    return env.message_id;
  }

  private route(env: Envelope, attempt: number, exclude: readonly string[]): void {
    if (this.closed) return;
    this.router.route(env, attempt, exclude).catch((err: unknown) => {
      this.log.error({ message_id: env.message_id, err: err instanceof Error ? err.message : String(err) }, 'local routing failed');
    });
  }

  /** A failure receipt goes to the producer like any message (never one about a receipt). */
  private receipt(env: Envelope, outcome: { state: MessageState; code: number; reason: string }): void {
    const receipt = receiptEnvelope(env, outcome, this.clock.now());
    if (receipt) setImmediate(() => this.route(receipt, 0, []));
  }

  private authorize(agentId: string, token: string): void {
    if (this.registry.tokenOf(agentId) !== token) {
      throw new ReachError('AUTH_FAILED', `agent ${agentId} is not registered with this token`, { details: { http_status: 401 } });
    }
  }
}

function isTerminalRow(row: MessageRow): boolean {
  return isTerminal(row.status);
}
