import { readFileSync } from 'node:fs';
import { loadConfig } from '@reach/core';
import { kafkaSecurityFromEnv } from '@reach/kafka';
import { done } from '../output.js';
import { setupStack } from '../local/setup.js';
import { createLogger } from '../log.js';

/** `reach setup`: the deploy step alone (migrations, topics, schemas) against configured servers. */
export async function setup(): Promise<number> {
  const cfg = loadConfig(['kafkaBrokers', 'schemaRegistryUrl', 'databaseUrl', 'topicPartitions', 'topicReplicationFactor', 'logLevel', 'caFile'], process.env);
  try {
    const kafkaSecurity = kafkaSecurityFromEnv(process.env);
    const registryCa = cfg.caFile ? readFileSync(cfg.caFile, 'utf8') : undefined;
    await setupStack({ ...cfg, kafkaSecurity, ...(registryCa ? { registryCa } : {}) }, createLogger(cfg.logLevel), (msg) => done(msg));
  } catch (err) {
    process.stderr.write(`✘ reach setup failed: ${(err as Error).message}\n`);
    return 1;
  }
  return 0;
}
