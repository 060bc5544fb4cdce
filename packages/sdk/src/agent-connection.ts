import { ReachError, type Logger } from '@reach/core';
import type { AgentLease } from './agent-lease.js';
import { CLOSE } from './agent-socket.js';
import { reconnectDelayMs } from './backoff.js';
import type { AgentFrame, DeliverFrame, ServerFrame } from './frames.js';
import { errorText, isStopping, type NodeState } from './node-state.js';
import type { AgentNodeOptions, NodeEvents } from './node-types.js';
import { errorForCode } from './pending-requests.js';
import type { RoutesView } from './routes-view.js';
import type { AgentConnection, AgentTransport } from './transport.js';

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

interface PendingSend {
  frame: AgentFrame;
  resolve: (messageId: string) => void;
  reject: (err: ReachError) => void;
  timer: NodeJS.Timeout;
  /** The socket it was written to; undefined while it waits for a connection. */
  socket: AgentConnection | undefined;
}

export interface DispatcherConnectionDeps {
  transport: AgentTransport;
  lease: AgentLease;
  log: Logger;
  state: () => NodeState;
  options: Pick<AgentNodeOptions, 'connectTimeoutMs' | 'pingIntervalMs' | 'idleTimeoutMs' | 'reconnect' | 'random' | 'preflight'>;
  /** The pre-flight view this connection keeps current (unless `preflight: false`). */
  routes: RoutesView;
  /** A delivery (its seq already counted). */
  onDeliver: (d: DeliverFrame) => void;
  /** 4001 from someone else: a newer connection of this agent took over. */
  onReplaced: () => void;
  fire: <K extends 'connected' | 'disconnected'>(event: K, arg: NodeEvents[K]) => void;
}

/**
 * The node's connection to the dispatcher: one socket at a time, the one reconnect loop (with
 * backoff, re-registering through the lease when the token was refused), frames in and out,
 * the outbox of answers kept while disconnected, the unsure answers written again after a
 * drop, the seq to resume from (hello.last_seq), and the sends waiting for their `accepted`.
 */
export class DispatcherConnection {
  private readonly sends = new Map<string, PendingSend>();
  private readonly sleepers = new Set<{ timer: NodeJS.Timeout; wake: () => void }>();
  private outbox: AgentFrame[] = [];
  /** Results, acks and rejects written lately, with the socket and time (see UNSURE_ANSWER_MS). */
  private unsure: Array<{ frame: AgentFrame; socket: AgentConnection; at: number }> = [];
  private current: AgentConnection | undefined;
  /** The highest seq received: acked, being processed, or queued here (sent as hello.last_seq). */
  private lastSeq = 0;
  private loop: Promise<void> | undefined;
  private needsRegister = false;
  /** The connection a connect() in progress replaces (the dispatcher closes it with 4001). */
  private superseded: AgentConnection | undefined;

  constructor(private readonly d: DispatcherConnectionDeps) {}

  get socket(): AgentConnection | undefined {
    return this.current;
  }

  get isOpen(): boolean {
    return this.current?.isOpen ?? false;
  }

  /** One connection is open and no reconnect runs (a new token can go over it). */
  get steady(): boolean {
    return !this.loop && this.isOpen;
  }

  /** The registry gave a new agent id: its delivery stream starts from the beginning. */
  restartStream(): void {
    this.lastSeq = 0;
  }

  refreshToken(token: string): boolean {
    return this.current?.send({ type: 'refresh_token', token }) ?? false;
  }

  /**
   * Opens a connection and makes it current. The previous one (a token refresh) stays open
   * until the new one is welcomed, so no delivery is dropped in between; its in-flight work is
   * acked on the new one.
   */
  async connect(): Promise<void> {
    const reg = this.d.lease.registration!;
    // The dispatcher closes the previous connection with 4001 when this one says hello: that
    // 4001 is this node's own doing, not another process taking the agent.
    this.superseded = this.current;
    const { socket, welcome } = await this.d.transport
      .open({
        hello: { agent_id: reg.agent_id, token: reg.token, last_seq: this.lastSeq },
        connectTimeoutMs: this.d.options.connectTimeoutMs ?? 10_000,
        pingIntervalMs: this.d.options.pingIntervalMs ?? 15_000,
        idleTimeoutMs: this.d.options.idleTimeoutMs ?? 30_000,
        log: this.d.log,
        onFrame: (frame) => this.onFrame(frame),
        onClose: (code, reason, s) => this.onSocketClose(code, reason, s),
      })
      .finally(() => {
        this.superseded = undefined;
      });
    if (isStopping(this.d.state())) {
      socket.close(1000, 'agent stopping');
      throw new ReachError('CONNECTION_CLOSED', 'the node stopped while connecting');
    }
    const previous = this.current;
    this.current = socket;
    if (previous && previous !== socket) previous.close(1000, 'replaced by a new connection');
    this.d.log.info(
      { agent_id: reg.agent_id, connection_id: welcome.connection_id, last_seq: this.lastSeq, resume_from: welcome.resume_from },
      'connected to the dispatcher',
    );
    // The pre-flight view, kept up to date over this socket (a dispatcher that does not know the
    // frame answers with an error: the node then asks the registry, as before). What an earlier
    // connection's dispatcher said is forgotten: no verdict until this one's full view arrives.
    this.d.routes.reset();
    if (this.d.options.preflight ?? true) socket.send({ type: 'subscribe_routes' });
    this.flushOutbox();
    for (const pending of this.sends.values()) if (!pending.socket) this.writeSend(pending);
    this.d.fire('connected', { agent_id: reg.agent_id, connection_id: welcome.connection_id });
  }

