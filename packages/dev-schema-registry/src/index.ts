import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '@reach/core';
import type { Kafka } from '@reach/kafka';
import { requestListener } from './http.js';
import { ensureSchemasTopic, replay, SchemaLogWriter } from './log.js';
import { Registry } from './registry.js';
import { RegistryState } from './state.js';

/**
 * The development schema registry (docs/design.md §7): a Confluent-compatible REST subset for AVRO,
 * with its state in a compacted Kafka topic. Production uses a real registry.
 */
export const DEFAULT_SCHEMAS_TOPIC = '_schemas';

export interface DevSchemaRegistryOptions {
  kafka: Kafka;
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  logger: Logger;
  /** The compacted state topic; `_schemas` by default. */
  topic?: string;
}

export interface RunningDevSchemaRegistry {
  readonly url: string;
  readonly port: number;
  /** Stops accepting requests, lets queued writes finish, disconnects from Kafka. */
  close(): Promise<void>;
}

/** Creates the topic if needed, replays it into memory, then serves HTTP. */
export async function startDevSchemaRegistry(opts: DevSchemaRegistryOptions): Promise<RunningDevSchemaRegistry> {
  const topic = opts.topic ?? DEFAULT_SCHEMAS_TOPIC;
  const log = opts.logger.child({ component: 'dev-schema-registry', topic });
  await ensureSchemasTopic(opts.kafka, topic, log);

  const state = new RegistryState();
  await replay(opts.kafka, topic, log, (record) => {
    if (!state.apply(record)) log.debug({ key: record.key }, 'ignored a record of unknown kind');
  });

  const writer = await SchemaLogWriter.open(opts.kafka, topic);
  const registry = new Registry(state, writer, log);
  const server = createServer(requestListener(registry, log));
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port, opts.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await writer.close();
    throw err;
  }
  const { port } = server.address() as AddressInfo;
  const url = `http://${urlHost(opts.host)}:${port}`;
  log.info({ url, subjects: state.subjectNames().length }, 'development schema registry listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    close: () =>
      (closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        await closed;
        await registry.drain();
        await writer.close();
        log.info('development schema registry stopped');
      })()),
  };
}

/** A host clients can dial: wildcard binds are reached over loopback; IPv6 goes in brackets. */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

export { checkCompatibility, canonicalSchema, parseAvro, isCompatibilityLevel, COMPATIBILITY_LEVELS, InvalidSchemaError } from './compatibility.js';
export type { CompatibilityLevel, CompatibilityResult, PreviousSchema } from './compatibility.js';
export { RegistryState, schemaRecord, configRecord } from './state.js';
export type { SchemaEntry, LogRecord } from './state.js';
export { Registry, RegistryError, parseVersion } from './registry.js';
export type { LogAppender, SchemaRequest } from './registry.js';
