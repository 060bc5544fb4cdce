import WebSocket from 'ws';
import { ERROR, ReachError, type Logger } from '@reach/core';
import { wsTlsOptions, type ClientTls } from './tls.js';
import { parseServerFrame, type AgentFrame, type ServerFrame, type WelcomeFrame } from './frames.js';

/**
 * One WebSocket to the dispatcher (docs/design.md §4): sends `hello` first, resolves on `welcome`,
 * answers server pings, pings every 15 s itself, and closes a connection that has been silent
 * for 30 s (the server does the same). Reconnecting is the node's business, not this class's.
 */
export interface AgentSocketOptions {
  url: string;
  hello: { agent_id: string; token: string; last_seq?: number };
  connectTimeoutMs: number;
  pingIntervalMs: number;
  idleTimeoutMs: number;
  log: Logger;
  onFrame: (frame: ServerFrame, socket: AgentSocket) => void;
  onClose: (code: number, reason: string, socket: AgentSocket) => void;
  /** A private CA (and client certificate) for a wss:// URL; see tls.ts. */
  tls?: ClientTls | undefined;
}

/** Close codes of docs/design.md §4 and what they mean to the agent. */
export const CLOSE = {
  duplicate: 4001,
  authFailed: 4003,
  heartbeatTimeout: 4008,
  frameTooLarge: 4013,
  /** RFC 6455 "going away": the server is shutting down (the local control plane sends it). */
  goingAway: 1001,
} as const;

// Frames from the server are bounded by the payload limit (256 KiB, base64 ≈ 342 KiB) plus the
// envelope; 4 MiB leaves room without letting a broken peer exhaust memory.
const MAX_INBOUND_BYTES = 4 * 1024 * 1024;

export class AgentSocket {
  private readonly ws: WebSocket;
  private welcome: WelcomeFrame | undefined;
  private lastHeard = Date.now();
  private pingTimer: NodeJS.Timeout | undefined;
  private closed = false;

  private constructor(private readonly options: AgentSocketOptions) {
    this.ws = new WebSocket(options.url, { handshakeTimeout: options.connectTimeoutMs, maxPayload: MAX_INBOUND_BYTES, ...wsTlsOptions(options.tls) });
  }

  /** Connects and authenticates; rejects with 1001 (timeout), 1003 (auth) or 1002 (closed). */
  static open(options: AgentSocketOptions): Promise<{ socket: AgentSocket; welcome: WelcomeFrame }> {
    const socket = new AgentSocket(options);
    return socket.handshake().then((welcome) => ({ socket, welcome }));
  }

  get connectionId(): string {
    return this.welcome?.connection_id ?? '';
  }

  get isOpen(): boolean {
    return !this.closed && this.ws.readyState === WebSocket.OPEN && this.welcome !== undefined;
  }

  /** Sends one frame; false when the socket is not open (the caller keeps the frame for later). */
  send(frame: AgentFrame): boolean {
    if (this.closed || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  /** Resolves once everything written so far has left the process (or the socket closed). */
  flushed(): Promise<void> {
    if (this.closed || this.ws.readyState !== WebSocket.OPEN) return Promise.resolve();
    return new Promise((resolve) => this.ws.send(JSON.stringify({ type: 'ping', ts: Date.now() }), () => resolve()));
  }

  close(code = 1000, reason = ''): void {
    if (this.closed) return;
    this.ws.close(code, reason);
    // A peer that never answers the close handshake must not keep the socket alive.
    setTimeout(() => this.ws.terminate(), 2000).unref();
  }

  private handshake(): Promise<WelcomeFrame> {
    const { options } = this;
    return new Promise<WelcomeFrame>((resolve, reject) => {
      let settled = false;
      const fail = (err: ReachError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(err);
      };
      const timer = setTimeout(() => {
        fail(new ReachError('CONNECT_TIMEOUT', `no welcome from ${options.url} within ${options.connectTimeoutMs} ms`));
        this.ws.terminate();
      }, options.connectTimeoutMs);

      this.ws.on('open', () => {
        this.ws.send(JSON.stringify({ type: 'hello', ...options.hello }));
      });
      this.ws.on('message', (data, isBinary) => {
        this.lastHeard = Date.now();
        if (isBinary) return;
        const frame = parseServerFrame(String(data));
        if (!frame) {
          options.log.debug({ frame: String(data).slice(0, 200) }, 'ignoring an unknown frame');
          return;
        }
        if (frame.type === 'ping') {
          this.send({ type: 'pong', ts: frame.ts });
          return;
        }
        if (!settled) {
          if (frame.type === 'welcome') {
            settled = true;
            clearTimeout(timer);
            this.welcome = frame;
            this.startPinging(frame.heartbeat_ms);
            resolve(frame);
          } else if (frame.type === 'error') {
            fail(
              new ReachError(
                frame.code === ERROR.AUTH_FAILED ? 'AUTH_FAILED' : 'CONNECTION_CLOSED',
                `dispatcher refused hello: ${frame.name} ${frame.message}`,
              ),
            );
          }
          return;
        }
        options.onFrame(frame, this);
      });
      this.ws.on('error', (err) => {
        options.log.debug({ err: err.message }, 'websocket error');
        fail(new ReachError('CONNECTION_CLOSED', `websocket to ${options.url} failed: ${err.message}`, { cause: err }));
      });
      this.ws.on('close', (code, reasonBuf) => {
        const reason = reasonBuf.toString();
        const wasOpen = this.welcome !== undefined;
        this.closed = true;
        if (this.pingTimer) clearInterval(this.pingTimer);
        if (code === CLOSE.authFailed) fail(new ReachError('AUTH_FAILED', `dispatcher closed the connection: ${reason || 'auth failed'}`));
        else fail(new ReachError('CONNECTION_CLOSED', `connection closed before welcome (${code} ${reason})`));
        if (wasOpen) options.onClose(code, reason, this);
      });
    });
  }

  private startPinging(serverHeartbeatMs: number | undefined): void {
    // The server's advertised interval wins when shorter, so both ends agree on "silent".
    const interval = serverHeartbeatMs && serverHeartbeatMs > 0 ? Math.min(serverHeartbeatMs, this.options.pingIntervalMs) : this.options.pingIntervalMs;
    const idle = Math.max(this.options.idleTimeoutMs, interval * 2);
    // Checked more often than we ping, so a dead peer is noticed within ~idle, not idle + interval.
    const tick = Math.max(50, Math.min(interval, Math.floor(idle / 3)));
    let lastPing = Date.now();
    this.pingTimer = setInterval(() => {
      const now = Date.now();
      if (now - this.lastHeard > idle) {
        this.options.log.warn({ connection_id: this.connectionId, silent_ms: now - this.lastHeard }, 'dispatcher silent; dropping the connection');
        this.ws.terminate();
        return;
      }
      if (now - lastPing >= interval) {
        lastPing = now;
        this.send({ type: 'ping', ts: now });
      }
    }, tick);
  }
}