  /**
   * The one reconnect loop: backoff 1 s doubling to 32 s plus jitter (R-G1), re-registering
   * first when the token was refused or is due. Concurrent triggers join the running loop.
   */
  reconnect(opts: { reRegister: boolean; immediate: boolean }): void {
    if (opts.reRegister) this.needsRegister = true;
    if (this.loop || isStopping(this.d.state())) return;
    const live = () => this.d.state() === 'running' || this.d.state() === 'starting';
    const agentId = () => this.d.lease.registration?.agent_id;
    this.loop = (async () => {
      let attempt = 0;
      let wait = !opts.immediate;
      while (live()) {
        if (wait) {
          const delay = reconnectDelayMs(attempt++, this.d.options.random ?? Math.random, this.d.options.reconnect);
          this.d.log.debug({ agent_id: agentId(), delay_ms: delay, attempt }, 'reconnecting after backoff');
          await this.sleep(delay);
          if (!live()) return;
        }
        wait = true;
        try {
          if (this.needsRegister) {
            this.needsRegister = false;
            try {
              await this.d.lease.register();
            } catch (err) {
              this.needsRegister = true;
              throw err;
            }
          }
          await this.connect();
          return;
        } catch (err) {
          if (err instanceof ReachError && err.codeName === 'AUTH_FAILED') this.needsRegister = true;
          this.d.log.warn({ agent_id: agentId(), attempt, err: errorText(err) }, 'reconnect failed');
        }
      }
    })().finally(() => {
      this.loop = undefined;
    });
  }

  /** Writes an answer (or any frame); while disconnected it waits in the outbox for the next connection. */
  sendFrame(frame: AgentFrame): void {
    const socket = this.current;
    if (socket?.send(frame)) {
      if (frame.type === 'result' || frame.type === 'ack' || frame.type === 'reject') this.keepUnsure(frame, socket);
      return;
    }
    // Not connected: keep acks, rejects and results for the next connection instead of losing them.
    this.outbox.push(frame);
    if (this.outbox.length > MAX_OUTBOX) {
      this.outbox.shift();
      this.d.log.warn(
        { agent_id: this.d.lease.registration?.agent_id },
        'outbox full: dropping the oldest frame (its delivery will be retried by the dispatcher)',
      );
    }
  }

  /**
   * Writes a `send` frame now or on the next connection; resolves with the message id once
   * the dispatcher accepted it, rejects with its `error` frame's code, with 1002 when the
   * socket it went out on closed first, or with 1001 after `timeoutMs`.
   */
  send(frame: AgentFrame & { client_ref: string }, messageId: string, timeoutMs: number): Promise<string> {
    const clientRef = frame.client_ref;
    return new Promise<string>((resolve, reject) => {
      const pending: PendingSend = {
        frame,
        resolve,
        reject,
        socket: undefined,
        timer: setTimeout(() => {
          this.sends.delete(clientRef);
          reject(new ReachError('CONNECT_TIMEOUT', `the dispatcher did not accept message ${messageId} within ${timeoutMs} ms`));
        }, timeoutMs),
      };
      this.sends.set(clientRef, pending);
      this.writeSend(pending);
    });
  }

  /** Resolves once what was written has left (the acks of finished work, before deregistering). */
  async flushed(): Promise<void> {
    await this.current?.flushed();
  }

  /** The node stops: a reconnect loop waiting out its backoff wakes up (and ends). */
  wake(): void {
    for (const s of [...this.sleepers]) s.wake();
  }

  /** Closes the connection for good; sends still waiting fail with `err`. */
  close(err: ReachError): void {
    this.current?.close(1000, 'agent stopped');
    this.current = undefined;
    for (const p of this.sends.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.sends.clear();
  }

  private onSocketClose(code: number, reason: string, socket: AgentConnection): void {
    // Sends written to this socket and not accepted may or may not have arrived: the caller decides.
    for (const [ref, pending] of this.sends) {
      if (pending.socket !== socket) continue;
      clearTimeout(pending.timer);
      this.sends.delete(ref);
      pending.reject(new ReachError('CONNECTION_CLOSED', `connection closed (${code}) before the dispatcher accepted the message`));
    }
    if (socket !== this.current) return;
    this.current = undefined;
    // The view came on this connection and is no longer kept current: it decides nothing until the next one's.
    this.d.routes.reset();
    this.resendUnsure(socket);
    this.d.fire('disconnected', { code, reason });
    if (isStopping(this.d.state())) return;
    if (code === CLOSE.duplicate && socket !== this.superseded) {
      this.d.onReplaced();
      return;
    }
    if (code === CLOSE.duplicate) return; // replaced by the connection this node is opening
    this.d.log.warn({ agent_id: this.d.lease.registration?.agent_id, code, reason }, 'connection to the dispatcher lost; reconnecting');
    this.reconnect({ reRegister: code === CLOSE.authFailed, immediate: false });
  }

  private onFrame(frame: ServerFrame): void {
    switch (frame.type) {
      case 'deliver':
        if (frame.seq > this.lastSeq) this.lastSeq = frame.seq;
        this.d.onDeliver(frame);
        return;
      case 'routes':
        this.d.routes.apply(frame);
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
          this.d.log.warn(
            { agent_id: this.d.lease.registration?.agent_id, code: frame.code, name: frame.name, err: frame.message },
            'error from the dispatcher',
          );
        }
        return;
      }
      default:
        return;
    }
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
    this.d.log.info(
      { agent_id: this.d.lease.registration?.agent_id, answers: again.length },
      'connection lost right after answers: they go out again on the next connection',
    );
    this.outbox.unshift(...again);
  }

  private flushOutbox(): void {
    const frames = this.outbox;
    this.outbox = [];
    for (const f of frames) this.sendFrame(f);
  }

  private writeSend(pending: PendingSend): void {
    if (this.current?.isOpen && this.current.send(pending.frame)) pending.socket = this.current;
  }
}
