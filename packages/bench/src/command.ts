import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { adminTokenFrom, runBench } from './index.js';

/** `reach bench` / `pnpm bench`: parses the options and runs the benchmark against the local stack. */
export async function benchCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { values } = parseArgs({
    args: argv,
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
  const host = !env.REACH_HTTP_HOST || env.REACH_HTTP_HOST === '0.0.0.0' ? '127.0.0.1' : env.REACH_HTTP_HOST;
  await runBench(
    {
      agents: Number(values.agents),
      producers: Number(values.producers),
      rate: Number(values.rate),
      durationS: Number(values.duration),
      warmupS: Number(values.warmup),
      payloadBytes: Number(values.payload),
      json: values.json,
      brokers: (env.REACH_KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
      registryUrl: `http://${host}:${env.REACH_REGISTRY_PORT ?? 7411}`,
      wsUrl: `ws://${host}:${env.REACH_DISPATCHER_PORT ?? 7412}/v1/connect`,
      schemaRegistryUrl: env.REACH_SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081',
      adminToken: adminTokenFrom(env, root),
    },
    (text) => process.stdout.write(text),
  );
  return 0;
}
