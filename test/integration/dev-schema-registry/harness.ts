import { silentLogger } from '@reach/core';
import { createKafka, type Kafka } from '@reach/kafka';
import { startDevSchemaRegistry } from '../../../packages/dev-schema-registry/src/index.js';
import { stack, uniq } from '../../helpers/env.js';

/**
 * Shared set-up of the development registry integration tests: one kafkajs client against the
 * running broker, a unique state topic per test file, registries on port 0, and cleanup that
 * closes every instance and deletes the topic.
 */
export interface Harness {
  readonly kafka: Kafka;
  readonly topic: string;
  start(): Promise<Awaited<ReturnType<typeof startDevSchemaRegistry>>>;
  cleanup(): Promise<void>;
}

export function harness(): Harness {
  const kafka = createKafka({ brokers: stack.brokers, clientId: uniq('dev-schema-registry-test'), logger: silentLogger });
  const topic = uniq('_schemas_test');
  const running: Array<{ close(): Promise<void> }> = [];
  return {
    kafka,
    topic,
    async start() {
      const registry = await startDevSchemaRegistry({ kafka, host: '127.0.0.1', port: 0, logger: silentLogger, topic });
      running.push(registry);
      return registry;
    },
    async cleanup() {
      await Promise.all(running.map((r) => r.close()));
      const admin = kafka.admin();
      await admin.connect();
      try {
        await admin.deleteTopics({ topics: [topic] });
      } finally {
        await admin.disconnect();
      }
    },
  };
}

/** Raw HTTP against a registry: status, content type and parsed JSON body. */
export async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/vnd.schemaregistry.v1+json',
): Promise<{ status: number; contentType: string | null; text: string; json: unknown }> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': contentType },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, contentType: res.headers.get('content-type'), text, json };
}

type Field = { name: string; type: unknown; default?: unknown };
/** An Avro record schema as JSON text. */
export const record = (fields: Field[], name = 'User') => JSON.stringify({ type: 'record', name, namespace: 'reach.test', fields });
