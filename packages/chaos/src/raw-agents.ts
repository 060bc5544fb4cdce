import type { Socket } from 'node:net';
import type WebSocket from 'ws';
import { heartbeats, openAgentSocket, register, type Registered, type StackEndpoints } from '@reach/bench';
import type { Ledger } from './ledger.js';

/**
 * Raw WebSocket agents (no SDK): ack every delivery at once, reconnect when the socket drops
 * (a dispatcher killed), and can stall: stop reading their socket for a while (the slow agent
 * that stops reading), so the dispatcher must neither block on it nor lose what it held.
 */
export class RawAgents {
  private readonly sockets = new Map<string, WebSocket>();
  private readonly agents: Registered[] = [];
  private stopHeartbeats: () => void = () => undefined;
  private stopped = false;

  constructor(
    private readonly s: StackEndpoints,
    private readonly capability: string,
    private readonly ledger: Ledger,
  ) {}

  async start(count: number, run: string): Promise<void> {
    for (let i = 0; i < count; i++) {
      this.agents.push(
        await register(this.s, {
          agent_id: `chaos.raw.${run}.${i}`,
          agent_type: 'chaos-raw',
          endpoints: { ws: this.s.wsUrl },
          capabilities: [{ name: this.capability, mode: 'handle' }],
          metadata: { max_concurrency: 256, domain: 'default' },
          ttl_s: 60,
        }),
      );
    }
    this.stopHeartbeats = heartbeats(this.s, this.agents);
    await Promise.all(this.agents.map((a) => this.connect(a)));
  }

  private async connect(a: Registered): Promise<void> {
    for (;;) {
      if (this.stopped) return;
      try {
        const ws = await openAgentSocket(this.s, a, (d, answer) => {
          this.ledger.seen(d.messageId, Date.now());
          this.ledger.answered.add(d.messageId);
          answer();
        });
        this.sockets.set(a.agent_id, ws);
        ws.once('close', () => void this.connect(a));
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** One agent stops reading its socket for `ms` (its TCP window fills; it answers nothing). */
  stall(ms: number): string | undefined {
    const [id, ws] = [...this.sockets][0] ?? [];
    const socket = (ws as unknown as { _socket?: Socket } | undefined)?._socket;
    if (!id || !socket) return undefined;
    socket.pause();
    setTimeout(() => socket.resume(), ms);
    return id;
  }

  ids(): string[] {
    return this.agents.map((a) => a.agent_id);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopHeartbeats();
    for (const ws of this.sockets.values()) ws.close();
  }
}
