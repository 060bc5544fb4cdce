import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadRate } from '@reach/agents';
import type { AgentRecord } from '@reach/envelope';
import { startTableView, TOPICS, valueSubject } from '@reach/kafka';
import { ReachError } from '@reach/core';
import type { FetchFn } from '@reach/sdk';
import { PeriodicJob, runService, type Reply, type ServiceContext } from '@reach/service-kit';
import { checkServices, type ServiceHealth } from './health.js';
import { PipelineSampler } from './pipeline.js';
import { registerProxy } from './proxy.js';
import { QosHistory } from './qos-history.js';
import { registerStatic } from './static.js';
import { resolveUpstreams, upstreamFetch, UPSTREAM_PORT_OPTIONS } from './upstreams.js';

// console: the operators' web page (R-F4; docs/design.md §3 port 7420). A client of the stack
// like the CLI: it serves the page, forwards the page's calls to the services' public HTTP APIs,
// and reads two things itself — consumer offsets (queue depth per stage) with a Kafka admin
// client, and the registry's change feed for the QoS trend. It keeps no token of its own.
const OPTIONS = ['consoleUpstreams', 'tlsClientCert', 'tlsClientKey', ...Object.values(UPSTREAM_PORT_OPTIONS)] as const;
type Key = (typeof OPTIONS)[number];

/** How often offsets and service readiness are read while the page is open; it polls at this pace. */
const SAMPLE_INTERVAL_MS = 2000;
/**
 * With nobody looking (no page poll for DEMAND_WINDOW_MS) samples are this far apart: enough to
 * keep the lag gauge current for alerts (they look at minutes), and the idle stack stays asleep —
 * sampling every 2 s (eight readiness calls and a Kafka offsets round) was ~1.8 % of a core.
 */
const IDLE_SAMPLE_MS = 30_000;
const DEMAND_WINDOW_MS = 30_000;
const AGENTS_SUBJECT = valueSubject(TOPICS.agents.name);
const WEB_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'web');

async function start(ctx: ServiceContext<Key>): Promise<void> {
  const upstreams = resolveUpstreams(ctx.config);
  ctx.log.info({ upstreams }, 'console upstreams');
  registerStatic(ctx.http, WEB_DIR);
  const fetchUpstream = upstreamFetch(ctx.config);
  registerProxy(ctx.http, upstreams, fetchUpstream);

  const lag = ctx.metrics.gauge(
    'consumer_lag_messages',
    'Records not yet consumed per pipeline stage (end offsets minus the committed offsets of its consumer group).',
    ['stage'],
  );
  const pipeline = new PipelineSampler(ctx.kafka, ctx.log, (stage, n) => lag.set({ stage }, n));
  let services: ServiceHealth[] = [];
  let sampledAt: string | null = null;
  let lastSample = 0;
  let lastDemand = 0;
  const sample = async () => {
    const now = Date.now();
    if (now - lastDemand > DEMAND_WINDOW_MS && now - lastSample < IDLE_SAMPLE_MS) return;
    lastSample = now;
    const [health] = await Promise.all([checkServices(upstreams, fetchUpstream), pipeline.sample()]);
    services = health;
    sampledAt = new Date().toISOString();
  };
  await sample();
  const sampler = new PeriodicJob('console-sample', SAMPLE_INTERVAL_MS, sample, ctx.log);
  sampler.start();
  ctx.onShutdown(() => pipeline.stop());
  ctx.onShutdown(() => sampler.stop());

  const qos = new QosHistory();
  const agents = await startTableView<AgentRecord>({
    kafka: ctx.kafka,
    topic: TOPICS.agents.name,
    logger: ctx.log,
    onFatal: ctx.fatal,
    groupPrefix: `reach-${ctx.service}-agents`,
    decode: (value) => ctx.codec.decode<AgentRecord>(AGENTS_SUBJECT, value),
    accept: (incoming, current) => current === undefined || incoming.revision >= current.revision,
    onChange: (id, record) => (record ? qos.record(id, record.updated_at, record.qos, loadRate(record)) : qos.forget(id)),
  });
  ctx.onShutdown(() => agents.stop());
  ctx.addReadinessCheck('agents-view', () => agents.caughtUp);

  ctx.http.route('GET', '/api/overview', () => {
    lastDemand = Date.now();
    return {
      status: 200,
      headers: { 'cache-control': 'no-store' },
      body: { at: sampledAt, refresh_ms: SAMPLE_INTERVAL_MS, services, pipeline: pipeline.snapshot() },
    };
  });
  // The QoS trend names agents, so it shows exactly the agents the caller's own token may list
  // (issue #13): the registry decides, asked with the caller's Authorization, as the page would.
  ctx.http.route('GET', '/api/qos-history', async (req) => {
    const visible = await visibleAgentIds(upstreams.registry, req.headers.authorization, fetchUpstream);
    if ('status' in visible) return visible;
    const since = Number(req.query.get('since') ?? 0);
    const delta = qos.since(Number.isFinite(since) && since > 0 ? since : 0);
    const agents = Object.fromEntries(Object.entries(delta.agents).filter(([id]) => visible.has(id)));
    return { status: 200, headers: { 'cache-control': 'no-store' }, body: { ...delta, agents } };
  });
}

/** The agent ids the registry lists for this Authorization, or its refusal as the answer. */
async function visibleAgentIds(registry: string, authorization: string | string[] | undefined, fetchUpstream: FetchFn): Promise<Set<string> | Reply> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (typeof authorization === 'string') headers.authorization = authorization;
  let res: Response;
  try {
    res = await fetchUpstream(`${registry}/v1/agents`, { headers, signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    throw new ReachError('DEPENDENCY_UNAVAILABLE', `registry did not answer at ${registry}: ${(err as Error).message}`, { cause: err });
  }
  const text = await res.text();
  if (res.status !== 200) return { status: res.status, body: text, text: true, headers: { 'content-type': 'application/json; charset=utf-8' } };
  return new Set((JSON.parse(text) as { agents: Array<{ agent_id: string }> }).agents.map((a) => a.agent_id));
}

await runService({
  name: 'console',
  port: 'consolePort',
  options: OPTIONS,
  start,
});
