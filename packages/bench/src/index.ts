import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '@reach/core';
import { createKafka } from '@reach/kafka';
import { rawLoop, type LoopResult } from './raw.js';
import { pipelineLoop } from './pipeline.js';
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
  wsUrl: string;
  schemaRegistryUrl: string;
  adminToken: string;
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
  const { receive, delivered } = await pipelineLoop({
    kafka,
    registryUrl: o.registryUrl,
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
    print(JSON.stringify({ options: { ...o, adminToken: undefined }, results }, null, 2) + '\n');
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
  }
  return results;
}
export { benchCommand } from './command.js';
