import type { Logger } from '@reach/core';
import type { CircuitCache } from '@reach/circuits';
import { domainGate, routesDelta, routesView, type RoutesView } from '@reach/routing';
import type { RegistryViews } from '@reach/service-kit';
import { routesFrame } from './protocol.js';

/** A connection that asked for the pre-flight view. */
export interface RoutesWatcher {
  readonly agentId: string | undefined;
  /** The security domain of its token. */
  readonly domain: string;
  /** Writes one frame; false when the connection is gone. */
  sendRoutes(frame: string): boolean;
}

export interface RoutesFeedDeps {
  /**
   * Starts the registry views (agents, presence, grants) the first time a connection asks;
   * `onChange` is to be called after every change they apply.
   */
  startViews: (onChange: () => void) => Promise<RegistryViews>;
  /** The circuit map; the feed starts and stops it. Call the feed's changed() on its transitions. */
  circuits: CircuitCache;
  reconnectGraceMs: number;
  /**
   * How often the views are compared with what each watcher was sent even when no feed moved:
   * what time alone changes (a reconnect grace or a circuit's open period that ends).
   */
  refreshMs: number;
  /** How long after a change the watchers get it: the changes of a burst (a Kafka batch) go in one frame. Default 10 ms. */
  pushDelayMs?: number;
  log: Logger;
}

/**
 * The pre-flight view over the agent's own socket (R-G6, `subscribe_routes` → `routes`):
 * what each watching agent can reach, by capability and topic, from the same feeds the routers
 * fold (reach.agents.v1, reach.presence.v1, reach.grants.v1) and the same circuits, through the
 * routers' own candidate filter (@reach/routing routesView). Nothing runs until an agent asks:
 * the views start with the first subscription. Then a change is pushed as soon as a feed
 * applies it (or the circuit map sees a transition) — a few milliseconds after the routers see
 * it — and every `refreshMs` for what time alone changes. A watcher gets only what changed for
 * it, and nothing while nothing did.
 */
export class RoutesFeed {
  private views: Promise<RegistryViews> | undefined;
  /** The views once caught up: changes before that are in the first full view anyway. */
  private live: RegistryViews | undefined;
  private readonly watchers = new Map<RoutesWatcher, RoutesView>();
  private timer: NodeJS.Timeout | undefined;
  private pushTimer: NodeJS.Timeout | undefined;
  private circuitsStarted = false;

  constructor(private readonly d: RoutesFeedDeps) {}

  async subscribe(w: RoutesWatcher): Promise<void> {
    const views = await this.start();
    const view = this.viewOf(views, w);
    this.watchers.set(w, view);
    w.sendRoutes(routesFrame(true, view.capabilities, view.topics));
  }

  unsubscribe(w: RoutesWatcher): void {
    this.watchers.delete(w);
  }

  /**
   * Something routing depends on changed (an agent record, a presence, a grant, a circuit): the
   * watchers get what it changed for them shortly, one frame for a burst of changes.
   */
  changed(): void {
    if (!this.live || this.pushTimer || this.watchers.size === 0) return;
    const views = this.live;
    this.pushTimer = setTimeout(() => {
      this.pushTimer = undefined;
      this.refresh(views);
    }, this.d.pushDelayMs ?? 10);
    this.pushTimer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.pushTimer) clearTimeout(this.pushTimer);
    this.live = undefined;
    if (this.circuitsStarted) this.d.circuits.stop();
    const views = this.views;
    this.views = undefined;
    if (views) await (await views).stop();
  }

  private start(): Promise<RegistryViews> {
    this.views ??= (async () => {
      const views = await this.d.startViews(() => this.changed());
      await Promise.all([views.agents.ready(), views.presence.ready(), views.grantsView.ready()]);
      // With Redis away the view starts without circuits (as routing does, R-D12).
      await this.d.circuits.start().catch((err: unknown) => this.d.log.warn({ err }, 'routes feed: circuits not read yet'));
      this.circuitsStarted = true;
      this.live = views;
      this.timer = setInterval(() => this.refresh(views), this.d.refreshMs);
      this.timer.unref();
      this.d.log.info({ agents: views.index.size }, 'routes feed started: registry views caught up');
      return views;
    })();
    return this.views;
  }

  private refresh(views: RegistryViews): void {
    // A view depends on the watcher's domain only (the producer's domain decides the grants): one
    // computation per domain per round, however many agents watch.
    const byDomain = new Map<string, RoutesView>();
    for (const [w, before] of this.watchers) {
      let after = byDomain.get(w.domain);
      if (!after) byDomain.set(w.domain, (after = this.viewOf(views, w)));
      const delta = routesDelta(before, after);
      if (!delta) continue;
      if (w.sendRoutes(routesFrame(false, delta.capabilities, delta.topics))) this.watchers.set(w, after);
      else this.watchers.delete(w);
    }
  }

  private viewOf(views: RegistryViews, w: RoutesWatcher): RoutesView {
    const now = Date.now();
    return routesView({
      index: views.index,
      // The domain travels in the header (as ingress sets it), so the view is the same for every agent of a domain.
      producer: w.agentId ?? '',
      domain: w.domain,
      now,
      reconnectGraceMs: this.d.reconnectGraceMs,
      hooks: {
        domainAllowed: domainGate(views.index, views.grants),
        // A half-open circuit takes a probe: the router may still route there.
        circuitOpen: (agentId) => this.d.circuits.verdict(agentId, now) === 'open',
      },
    });
  }
}
