import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { adminTokenFrom, runBench } from './index.js';

// `pnpm bench` / `reach bench`: see runBench. Defaults: the local stack of `reach up`.
const { values } = parseArgs({
  options: {
    agents: { type: 'string', default: '10' },
    producers: { type: 'string', default: '2' },
    rate: { type: 'string', default: '1000' },
    duration: { type: 'string', default: '20' },
    warmup: { type: 'string', default: '3' },
    payload: { type: 'string', default: '256' },
    json: { type: 'boolean', default: false },
  },
});
const root = fileURLToPath(new URL('../../../', import.meta.url));
const env = process.env;
runBench(
  {
    agents: Number(values.agents),
    producers: Number(values.producers),
    rate: Number(values.rate),
    durationS: Number(values.duration),
    warmupS: Number(values.warmup),
    payloadBytes: Number(values.payload),
    json: values.json,
    brokers: (env.REACH_KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
    registryUrl: 'http://127.0.0.1:7411',
    wsUrl: 'ws://127.0.0.1:7412/v1/connect',
    schemaRegistryUrl: env.REACH_SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081',
    adminToken: adminTokenFrom(env, root),
  },
  (text) => process.stdout.write(text),
).then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`✘ bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
