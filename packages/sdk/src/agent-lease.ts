import { ReachError, type Logger } from '@reach/core';
import { EarlyBeat } from './early-beat.js';
import { errorText, isStopping, type NodeState } from './node-state.js';
import type { AgentNodeOptions } from './node-types.js';
import { refreshDelayMs, tokenLifetime } from './token-expiry.js';
import type { RegistryApi } from './transport.js';
import type { AgentDescriptor, CapabilitySpec, LoadReport, Registration } from './types.js';

/** A failed token refresh is tried again this soon (the old token still has a fifth of its life). */
const TOKEN_REFRESH_RETRY_MS = 5000;

export interface AgentLeaseDeps {
  registry: RegistryApi;
  /** descriptor; token: the configured enrollment (or admin) token; tokenRefreshRatio (default 0.8). */
  options: Pick<AgentNodeOptions, 'descriptor' | 'token' | 'tokenRefreshRatio'>;
  maxConcurrency: number;
  log: Logger;
  state: () => NodeState;
  /** What a heartbeat reports, and how many handlers run now (DeliveryRunner). */
  load: () => LoadReport;
  running: () => number;
  /** A registration went through; `previous` is the one it replaces (undefined the first time). */
  onRegistered: (reg: Registration, previous: Registration | undefined) => void;
  /** The connection, as the lease needs it for a new token. */
  connection: () => {
    /** One connection is open and no reconnect runs: a new token can go over it. */
    readonly steady: boolean;
    /** Hands a new token to the open connection (`refresh_token`); false when it could not be written. */
    refreshToken(token: string): boolean;
    reconnect(opts: { reRegister: boolean; immediate: boolean }): void;
  };
}

/**
 * The agent's lease with the registry: registration (with the best token), heartbeats from a
 * timer plus an early one when the load crosses the busy line (EarlyBeat), the token's renewal
 * before it expires, and deregistration. It knows nothing of sockets: a refused heartbeat or a
 * token due without an open connection is handed to the connection's reconnect loop.
 */
export class AgentLease {
  /** A heartbeat as soon as the load crosses the busy line, not half a lease later. */
  private readonly earlyBeat: EarlyBeat;
  private registration_: Registration | undefined;
  private capabilities: CapabilitySpec[] = [];
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private heartbeatEveryMs = 0;
  private beating = false;
  private refreshTimer: NodeJS.Timeout | undefined;

  constructor(private readonly d: AgentLeaseDeps) {
    this.earlyBeat = new EarlyBeat({
      maxConcurrency: d.maxConcurrency,
      running: d.running,
      beat: () => {
        if (!this.registration_ || isStopping(this.d.state())) return true; // nothing to tell
        if (this.beating) return false; // one is on its way: try again after the gap
        void this.beat();
        return true;
      },
    });
  }

  get registration(): Registration | undefined {
    return this.registration_;
  }

  /** The capabilities the agent registers: the descriptor's, plus every handled one and subscribed topic. */
  declare(handled: readonly string[], subscribed: readonly string[]): void {
    const byName = new Map<string, CapabilitySpec>();
    for (const c of this.d.options.descriptor.capabilities ?? []) {
      const spec: CapabilitySpec = typeof c === 'string' ? { name: c, mode: 'handle' } : { mode: 'handle', ...c };
      byName.set(spec.name, spec);
    }
    const handledSet = new Set(handled);
    const subscribedSet = new Set(subscribed);
    for (const name of handledSet) if (!byName.has(name)) byName.set(name, { name, mode: 'handle' });
    for (const name of subscribedSet) if (!byName.has(name)) byName.set(name, { name, mode: 'subscribe' });
    for (const spec of byName.values()) {
      const served = spec.mode === 'subscribe' ? subscribedSet.has(spec.name) : handledSet.has(spec.name);
      if (!served) this.d.log.warn({ capability: spec.name }, 'capability declared without a handler: its deliveries will be rejected');
    }
    this.capabilities = [...byName.values()];
  }

  /** Registers (again: same agent id, a new token) and heartbeats at the interval the registry gave. */
  async register(): Promise<Registration> {
    const reg = await this.registerOnce();
    this.startHeartbeat();
    return reg;
  }

  /** A handler started or ended: an early heartbeat when the node became busy or idle. */
  loadChanged(): void {
    this.earlyBeat.changed();
  }

  /** No early heartbeats any more (the node is stopping); the regular ones go on until stopTimers(). */
  stopEarlyBeats(): void {
    this.earlyBeat.stop();
  }

