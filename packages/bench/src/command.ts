import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { adminTokenFrom, runBench, runMixBench } from './index.js';

/** `reach bench` / `pnpm bench`: parses the options and runs the benchmark against the local stack. */
export async function benchCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      agents: { type: 'string' },
      producers: { type: 'string', default: '2' },
      rate: { type: 'string', default: '1000' },
      duration: { type: 'string' },
      warmup: { type: 'string', default: '3' },
      payload: { type: 'string', default: '256' },
      json: { type: 'boolean', default: false },
      // --mix: priority lanes under a backlog (SPEC R-D9)
      mix: { type: 'boolean', default: false },
      concurrency: { type: 'string', default: '2' },
      'handler-ms': { type: 'string', default: '20' },
      'high-rate': { type: 'string', default: '20' },
      'flood-rate': { type: 'string' },
      idle: { type: 'string', default: '5' },
      drain: { type: 'string', default: '60' },
    },
  });
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  const host = !env.REACH_HTTP_HOST || env.REACH_HTTP_HOST === '0.0.0.0' ? '127.0.0.1' : env.REACH_HTTP_HOST;
  const endpoints = {
    brokers: (env.REACH_KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
    registryUrl: `http://${host}:${env.REACH_REGISTRY_PORT ?? 7411}`,
    ingressUrl: `http://${host}:${env.REACH_INGRESS_PORT ?? 7410}`,
    dispatcherUrl: `http://${host}:${env.REACH_DISPATCHER_PORT ?? 7412}`,
    wsUrl: `ws://${host}:${env.REACH_DISPATCHER_PORT ?? 7412}/v1/connect`,
    schemaRegistryUrl: env.REACH_SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081',
    adminToken: adminTokenFrom(env, root),
  };
  if (values.mix) {
    const agents = Number(values.agents ?? 2);
    const concurrency = Number(values.concurrency);
    const handlerMs = Number(values['handler-ms']);
    // 1.5 × what the agents can handle, unless told: a backlog must form in the dispatcher (and
    // not upstream: the flood stays well within what ingress and router sustain).
    const floodRate = Number(values['flood-rate'] ?? Math.round(((agents * concurrency * 1000) / handlerMs) * 1.5));
    await runMixBench(
      {
        ...endpoints,
        agents,
        concurrency,
        handlerMs,
        highRate: Number(values['high-rate']),
        floodRate,
        idleS: Number(values.idle),
        durationS: Number(values.duration ?? 10),
        drainS: Number(values.drain),
        payloadBytes: Number(values.payload),
        json: values.json,
      },
      (text) => process.stdout.write(text),
    );
    return 0;
  }
  await runBench(
    {
      agents: Number(values.agents ?? 10),
      producers: Number(values.producers),
      rate: Number(values.rate),
      durationS: Number(values.duration ?? 20),
      warmupS: Number(values.warmup),
      payloadBytes: Number(values.payload),
      json: values.json,
      ...endpoints,
    },
    (text) => process.stdout.write(text),
  );
  return 0;
}
