import { ReachError, ERROR } from '@reach/core';
import { parseServerFrame, type AgentFrame, type WelcomeFrame } from '../frames.js';
import type { AgentConnection, AgentTransport, ConnectOptions } from '../transport.js';
import { LocalReach, type LocalConnection } from './local-reach.js';

/**
 * `direct` mode's transport: the node's registry calls and its connection go to a LocalReach in
 * this process instead of the network. Frames still travel as the JSON text a WebSocket would
 * carry, parsed by the same parser, and every hop is asynchronous (one turn of the event loop,
 * in order), so nothing an agent does completes synchronously that would not over the wire.
 */
export function directTransport(reach?: LocalReach): AgentTransport {
  const local = (): LocalReach => reach ?? LocalReach.shared();
  return {
    registry: {
      register: async (descriptor) => local().register(descriptor),
      heartbeat: async (agentId, token, load) => local().heartbeat(agentId, token, load),
      deregister: async (agentId, token) => local().deregister(agentId, token),
      list: async (query) => local().agents(query),
    },
    open: (options) => DirectConnection.open(local(), options),
  };
}

class DirectConnection implements AgentConnection {
  private open = false;
  private server: LocalConnection | undefined;
  private welcome: WelcomeFrame | undefined;

  private constructor(private readonly options: ConnectOptions) {}

  static open(reach: LocalReach, options: ConnectOptions): Promise<{ socket: AgentConnection; welcome: WelcomeFrame }> {
    const conn = new DirectConnection(options);
    return new Promise((resolve, reject) => {
      let settled = false;
      const sink = {
        push: (text: string) =>
          setImmediate(() => {
            const frame = parseServerFrame(text);
            if (!frame) return;
            if (!settled) {
              settled = true;
              if (frame.type === 'welcome') {
                conn.open = true;
                conn.welcome = frame;
                resolve({ socket: conn, welcome: frame });
              } else {
                const refused = frame.type === 'error' ? `${frame.name} ${frame.message}` : frame.type;
                reject(
                  new ReachError(
                    frame.type === 'error' && frame.code === ERROR.AUTH_FAILED ? 'AUTH_FAILED' : 'CONNECTION_CLOSED',
                    `local dispatcher refused hello: ${refused}`,
                  ),
                );
              }
              return;
            }
            if (conn.open && frame.type !== 'welcome') options.onFrame(frame, conn);
          }),
        close: (code: number, reason: string) => setImmediate(() => conn.closed(code, reason)),
      };
      try {
        conn.server = reach.connect(options.hello, sink);
      } catch (err) {
        if (!settled) {
          settled = true;
          reject(err instanceof ReachError ? err : new ReachError('CONNECTION_CLOSED', String(err)));
        }
      }
    });
  }

  get connectionId(): string {
    return this.welcome?.connection_id ?? '';
  }

  get isOpen(): boolean {
    return this.open;
  }

  send(frame: AgentFrame): boolean {
    if (!this.open) return false;
    const text = JSON.stringify(frame);
    const server = this.server;
    setImmediate(() => server?.send(text));
    return true;
  }

  flushed(): Promise<void> {
    return new Promise((resolve) => setImmediate(resolve));
  }

  close(code = 1000, reason = ''): void {
    if (!this.open) return;
    const server = this.server;
    // Frames written before the close still arrive first (the same queue).
    setImmediate(() => server?.close());
    setImmediate(() => this.closed(code, reason));
  }

  private closed(code: number, reason: string): void {
    if (!this.open) return;
    this.open = false;
    this.options.onClose(code, reason, this);
  }
}
