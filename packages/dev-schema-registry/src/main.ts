import { hostname } from 'node:os';
import pino from 'pino';
import { ConfigError, loadConfig, processEnv, type Logger } from '@reach/core';
import { createKafka, kafkaSecurityFromEnv, type KafkaSecurity } from '@reach/kafka';
import { startDevSchemaRegistry } from './index.js';

/**
 * `node dist/main.js`: the development schema registry as a process, configured from REACH_*
 * variables (REACH_KAFKA_BROKERS, REACH_DEV_SCHEMA_REGISTRY_PORT, REACH_HTTP_HOST,
 * REACH_LOG_LEVEL, and the REACH_KAFKA_SASL_* / REACH_KAFKA_TLS options of a secured Kafka). GET /healthz answers 200 once the state is replayed and the port is open.
 * SIGTERM/SIGINT close it cleanly.
 */
async function main(): Promise<void> {
  let config;
  let security: KafkaSecurity;
  try {
    const env = processEnv();
    config = loadConfig(['kafkaBrokers', 'devSchemaRegistryPort', 'httpHost', 'logLevel'], env);
    security = kafkaSecurityFromEnv(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`dev-schema-registry: ${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
  const logger = pino({
    level: config.logLevel,
    base: { service: 'dev-schema-registry', instance: `${hostname()}-${process.pid}` },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    serializers: { err: pino.stdSerializers.err },
  }) as unknown as Logger;

  const kafka = createKafka({ brokers: config.kafkaBrokers, clientId: 'reach-dev-schema-registry', logger, security });
  const registry = await startDevSchemaRegistry({ kafka, host: config.httpHost, port: config.devSchemaRegistryPort, logger }).catch((err: unknown) => {
    logger.fatal({ err }, 'development schema registry failed to start');
    process.exit(1);
  });

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    // A stuck broker must not keep the process alive forever.
    setTimeout(() => process.exit(1), 10_000).unref();
    registry.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

void main();
