import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '@reach/core';
import { createKafka } from '@reach/kafka';
import { rawLoop, type LoopResult } from './raw.js';
import { pipelineLoop } from './pipeline.js';
import { mixLoop, type MixResult, type MixSettings } from './mix.js';
import { fmt } from './stats.js';

export interface BenchOptions {
  agents: number;
  producers: number;
  rate: number;
  durationS: number;
  warmupS: number;
  payloadBytes: number;
  json: boolean;
  brokers: readonly string[];
  registryUrl: string;
  ingressUrl: string;
  dispatcherUrl: string;
  wsUrl: string;
  schemaRegistryUrl: string;
  adminToken: string;
}

/** `--mix`: the priority-lane benchmark's own settings (mix.ts), and whether to print JSON. */
export interface MixBenchSettings extends MixSettings {
  json: boolean;
}

export function adminTokenFrom(env: NodeJS.ProcessEnv, root: string): string {
  if (env.REACH_ADMIN_TOKEN) return env.REACH_ADMIN_TOKEN;
  return readFileSync(join(env.REACH_HOME ?? join(root, '.reach'), 'admin-token'), 'utf8').trim();
}

function row(r: LoopResult, durationS: number) {
  return {
    loop: r.name,
    'target/s': r.targetRate || 'max',
    sent: r.sent,
    received: r.received,
    'achieved/s': Math.round(r.received / durationS),
    'p50 ms': fmt(r.latency.p50),
    'p95 ms': fmt(r.latency.p95),
    'p99 ms': fmt(r.latency.p99),
    'max ms': fmt(r.latency.max),
  };
}

/**
 * `reach bench`: the pipeline at a fixed rate next to a raw kafkajs produce→consume loop at the
 * same rate on the same broker, measured in the same run; prints one table.
 */
export async function runBench(o: BenchOptions, print: (text: string) => void): Promise<LoopResult[]> {
  const kafka = createKafka({ brokers: o.brokers, clientId: 'reach-bench', logger: silentLogger });
  const raw = await rawLoop(kafka, { rate: o.rate, durationMs: o.durationS * 1000, payloadBytes: o.payloadBytes, partitions: 6 });
  const { receive, delivered, quota } = await pipelineLoop({
    kafka,
    registryUrl: o.registryUrl,
    ingressUrl: o.ingressUrl,
    wsUrl: o.wsUrl,
    schemaRegistryUrl: o.schemaRegistryUrl,
    adminToken: o.adminToken,
    agents: o.agents,
    producers: o.producers,
    rate: o.rate,
    durationMs: o.durationS * 1000,
    warmupMs: o.warmupS * 1000,
    payloadBytes: o.payloadBytes,
  });
  const results = [raw, receive, delivered];
  if (o.json) {
    print(JSON.stringify({ options: { ...o, adminToken: undefined }, quota, results }, null, 2) + '\n');
  } else {
    const rows = [row(raw, o.durationS), row(receive, o.durationS), row(delivered, o.durationS)];
    const cols = Object.keys(rows[0]!);
    const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c as keyof typeof r]).length)));
    const line = (vals: string[]) => vals.map((v, i) => v.padEnd(widths[i]!)).join('  ');
    print(
      `\nreach bench: ${o.agents} agents, ${o.producers} producers, ${o.rate || 'max'} msg/s for ${o.durationS}s (+${o.warmupS}s warm-up), ${o.payloadBytes} B payloads\n\n`,
    );
    print([line(cols), ...rows.map((r) => line(cols.map((c) => String(r[c as keyof typeof r]))))].join('\n') + '\n');
    const ratio = raw.received > 0 ? (delivered.received / raw.received) * 100 : NaN;
    print(`\npipeline DELIVERED throughput = ${fmt(ratio, 0)} % of the raw loop's in the same run\n`);
    print(`${quota}\n`);
  }
  return results;
}

function table(rows: ReadonlyArray<Record<string, string | number>>): string {
  const cols = Object.keys(rows[0]!);
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
  const line = (vals: string[]) => vals.map((v, i) => v.padEnd(widths[i]!)).join('  ');
  return [line(cols), ...rows.map((r) => line(cols.map((c) => String(r[c]))))].join('\n') + '\n';
}

/**
 * `reach bench --mix`: HIGH latency idle and under a NORMAL + LOW backlog, with the backlog's
 * throughput and latency, in one table (mix.ts).
 */
export async function runMixBench(
  o: Pick<BenchOptions, 'brokers' | 'registryUrl' | 'ingressUrl' | 'dispatcherUrl' | 'wsUrl' | 'schemaRegistryUrl' | 'adminToken'> & MixBenchSettings,
  print: (text: string) => void,
): Promise<MixResult> {
  const kafka = createKafka({ brokers: o.brokers, clientId: 'reach-bench-mix', logger: silentLogger });
  const r = await mixLoop({ ...o, kafka });
  if (o.json) {
    print(JSON.stringify({ options: { ...o, adminToken: undefined }, ...r }, null, 2) + '\n');
    return r;
  }
  print(
    `\nreach bench --mix: ${o.agents} agents × max_concurrency ${o.concurrency}, ${o.handlerMs} ms per message (capacity ≈ ${Math.round(r.capacityPerS)} msg/s); ` +
      `HIGH ${o.highRate} msg/s alone for ${o.idleS}s, then with NORMAL+LOW at ${o.floodRate} msg/s for ${o.durationS}s, then alone again while the backlog drains\n\n`,
  );
  print(
    table(
      r.rows.map((x) => ({
        phase: x.phase,
        priority: x.priority,
        'target/s': fmt(x.targetRate, 0),
        sent: x.sent,
        received: x.received,
        'achieved/s': fmt(x.achieved, 0),
        'p50 ms': fmt(x.latency.p50),
        'p95 ms': fmt(x.latency.p95),
        'p99 ms': fmt(x.latency.p99),
        'max ms': fmt(x.latency.max),
      })),
    ),
  );
  const [idle, mixed, drain] = r.rows;
  print(
    `\nHIGH p99: idle ${fmt(idle!.latency.p99)} ms; while the flood arrives ${fmt(mixed!.latency.p99)} ms (${fmt(mixed!.latency.p99 / idle!.latency.p99, 2)} × idle); ` +
      `while the backlog drains ${fmt(drain!.latency.p99)} ms (${fmt(drain!.latency.p99 / idle!.latency.p99, 2)} × idle). SPEC R-D9: ≤ 80 ms while a LOW backlog drains\n`,
  );
  print(`peak waiting backlog in the dispatcher: ${r.peakWaiting ?? 'unknown (no flow endpoint)'}\n${r.quota}\n`);
  return r;
}
export { benchCommand } from './command.js';
