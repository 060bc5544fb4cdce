import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AssignerProtocol, Partitioners, type Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newMessageId } from '@reach/core';
import { localStack, startTestAgent, stopTestAgents, type TestAgent } from '@reach/sdk/testing';
import { reachCli } from '../../helpers/cli.js';
import { adminToken, uniq, urls } from '../../helpers/env.js';
import { plainKafka } from '../../helpers/kafka.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../../helpers/otlp-receiver.js';
import { eventually } from '../../helpers/wait.js';
import { spawnService } from '../../helpers/services.js';

// Tracing end to end (R-F1) against the real stack: extra instances of ingress, router,
// dispatcher, retry-scheduler and dead-letter run with REACH_OTLP_ENDPOINT pointing at a receiver inside this
// test (the stack's own services run with tracing off, the default). They join the stack's
// consumer groups, so the test picks message ids and an agent id whose partitions these
// instances own, and connects its agent to the extra dispatcher: each message then crosses only
// traced instances, and the exported spans must form one tree across services.

const TRACED = ['ingress', 'router', 'dispatcher', 'retry-scheduler', 'dead-letter'] as const;
type Traced = (typeof TRACED)[number];

interface Extra {
  service: Traced;
  instanceId: string;
  child: ChildProcess;
  output: () => string;
  port: number;
  stop: () => Promise<number | null>;
}

async function startExtra(service: Traced, otlp: string): Promise<Extra> {
  const instanceId = uniq(`${service}-traced`);
  const rules = join(process.cwd(), '.reach', 'rules.yaml');
  const s = spawnService(service, {
    REACH_INSTANCE_ID: instanceId,
    ...(service === 'router' && existsSync(rules) ? { REACH_RULES_FILE: rules } : {}),
    REACH_OTLP_ENDPOINT: otlp,
    // Export within a fraction of a second instead of the default 5 s.
    OTEL_BSP_SCHEDULE_DELAY: '100',
  });
  return { service, instanceId, child: s.child, output: s.output, port: await s.port, stop: s.stop };
}

async function stopExtra(e: Extra): Promise<void> {
  await e.stop();
}

/** The partition kafkajs's default (murmur2) partitioner gives `key` among `n` partitions. */
function partitionOf(key: string, n: number): number {
  const partitioner = Partitioners.DefaultPartitioner();
  const partitionMetadata = Array.from({ length: n }, (_, partitionId) => ({ partitionId, leader: 0, replicas: [0], isr: [0], partitionErrorCode: 0 }));
  return partitioner({ topic: 't', partitionMetadata, message: { key, value: null } });
}

/** The partitions of `topic` that the member with this client id owns in `group` (empty until the rebalance gave it some). */
async function ownedPartitions(admin: Admin, group: string, clientId: string, topic: string): Promise<number[]> {
  const { groups } = await admin.describeGroups([group]);
  const g = groups[0];
  if (!g || g.state !== 'Stable') return [];
  const member = g.members.find((m) => m.clientId === clientId);
  if (!member || member.memberAssignment.length === 0) return [];
  return AssignerProtocol.MemberAssignment.decode(member.memberAssignment)?.assignment[topic] ?? [];
}

/** A key (from `make`) that lands on a partition in `owned` for every topic given. */
function keyOwned(make: () => string, wants: ReadonlyArray<{ owned: readonly number[]; partitions: number }>): string {
  for (let i = 0; i < 10_000; i++) {
    const key = make();
    if (wants.every((w) => w.owned.includes(partitionOf(key, w.partitions)))) return key;
  }
  throw new Error('no key found for the owned partitions');
}

const hex = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');

