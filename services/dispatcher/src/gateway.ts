import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { bearer, ReachError, type Logger, type TokenClaims } from '@reach/core';
import type { SchemaCodec } from '@reach/envelope';
import type { AuthFailureThrottle } from '@reach/service-kit';
import type { Pool } from '@reach/store';
import type { AgentChannels } from './agent-channels.js';
import { AgentConnection, type ConnectionConfig, type ConnectionHost } from './connection.js';
import type { DispatcherMetrics } from './metrics.js';
import type { Outbox } from './outbox.js';
import type { SentLedger } from './sent-ledger.js';
import type { Outcomes } from './outcomes.js';
import { PresenceFeed, presenceRecord } from './presence.js';
import { CLOSE, CONNECT_PATH } from './protocol.js';
import type { ReplayBuffer } from './replay-buffer.js';
import type { RoutesFeed } from './routes-feed.js';
import { RevocationWatch } from './revocation-watch.js';

/**
 * ws closes a connection whose frame exceeds maxPayload with 1009 on its own, before telling
 * us; docs/design.md §4 says 4013. This subclass (ws's documented `WebSocket` server option) turns
 * that one close into 4013 and leaves everything else alone.
 */
class ReachWebSocket extends WebSocket {
  override close(code?: number, data?: string | Buffer): void {
    if (code === 1009) super.close(CLOSE.FRAME_TOO_LARGE, 'frame too large');
    else super.close(code, data);
  }
}

export interface GatewayDeps {
  config: ConnectionConfig & {
    maxFrameBytes: number;
    /** How long a dead agent's deliveries wait for it to reconnect before they fail over. */
    reconnectGraceMs: number;
  };
  instanceId: string;
  buffer: ReplayBuffer;
  channels: AgentChannels;
  outcomes: Outcomes;
  outbox: Outbox;
  codec: SchemaCodec;
  /** Where each deliver frame written to a socket is recorded for its DELIVERING event. */
  ledger: Pick<SentLedger, 'record'>;
  pg: Pool;
  metrics: DispatcherMetrics;
  log: Logger;
  /** The HTTP server's failed-authentication budget, shared by the WebSocket hello (issue #13). */
  authThrottle?: AuthFailureThrottle;
  /** The pre-flight view agents subscribe to (`subscribe_routes`, R-G6). */
  routes?: RoutesFeed;
}

/**
 * The WebSocket gateway: accepts agents on /v1/connect, holds at most one connection per agent
 * across all instances (generation in Redis + kick over pub/sub: the newest wins, the older is
 * closed with 4001), hands announced deliveries to the connection that holds the agent, and
 * runs one sweep timer for all connections (pings, idle and auth timeouts) instead of timers
 * per socket, so thousands of idle agents cost next to nothing.
 */
export class Gateway implements ConnectionHost {
  readonly config: GatewayDeps['config'];
  readonly buffer: ReplayBuffer;
  readonly outcomes: Outcomes;
  readonly outbox: Outbox;
  readonly codec: SchemaCodec;
  readonly metrics: DispatcherMetrics;
  readonly log: Logger;

  private readonly wss: WebSocketServer;
  private readonly all = new Set<AgentConnection>();
  private readonly byAgent = new Map<string, AgentConnection>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly presenceUpdates = new Set<Promise<void>>();
  private closing = false;
  private readonly revocations: RevocationWatch;
  private readonly presence: PresenceFeed;

