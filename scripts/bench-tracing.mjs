#!/usr/bin/env node
// What tracing costs a stage per record (issue #6: "no cost when off"), measured on runStage's
// per-record steps: before tracing (try/catch around the handler) against now (recordSpan →
// handler → withTraceparent → end), off (the default) and on (exporting over OTLP/HTTP to a
// local sink) for scale. Plain Node on the built packages; rounds alternate between variants so
// drift hits all alike. Prints a table; run with `node scripts/bench-tracing.mjs` after `pnpm build`.
import { createServer } from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(new URL('../packages/kafka/package.json', import.meta.url));
const sink = createServer((req, res) => req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}')));
await new Promise((resolve) => sink.listen(0, '127.0.0.1', resolve));
process.env.BENCH_OTLP_ENDPOINT = `http://127.0.0.1:${sink.address().port}/v1/traces`;
const { recordSpan } = await import(require.resolve('@reach/kafka'));
const { createTracer, NOOP_TRACER, withTraceparent } = await import(require.resolve('@reach/tracing'));

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const record = {
  topic: 'reach.pending.v1',
  partition: 3,
  offset: '12345',
  timestamp: String(Date.now()),
  key: null,
  value: null,
  headers: { traceparent: TRACEPARENT },
};
const outputs = [
  { topic: 'reach.routed.v1', key: 'agent', value: null, headers: { traceparent: TRACEPARENT } },
  { topic: 'reach.status.v1', key: 'msg', value: null },
];
const log = {};
const handle = async () => outputs;

async function before() {
  try {
    return { kind: 'ok', out: await handle(record, { log }) };
  } catch {
    return { kind: 'failed' };
  }
}

async function now(tracer, spanName) {
  const span = recordSpan(tracer, spanName, record);
  try {
    return { kind: 'ok', out: withTraceparent(await handle(record, { log, span }), record.headers.traceparent, span.traceparent) };
  } catch (err) {
    span.fail({ code: 5001, message: String(err) });
    return { kind: 'failed' };
  } finally {
    span.end();
  }
}

async function loop(step, n) {
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await step();
  return Number(process.hrtime.bigint() - t) / n;
}

const on = await createTracer({ endpoint: process.env.BENCH_OTLP_ENDPOINT, service: 'bench', instanceId: 'bench-1' });
const checks = {
  off_named: (await now(NOOP_TRACER, 'route')).out === outputs,
  off_unnamed: (await now(NOOP_TRACER, undefined)).out === outputs,
  on_repointed: (await now(on, 'route')).out[0].headers.traceparent !== TRACEPARENT,
};
const N = 200000;
const variants = [
  ['before tracing (try/catch around the handler)', before, N],
  ['tracing off, stage with a span name', () => now(NOOP_TRACER, 'route'), N],
  ['tracing off, stage without a span name', () => now(NOOP_TRACER, undefined), N],
  ['tracing on (OTLP/HTTP to a local receiver)', () => now(on, 'route'), 20000],
];
for (const [, step, n] of variants) await loop(step, n);
const samples = variants.map(() => []);
for (let r = 0; r < 9; r++) for (const [i, [, step, n]] of variants.entries()) samples[i].push(await loop(step, n));
const ns = samples.map((s) => s.sort((a, b) => a - b)[4]);
await on.shutdown();
if (!Object.values(checks).every(Boolean)) throw new Error(`tracing variants misbehave: ${JSON.stringify(checks)}`);
const base = ns[0];
console.log('per-record cost of runStage around a trivial handler (median of 9 interleaved rounds)');
for (const [i, [what]] of variants.entries())
  console.log(`${what.padEnd(48)} ${ns[i].toFixed(0).padStart(6)} ns/record  ${ns[i] - base >= 0 ? '+' : ''}${(ns[i] - base).toFixed(0)} ns`);
sink.close();