describe('tracing across services (OTLP export on extra instances)', () => {
  let receiver: OtlpReceiver;
  const extras = new Map<Traced, Extra>();
  let admin: Admin;
  let agent: TestAgent;
  const capability = uniq('trace_cap').replace(/-/g, '_');
  /** ctx.traceparent each handler run saw, by message id and attempt. */
  const seen = new Map<string, Array<string | undefined>>();
  let retryOnce: string;
  let firstMessageId: string;
  let followUpId: string | undefined;
  let owned: Record<'ingress' | 'pending' | 'routed' | 'retry' | 'dlq', { owned: number[]; partitions: number }>;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    for (const e of await Promise.all(TRACED.map((s) => startExtra(s, receiver.url)))) extras.set(e.service, e);
    await Promise.all(
      [...extras.values()].map((e) =>
        eventually(
          `${e.service} (traced) ready`,
          async () => (await fetch(`http://127.0.0.1:${e.port}/readyz`).catch(() => undefined))?.status === 200,
          45_000,
        ),
      ),
    );
    admin = plainKafka().admin();
    await admin.connect();
    const partitionsOf = async (topic: string) => (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0]!.partitions.length;
    const assigned = async (service: Traced, topic: string) => {
      const e = extras.get(service)!;
      const parts = await eventually(
        `${service} (traced) to own partitions of ${topic}`,
        async () => {
          const p = await ownedPartitions(admin, `reach-${service}`, e.instanceId, topic);
          return p.length > 0 ? p : undefined;
        },
        45_000,
        250,
      );
      return { owned: parts, partitions: await partitionsOf(topic) };
    };
    owned = {
      ingress: await assigned('ingress', 'reach.ingress.v1'),
      pending: await assigned('router', 'reach.pending.v1'),
      routed: await assigned('dispatcher', 'reach.routed.v1'),
      retry: await assigned('retry-scheduler', 'reach.retry.v1'),
      dlq: await assigned('dead-letter', 'reach.dlq.v1'),
    };

    // An agent whose deliveries the traced dispatcher consumes (reach.routed.v1 is keyed by
    // agent id), connected to that same dispatcher.
    const agentId = keyOwned(() => uniq('agent.traced'), [owned.routed]);
    const extraDispatcher = extras.get('dispatcher')!;
    agent = await startTestAgent({
      stack: { ...localStack(), dispatcherUrl: `ws://127.0.0.1:${extraDispatcher.port}/v1/connect` },
      descriptor: { agent_id: agentId, metadata: { max_concurrency: 4 } },
      handlers: {
        [capability]: async (msg, ctx) => {
          const runs = seen.get(msg.message_id) ?? [];
          runs.push(ctx.traceparent);
          seen.set(msg.message_id, runs);
          const step = (msg.payload as { step?: string } | null)?.step;
          if (step === 'first') followUpId = await ctx.node.send({ capability, payload: { step: 'follow-up' } });
          // A plain error rejects the delivery as 3003, retryable: the dispatcher schedules a retry.
          if (msg.message_id === retryOnce && ctx.attempt === 0) throw new Error('not yet: try again');
          return { ok: step };
        },
      },
    });
  });

  afterAll(async () => {
    await stopTestAgents();
    await admin?.disconnect();
    await Promise.all([...extras.values()].map(stopExtra));
    await receiver?.close();
  });

  async function submit(body: Record<string, unknown>, traceparent?: string): Promise<void> {
    const res = await fetch(`http://127.0.0.1:${extras.get('ingress')!.port}/v1/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken()}`, 'content-type': 'application/json', ...(traceparent ? { traceparent } : {}) },
      body: JSON.stringify(body),
    });
    expect(res.status, await res.clone().text()).toBe(202);
  }

  const spansOf = (traceId: string, name?: string): ReceivedSpan[] =>
    receiver.spans.filter((s) => s.traceId === traceId && (name === undefined || s.name === name)).sort((a, b) => a.startMs - b.startMs);

  it('exports ingest → route → dispatch as one tree, and the handler sees the dispatch span', async () => {
    const traceId = hex(32);
    const clientSpan = hex(16);
    // Keyed by message id on reach.pending.v1: an id the traced router consumes.
    const messageId = keyOwned(() => newMessageId(), [owned.pending]);
    firstMessageId = messageId;
    await submit({ message_id: messageId, capability, payload: { step: 'first' } }, `00-${traceId}-${clientSpan}-01`);

    const [ingest, route, dispatch] = await eventually(
      'ingest, route and dispatch spans',
      () => {
        const found = [spansOf(traceId, 'ingest')[0], spansOf(traceId, 'route')[0], spansOf(traceId, 'dispatch')[0]];
        return found.every(Boolean) ? (found as ReceivedSpan[]) : undefined;
      },
      30_000,
    );
    expect(new Set(spansOf(traceId).map((s) => s.service))).toEqual(new Set(['reach-ingress', 'reach-router', 'reach-dispatcher']));
    expect(ingest).toMatchObject({ service: 'reach-ingress', parentSpanId: clientSpan, instance: extras.get('ingress')!.instanceId });
    expect(ingest!.attributes).toMatchObject({ 'reach.message_id': messageId, 'reach.via': 'http', 'reach.ingest.outcome': 'accepted' });
    expect(route).toMatchObject({ service: 'reach-router', parentSpanId: ingest!.spanId, status: { code: 0 } });
    expect(route!.attributes).toMatchObject({ 'reach.message_id': messageId, 'reach.route.outcome': 'routed', 'reach.agent_id': agent.agentId });
    expect(route!.attributes['reach.route.candidates']).toBeGreaterThanOrEqual(1);
    expect(typeof route!.attributes['reach.route.strategy']).toBe('string');
    expect(dispatch).toMatchObject({ service: 'reach-dispatcher', parentSpanId: route!.spanId, status: { code: 0 } });
    expect(dispatch!.attributes).toMatchObject({ 'reach.message_id': messageId, 'reach.agent_id': agent.agentId, 'reach.attempt': 0 });
    expect(['ack', 'result']).toContain(dispatch!.attributes['reach.dispatch.outcome']);
    expect(dispatch!.endMs).toBeGreaterThanOrEqual(dispatch!.startMs);

    // The deliver frame carried the dispatch span's context to the handler.
    expect(seen.get(messageId)).toEqual([`00-${traceId}-${dispatch!.spanId}-01`]);

    // The handler's follow-up (sent through ctx.node) joined the same trace, as its child.
    const followUp = await eventually('the follow-up message', () => followUpId, 20_000);
    const followSeen = await eventually('the follow-up delivered', () => seen.get(followUp), 30_000);
    expect(followSeen[0]).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    expect(receiver.rejected).toEqual([]);
  });

  it('traces a retry: the failed dispatch (ERROR 3003), the retry wait, and the next attempt', async () => {
    const traceId = hex(32);
    // Keyed by message id on reach.pending.v1 and reach.retry.v1: both consumed by traced instances.
    retryOnce = keyOwned(() => newMessageId(), [owned.pending, owned.retry]);
    await submit({ message_id: retryOnce, trace_id: traceId, capability, payload: { step: 'retry' } });

    const spans = await eventually(
      'spans of both attempts',
      () => {
        const s = spansOf(traceId);
        return s.filter((x) => x.name === 'dispatch').length >= 2 && s.some((x) => x.name === 'retry_wait') && s.filter((x) => x.name === 'route').length >= 2
          ? s
          : undefined;
      },
      30_000,
    );
    const ingest = spans.find((s) => s.name === 'ingest')!;
    expect(ingest.parentSpanId).toBeUndefined(); // a root of the envelope's trace id
    const [route0, route1] = spans.filter((s) => s.name === 'route');
    const [failed, done] = spans.filter((s) => s.name === 'dispatch');
    const wait = spans.find((s) => s.name === 'retry_wait')!;
    expect(route0!.parentSpanId).toBe(ingest.spanId);
    expect(failed).toMatchObject({ parentSpanId: route0!.spanId, status: { code: 2 } });
    expect(failed!.attributes).toMatchObject({ 'reach.dispatch.outcome': 'reject', 'reach.error.code': 3003, 'reach.attempt': 0 });
    expect(wait).toMatchObject({ service: 'reach-retry-scheduler', parentSpanId: failed!.spanId });
    expect(wait.attributes).toMatchObject({ 'reach.message_id': retryOnce, 'reach.retry.kind': 'retry' });
    expect(route1).toMatchObject({ parentSpanId: wait.spanId });
    expect(route1!.attributes).toMatchObject({ 'reach.attempt': 1 });
    expect(done).toMatchObject({ parentSpanId: route1!.spanId, status: { code: 0 } });
    expect(done!.attributes).toMatchObject({ 'reach.attempt': 1 });
    expect(seen.get(retryOnce)).toEqual([`00-${traceId}-${failed!.spanId}-01`, `00-${traceId}-${done!.spanId}-01`]);

    // The read model shows the same story as stages with durations.
    const trace = await eventually(
      'the trace with both attempts in the read model',
      async () => {
        const r = await fetch(`${urls.ingress}/v1/traces/${traceId}`, { headers: { authorization: `Bearer ${adminToken()}` } });
        const body = (await r.json()) as { messages: Array<{ status: string; stages: Array<{ stage: string; attempt: number; duration_ms: number }> }> };
        return r.status === 200 && body.messages[0]?.status === 'DELIVERED' && body.messages[0].stages.some((s) => s.stage === 'agent' && s.attempt === 1)
          ? body
          : undefined;
      },
      30_000,
    );
    const stages = trace.messages[0]!.stages.map((s) => `${s.stage}#${s.attempt}`);
    expect(stages).toEqual(expect.arrayContaining(['ingest#0', 'route#0', 'dispatch#0', 'agent#0', 'retry_wait#1', 'route#1', 'dispatch#1', 'agent#1']));
    for (const s of trace.messages[0]!.stages) expect(s.duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('traces a dead letter and its replay: dead_letter under the route that gave up, the replay continuing that trace', async () => {
    const traceId = hex(32);
    const nobody = uniq('trace_nobody').replace(/-/g, '_');
    // Keyed by message id on reach.pending.v1 (route), reach.dlq.v1 (store) and, for the replay,
    // reach.ingress.v1: all consumed by traced instances. No agent offers `nobody`, and the
    // expire_at makes the router park the message with the dead-letter service.
    const messageId = keyOwned(() => newMessageId(), [owned.pending, owned.dlq, owned.ingress]);
    await submit({
      message_id: messageId,
      trace_id: traceId,
      capability: nobody,
      payload: { step: 'dlq' },
      expire_at: new Date(Date.now() + 120_000).toISOString(),
    });

    const [route, stored] = await eventually(
      'route and dead_letter spans',
      () => {
        const found = [spansOf(traceId, 'route')[0], spansOf(traceId, 'dead_letter')[0]];
        return found.every(Boolean) ? (found as ReceivedSpan[]) : undefined;
      },
      30_000,
    );
    expect(route).toMatchObject({ service: 'reach-router', status: { code: 2 } });
    expect(route!.attributes).toMatchObject({ 'reach.message_id': messageId, 'reach.route.outcome': 'no_route' });
    expect(stored).toMatchObject({
      service: 'reach-dead-letter',
      parentSpanId: route!.spanId,
      instance: extras.get('dead-letter')!.instanceId,
      status: { code: 2 },
    });
    expect(stored!.attributes).toMatchObject({
      'reach.message_id': messageId,
      'reach.dlq.reason': 'NO_ROUTE',
      'reach.dlq.from': 'router',
      'reach.error.code': 2001,
    });
    const dlqId = String(stored!.attributes['reach.dlq_id']);

    // An admin replays it through the traced dead-letter instance: the replay span continues
    // the stored context, and ingress's span for the replayed record is its child.
    const res = await fetch(`http://127.0.0.1:${extras.get('dead-letter')!.port}/v1/dlq/${dlqId}/replay`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken()}` },
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const [replay, ingest, route1] = await eventually(
      'the replay, its ingest and its route spans',
      () => {
        const replaySpan = spansOf(traceId, 'dead_letter_replay')[0];
        const ingestSpan = replaySpan && spansOf(traceId, 'ingest').find((x) => x.parentSpanId === replaySpan.spanId);
        const routeSpan = ingestSpan && spansOf(traceId, 'route').find((x) => x.parentSpanId === ingestSpan.spanId);
        return routeSpan ? [replaySpan, ingestSpan, routeSpan] : undefined;
      },
      30_000,
    );
    expect(replay).toMatchObject({ service: 'reach-dead-letter', parentSpanId: stored!.spanId, status: { code: 0 } });
    expect(replay!.attributes).toMatchObject({ 'reach.dlq_id': dlqId, 'reach.message_id': messageId, 'reach.attempt': 1, 'reach.replay.cause': 'manual' });
    expect(ingest).toMatchObject({ service: 'reach-ingress' });
    expect(ingest!.attributes).toMatchObject({ 'reach.message_id': messageId, 'reach.via': 'kafka' });
    expect(route1!.attributes).toMatchObject({ 'reach.message_id': messageId, 'reach.attempt': 1 });
    expect(receiver.rejected).toEqual([]);
  });

  it('GET /v1/traces and `reach trace` show the tree: the follow-up under the message whose handler sent it', async () => {
    const messageId = firstMessageId;
    const followUp = followUpId!;
    const state = (await (await fetch(`${urls.ingress}/v1/messages/${messageId}`, { headers: { authorization: `Bearer ${adminToken()}` } })).json()) as {
      trace_id: string;
    };
    type Tree = { message_id: string; link: string; children: Tree[] };
    const body = await eventually(
      'both messages delivered in the trace',
      async () => {
        const r = await fetch(`${urls.ingress}/v1/traces/${state.trace_id}`, { headers: { authorization: `Bearer ${adminToken()}` } });
        const b = (await r.json()) as { messages: Array<{ message_id: string; status: string }>; tree: Tree[] };
        return r.status === 200 && b.messages.length === 2 && b.messages.every((m) => m.status === 'DELIVERED') ? b : undefined;
      },
      30_000,
    );
    expect(body.tree).toEqual([{ message_id: messageId, link: 'root', children: [{ message_id: followUp, link: 'sent_by_handler', children: [] }] }]);

    const cli = await reachCli(['trace', messageId]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toContain(`trace ${state.trace_id}`);
    expect(cli.stdout).toMatch(new RegExp(`\\ntree\\n${messageId}  task_request → ${capability}  DELIVERED @ ${agent.agentId}  \\d+ ms\\n`));
    expect(cli.stdout).toMatch(/│ {2}ingest \d+ ms · route \d+ ms · dispatch \d+ ms · agent \d+ ms/);
    expect(cli.stdout).toContain(`└─ (sent_by_handler) ${followUp}`);
  });

  it('exports only from the traced instances, and the extra instances stop cleanly', async () => {
    // Every exported span came from one of the instances this test started (the stack's own run with tracing off).
    const ours = new Set([...extras.values()].map((e) => e.instanceId));
    expect(receiver.spans.length).toBeGreaterThan(0);
    expect(receiver.spans.filter((s) => !ours.has(String(s.instance)))).toEqual([]);
    for (const e of extras.values()) {
      await stopExtra(e);
      expect(e.child.exitCode, e.output().slice(-2000)).toBe(0);
      expect(e.output()).toContain('tracing on: spans are exported to');
    }
  });
});
