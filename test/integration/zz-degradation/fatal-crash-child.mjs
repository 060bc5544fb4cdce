// Child process of degradation.test.ts: runs a real `runStage` loop on a test topic whose handler
// always fails retryably, with kafkajs told to retry once and then never restart the consumer.
// kafkajs then crashes the consumer for good; onFatal must end the process with code 70 (the
// supervisor restarts a process that exits, never one that lives on with a dead consumer).
// argv: <brokers> <topic> <groupId>
import process from 'node:process';
import { ReachError, silentLogger } from '@reach/core';
import { createKafka, createProducer, runStage } from '@reach/kafka';

const [brokers, topic, groupId] = process.argv.slice(2);
const kafka = createKafka({ brokers: brokers.split(','), clientId: `fatal-crash-${groupId}`, logger: silentLogger });
const producer = await createProducer(kafka);
await runStage({
  kafka,
  producer,
  groupId,
  topics: [topic],
  logger: silentLogger,
  handle: async () => {
    process.stdout.write('handled\n');
    throw new ReachError('DEPENDENCY_UNAVAILABLE', 'the test dependency is always down');
  },
  onPoison: () => [],
  onFatal: (error) => {
    process.stdout.write(`fatal: ${error.name}: ${error.message}\n`);
    process.exit(70);
  },
  consumerRetry: { retries: 1, initialRetryTime: 100, maxRetryTime: 200, restartOnFailure: async () => false },
});
process.stdout.write('running\n');
