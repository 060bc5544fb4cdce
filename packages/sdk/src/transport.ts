import type { Logger } from '@reach/core';
import { AgentSocket } from './agent-socket.js';
import type { AgentFrame, ServerFrame, WelcomeFrame } from './frames.js';
import type { AgentInfo, AgentQuery } from './registry-client.js';
import { RegistryClient } from './registry-client.js';
import type { ClientTls } from './tls.js';
import type { AgentDescriptor, LoadReport, Registration } from './types.js';

/**
 * What an AgentNode needs from Agent-Reach, whatever carries it: the registry's agent API and
 * one connection at a time to a dispatcher. `queued` mode (the default) speaks HTTP and the
 * WebSocket protocol of docs/design.md §4 to the real services; `direct` mode (AGENT_REACH_MODE=direct)
 * hands the same frames to an in-process LocalReach (direct/local-reach.ts). The node above it
 * is the same code either way: that is the point of the mode.
 */
export interface RegistryApi {
  register(descriptor: AgentDescriptor, token?: string): Promise<Registration>;
  heartbeat(agentId: string, token: string, load: LoadReport): Promise<void>;
  deregister(agentId: string, token: string): Promise<void>;
  list(query?: AgentQuery, token?: string): Promise<AgentInfo[]>;
}

/** One open connection to a dispatcher. */
export interface AgentConnection {
  readonly connectionId: string;
  readonly isOpen: boolean;
  /** Sends one frame; false when the connection is not open (the caller keeps the frame for later). */
  send(frame: AgentFrame): boolean;
  /** Resolves once everything written so far has left (or the connection closed). */
  flushed(): Promise<void>;
  close(code?: number, reason?: string): void;
}

export interface ConnectOptions {
  hello: { agent_id: string; token: string; last_seq?: number };
  connectTimeoutMs: number;
  pingIntervalMs: number;
  idleTimeoutMs: number;
  log: Logger;
  onFrame: (frame: ServerFrame, connection: AgentConnection) => void;
  onClose: (code: number, reason: string, connection: AgentConnection) => void;
}

export interface AgentTransport {
  readonly registry: RegistryApi;
  /** Says hello; resolves on `welcome`, rejects with 1001 (timeout), 1003 (auth) or 1002 (closed). */
  open(options: ConnectOptions): Promise<{ socket: AgentConnection; welcome: WelcomeFrame }>;
}

function wsUrl(url: string): string {
  const u = new URL(url.replace(/^http/i, 'ws'));
  if (u.pathname === '' || u.pathname === '/') u.pathname = '/v1/connect';
  return u.toString();
}

/** `queued` mode: the registry over HTTP, the dispatcher over a WebSocket. */
export function networkTransport(registryUrl: string, dispatcherUrl: string, tls?: ClientTls): AgentTransport {
  const url = wsUrl(dispatcherUrl);
  return {
    registry: new RegistryClient(registryUrl, undefined, tls),
    open: (options) => AgentSocket.open({ ...options, url, tls }),
  };
}