  stopTimers(): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.heartbeatTimer = undefined;
    this.refreshTimer = undefined;
  }

  async deregister(): Promise<void> {
    const reg = this.registration_;
    if (!reg) return;
    try {
      await this.d.registry.deregister(reg.agent_id, reg.token);
      this.d.log.info({ agent_id: reg.agent_id }, 'deregistered');
    } catch (err) {
      this.d.log.warn({ agent_id: reg.agent_id, err: errorText(err) }, 'deregistration failed; the lease will expire');
    }
  }

  private async registerOnce(): Promise<Registration> {
    const previous = this.registration_;
    const descriptor: AgentDescriptor = {
      ...this.d.options.descriptor,
      // Re-registering under the same id replaces the record atomically (R-A3) and keeps the delivery stream.
      agent_id: previous?.agent_id ?? this.d.options.descriptor.agent_id,
      capabilities: this.capabilities,
    };
    const reg = await this.registerWithBestToken(descriptor, previous);
    if (previous && reg.agent_id !== previous.agent_id) {
      this.d.log.warn({ agent_id: reg.agent_id, previous_agent_id: previous.agent_id }, 'the registry gave a new agent id; the delivery stream starts over');
    }
    this.registration_ = reg;
    this.scheduleTokenRefresh();
    this.d.log.info(
      { agent_id: reg.agent_id, lease_id: reg.lease_id, heartbeat_interval_ms: reg.heartbeat_interval_ms },
      previous ? 're-registered' : 'registered',
    );
    if (!previous) for (const w of reg.warnings ?? []) this.d.log.warn({ agent_id: reg.agent_id, field: w.field }, `registry: ${w.message}`);
    this.d.onRegistered(reg, previous);
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
    const tokens = [...new Set([own, this.d.options.token].filter((t) => t !== undefined))];
    if (tokens.length === 0) return this.d.registry.register(descriptor);
    for (let i = 0; ; i++) {
      try {
        return await this.d.registry.register(descriptor, tokens[i]);
      } catch (err) {
        const last = i === tokens.length - 1;
        if (last || !(err instanceof ReachError && err.codeName === 'AUTH_FAILED')) throw err;
        this.d.log.warn({ agent_id: previous?.agent_id, err: err.message }, 'registration refused the agent token; trying the configured token');
      }
    }
  }

  /** Heartbeats come from a timer, independent of deliveries, so running handlers never delay them. */
  private startHeartbeat(): void {
    const every = this.registration_!.heartbeat_interval_ms;
    if (this.heartbeatTimer && every === this.heartbeatEveryMs) return;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatEveryMs = every;
    this.heartbeatTimer = setInterval(() => void this.beat(), every);
  }

  private async beat(): Promise<void> {
    const reg = this.registration_;
    if (this.beating || !reg || this.d.state() === 'stopped') return;
    this.beating = true;
    try {
      const load = this.d.load();
      this.earlyBeat.sent(load.current_load);
      await this.d.registry.heartbeat(reg.agent_id, reg.token, load);
    } catch (err) {
      const status = err instanceof ReachError ? err.details?.http_status : undefined;
      if (err instanceof ReachError && (err.codeName === 'AUTH_FAILED' || status === 404 || status === 410)) {
        // The lease is gone (expired while we were away) or the token was refused: register again.
        this.d.log.warn({ agent_id: reg.agent_id, code: err.code, err: err.message }, 'heartbeat refused; re-registering');
        this.d.connection().reconnect({ reRegister: true, immediate: true });
      } else {
        this.d.log.warn({ agent_id: reg.agent_id, err: errorText(err) }, 'heartbeat failed');
      }
    } finally {
      this.beating = false;
    }
  }

  private scheduleTokenRefresh(delay = refreshDelayMs(this.registration_!.token, Date.now(), this.d.options.tokenRefreshRatio ?? 0.8)): void {
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
    if (this.d.state() !== 'running') return;
    const connection = this.d.connection();
    if (!connection.steady) {
      connection.reconnect({ reRegister: true, immediate: true });
      return;
    }
    this.d.log.info({ agent_id: this.registration_?.agent_id }, 'token nears expiry; re-registering and renewing it on the open connection');
    try {
      await this.register(); // schedules the next refresh
    } catch (err) {
      this.d.log.warn({ agent_id: this.registration_?.agent_id, err: errorText(err) }, 'token refresh failed; trying again');
      this.scheduleTokenRefresh(TOKEN_REFRESH_RETRY_MS);
      return;
    }
    if (!connection.refreshToken(this.registration_!.token)) connection.reconnect({ reRegister: false, immediate: true });
  }
}