  constructor(private readonly d: GatewayDeps) {
    this.config = d.config;
    this.buffer = d.buffer;
    this.outcomes = d.outcomes;
    this.outbox = d.outbox;
    this.codec = d.codec;
    this.metrics = d.metrics;
    this.log = d.log.child({ component: 'gateway' });
    this.revocations = new RevocationWatch(d.pg, this.log, () => this.all);
    this.presence = new PresenceFeed((records) => this.outbox.send(records), this.log);
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: d.config.maxFrameBytes,
      perMessageDeflate: false,
      clientTracking: false,
      WebSocket: ReachWebSocket,
    } as ConstructorParameters<typeof WebSocketServer>[0]);
  }

  /** Serves the WebSocket endpoint on the service's HTTP server. */
  attach(server: Server): void {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const path = new URL(req.url ?? '/', 'http://localhost').pathname;
      if (path !== CONNECT_PATH || this.closing) {
        socket.end(`HTTP/1.1 ${this.closing ? '503 Service Unavailable' : '404 Not Found'}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
        return;
      }
      // An address past its failed-authentication budget is refused before the handshake.
      const retryAfterS = this.d.authThrottle?.retryAfterS(req.socket.remoteAddress);
      if (retryAfterS !== undefined) {
        socket.end(`HTTP/1.1 429 Too Many Requests\r\nretry-after: ${retryAfterS}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        const conn = new AgentConnection(this, ws, bearer(req.headers.authorization), req.socket.remoteAddress);
        this.all.add(conn);
      });
    });
    const tick = Math.max(25, Math.min(1000, Math.floor(Math.min(this.config.pingIntervalMs, this.config.idleTimeoutMs, this.config.authTimeoutMs) / 4)));
    this.sweepTimer = setInterval(() => this.sweep(), tick);
    this.sweepTimer.unref();
    this.revocations.start();
  }

  sent(agent: string, seq: number, entry: string): void {
    this.d.ledger.record(agent, seq, entry);
  }

  helloRefused(conn: AgentConnection): void {
    this.d.authThrottle?.failed(conn.remoteAddress);
  }

  private sweep(): void {
    const now = Date.now();
    for (const conn of this.all) conn.tick(now);
  }

  /** The open connection of an agent on this instance, if any. */
  localConnection(agent: string): AgentConnection | undefined {
    const c = this.byAgent.get(agent);
    return c?.isOpen ? c : undefined;
  }

  get connectionCount(): number {
    return this.byAgent.size;
  }

  isRevoked(jti: string): Promise<boolean> {
    return this.revocations.isRevoked(jti);
  }

  verifyRenewal(agentId: string, token: string): Promise<TokenClaims> {
    return this.revocations.verifyRenewal(agentId, token, this.config.tokenSecret);
  }

  async register(conn: AgentConnection): Promise<boolean> {
    const agent = conn.agentId!;
    conn.generation = await this.buffer.nextGeneration(agent);
    if (!this.all.has(conn)) return false; // closed meanwhile
    const previous = this.byAgent.get(agent);
    if (previous && previous !== conn && previous.generation > conn.generation) {
      // Two hellos of one agent raced on this instance and the other one is newer.
      conn.replace();
      return false;
    }
    this.byAgent.set(agent, conn);
    if (previous && previous !== conn) previous.replace();
    conn.counted = true;
    this.metrics.connections.inc();
    // Subscribe before anything is read from the buffer: an entry written after this point is
    // announced to us, one written before is found by the replay read.
    await this.d.channels.subscribe(agent);
    if (!this.all.has(conn)) {
      // Closed while subscribing: unregister ran before the subscription existed.
      if (!this.byAgent.has(agent)) this.d.channels.unsubscribe(agent);
      return false;
    }
    await this.d.channels.publishKick(agent, conn.generation, conn.id);
    // A newer connection elsewhere may have claimed the agent before we subscribed to kicks.
    if ((await this.buffer.generation(agent)) > conn.generation) {
      conn.replace();
      return false;
    }
    return true;
  }

  subscribeRoutes(conn: AgentConnection): Promise<void> {
    if (!this.d.routes) return Promise.reject(new ReachError('INVALID_ENVELOPE', 'this dispatcher serves no routes view'));
    return this.d.routes.subscribe(conn);
  }

  unsubscribeRoutes(conn: AgentConnection): void {
    this.d.routes?.unsubscribe(conn);
  }

  unregister(conn: AgentConnection): void {
    this.d.routes?.unsubscribe(conn);
    if (!this.all.delete(conn)) return;
    if (conn.counted) this.metrics.connections.dec();
    const agent = conn.agentId;
    if (agent === undefined || this.byAgent.get(agent) !== conn) return;
    this.byAgent.delete(agent);
    this.d.channels.unsubscribe(agent);
    if (!conn.replaced && conn.counted) {
      const p = this.presenceDisconnected(conn, agent).finally(() => this.presenceUpdates.delete(p));
      this.presenceUpdates.add(p);
    }
  }

  presenceConnected(conn: AgentConnection): void {
    const agent = conn.agentId!;
    this.presence.publish(agent, presenceRecord(this.codec, { agentId: agent, connected: true, instance: this.d.instanceId, connectionId: conn.id }));
  }

  private async presenceDisconnected(conn: AgentConnection, agent: string): Promise<void> {
    try {
      // Only the newest connection speaks for the agent: a disconnect noticed late must not
      // overwrite the presence of a newer connection on another instance.
      if ((await this.buffer.generation(agent)) !== conn.generation) return;
    } catch (err) {
      this.log.warn({ err, agent_id: agent }, 'cannot read the connection generation; presence not updated');
      return;
    }
    this.presence.publish(agent, presenceRecord(this.codec, { agentId: agent, connected: false, instance: this.d.instanceId, connectionId: conn.id }));
    this.log.info({ agent_id: agent, connection_id: conn.id }, 'agent disconnected');
    if (!this.closing) setTimeout(() => void this.failOverIfGone(agent, conn.generation, conn.closedNormally), this.config.reconnectGraceMs).unref();
  }

  /**
   * The agent did not reconnect within the grace (here or on any instance: a new connection
   * opens a new generation): its un-acked deliveries go to other candidates now rather than
   * when their ack deadlines (10 s by default) run out. Reconnected in time, they are replayed
   * on the new connection as usual. A failure here only leaves the ack deadlines to do it.
   */
  private async failOverIfGone(agent: string, generation: number, stoppedGracefully: boolean): Promise<void> {
    if (this.byAgent.has(agent)) return;
    try {
      if ((await this.buffer.generation(agent)) !== generation) return;
      const moved = await this.buffer.failOver(agent, Date.now(), stoppedGracefully);
      if (moved > 0) this.log.info({ agent_id: agent, deliveries: moved }, 'agent did not reconnect in time; its un-acked deliveries fail over now');
    } catch (err) {
      this.log.warn({ err, agent_id: agent }, 'could not fail over the deliveries of a lost agent; their ack deadlines will');
    }
  }

  /** A delivery announced over pub/sub by the instance that consumed it. */
  onDelivery(agent: string, entry: string): void {
    this.byAgent.get(agent)?.deliver(entry);
  }

  /** Another instance accepted a newer connection of this agent. */
  onKick(agent: string, generation: number, connectionId: string): void {
    const c = this.byAgent.get(agent);
    if (c && c.id !== connectionId && c.generation > 0 && c.generation < generation) c.replace();
  }

  /** Shutdown: refuse new sockets, close every connection with 1001 (agents reconnect elsewhere). */
  close(): void {
    this.closing = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.revocations.stop();
    for (const conn of [...this.all]) conn.close(CLOSE.GOING_AWAY, 'dispatcher shutting down');
    this.wss.close();
  }

  /** Waits for the presence updates of closed connections to be sent (once more if they failed). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.presenceUpdates]);
    await this.presence.close();
  }
}
