import { ERROR, type Logger } from '@reach/core';
import type { AgentRecord, Presence } from '@reach/envelope';
import type { TableView } from '@reach/kafka';
import { isReachable } from '@reach/routing';
import type { DeadLetterMetrics } from './metrics.js';
import { agentServes, addressOf, lookupKeys, redriveDecision } from './redrive-match.js';
import { ReplayRefused, type Replayer } from './replayer.js';
import type { DeadLetterStore } from './store.js';
import { acceptsNewWork } from '@reach/agents';

/**
 * How long after an agent appears its parked messages are redriven. The routers learn of the
 * agent from the same compacted topic; the short delay lets them catch up, so the redriven
 * message finds the agent instead of being parked again.
 */
export const REDRIVE_DELAY_MS = 1000;
/** A full pass over every available agent, for changes missed or redriven too early. */
export const REDRIVE_PASS_MS = 30_000;
const BATCH = 500;

/**
 * Automatic redrive (R-B10): follows reach.agents.v1 and, when an agent that can take a
 * parked NO_ROUTE message appears, sends the message back through ingress; one whose expire_at
 * passed becomes DEAD (EXPIRED) instead. Work runs off the Kafka consumer, one pass at a time.
 */
export class Redriver {
  private views: { agents: TableView<AgentRecord>; presence: TableView<Presence> } | undefined;
  private readonly changed = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private pass: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly store: DeadLetterStore,
    private readonly replayer: Replayer,
    private readonly metrics: DeadLetterMetrics,
    private readonly log: Logger,
  ) {}

  /**
   * onChange of the agents and presence views: an agent that can take new work, or one that
   * just connected to a dispatcher, may unpark messages (the router needs both).
   */
  onAgentChange(agentId: string, available: boolean): void {
    if (this.stopped || !available) return;
    this.changed.add(agentId);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      const ids = [...this.changed];
      this.changed.clear();
      this.enqueue(() => this.redriveFor(ids));
    }, REDRIVE_DELAY_MS);
  }

  start(views: { agents: TableView<AgentRecord>; presence: TableView<Presence> }): void {
    this.views = views;
    const all = () => [...views.agents.entries()].map(([id]) => id);
    this.pass = setInterval(() => this.enqueue(() => this.redriveFor(all())), REDRIVE_PASS_MS);
    this.pass.unref();
    // the agents already registered when this instance started
    this.enqueue(() => this.redriveFor(all()));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.pass);
    await this.running;
  }

  private enqueue(work: () => Promise<void>): void {
    this.running = this.running.then(async () => {
      if (this.stopped) return;
      try {
        await work();
      } catch (err) {
        this.log.warn({ err }, 'redrive pass failed; retried on the next agent change or pass');
      }
    });
  }

  private async redriveFor(agentIds: readonly string[]): Promise<void> {
    const views = this.views;
    if (!views || agentIds.length === 0) return;
    const now = Date.now();
    // what the router asks of a candidate: live, and reachable by a dispatcher
    const agents = agentIds
      .map((id) => views.agents.get(id))
      .filter((a): a is AgentRecord => a !== undefined && acceptsNewWork(a, now) && isReachable(a, views.presence.get(a.agent_id)));
    if (agents.length === 0) return;
    const rows = await this.store.parkedNoRoute(lookupKeys(agents), BATCH);
    let redriven = 0;
    let expired = 0;
    for (const row of rows) {
      if (this.stopped) return;
      const decision = redriveDecision(row, agents, Date.now());
      if (decision === 'wait') continue;
      const log = { dlq_id: row.dlq_id, message_id: row.message_id, trace_id: row.trace_id, capability: row.capability };
      if (decision === 'expired') {
        if (await this.store.markDead(row.dlq_id, { event: 'DEAD', at: new Date().toISOString(), why: 'EXPIRED', code: ERROR.EXPIRED })) {
          expired++;
          this.log.info(log, 'parked message expired before an agent appeared; now DEAD');
        }
        continue;
      }
      const agent = agents.find((a) => agentServes(a, addressOf(row), Date.now()));
      try {
        await this.replayer.replay(row.dlq_id, 'redrive', ['PARKED']);
        redriven++;
        this.log.info({ ...log, agent_id: agent?.agent_id }, 'parked message redriven: a matching agent appeared');
      } catch (err) {
        // taken by another instance or an admin meanwhile: nothing to do
        if (!(err instanceof ReplayRefused)) throw err;
      }
    }
    this.metrics.expiredRows(expired);
    if (redriven + expired > 0) this.log.info({ redriven, expired, agents: agents.length }, 'redrive pass done');
  }
}
