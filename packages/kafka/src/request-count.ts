import type { Kafka } from 'kafkajs';

/**
 * Kafka requests this process sent, by API (Produce, Fetch, OffsetCommit, Heartbeat, ...),
 * counted from kafkajs's instrumentation events of every producer, consumer and admin client
 * made through createKafka. Exported as `reach_<service>_kafka_requests_total{api}`; `pnpm
 * bench` divides them by the messages delivered to say what a message costs in requests, not
 * only in records.
 */
const counts = new Map<string, number>();

export function kafkaRequestCounts(): ReadonlyMap<string, number> {
  return counts;
}

interface Instrumented {
  on(event: string, listener: (e: { payload: { apiName: string } }) => void): unknown;
  events: { REQUEST: string };
}

function count(client: Instrumented): void {
  client.on(client.events.REQUEST, ({ payload }) => counts.set(payload.apiName, (counts.get(payload.apiName) ?? 0) + 1));
}

/** Makes every client `kafka` creates count its requests. */
export function countRequests(kafka: Kafka): Kafka {
  const producer = kafka.producer.bind(kafka);
  const consumer = kafka.consumer.bind(kafka);
  const admin = kafka.admin.bind(kafka);
  kafka.producer = (cfg) => {
    const c = producer(cfg);
    count(c as unknown as Instrumented);
    return c;
  };
  kafka.consumer = (cfg) => {
    const c = consumer(cfg);
    count(c as unknown as Instrumented);
    return c;
  };
  kafka.admin = (cfg) => {
    const c = admin(cfg);
    count(c as unknown as Instrumented);
    return c;
  };
  return kafka;
}
