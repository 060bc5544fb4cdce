import net from 'node:net';
import tls from 'node:tls';
import { Kafka, Partitioners, logLevel, type ISocketFactory, type KafkaConfig, type LogEntry, type Producer } from 'kafkajs';
import type { Logger } from '@reach/core';
import { kafkajsSecurity, type KafkaSecurity } from './security.js';
import { countRequests } from './request-count.js';

/**
 * The one place Agent-Reach creates kafkajs clients. kafkajs is no longer actively maintained:
 * keeping every call to it inside this package means it can be swapped without touching services.
 */
export interface KafkaClientOptions {
  brokers: readonly string[];
  clientId: string;
  logger: Logger;
  /** Connection/request timeouts (ms); defaults suit a local broker. */
  connectionTimeoutMs?: number;
  requestTimeoutMs?: number;
  /** SASL and TLS to the brokers (REACH_KAFKA_*; see security.ts). Unset: plaintext. */
  security?: KafkaSecurity;
  /** How often a failed connection or request is tried again (30, about half a minute, by default). */
  retries?: number;
}

function logCreator(logger: Logger) {
  return () =>
    ({ level, log }: LogEntry) => {
      const { message, ...rest } = log;
      const obj = { kafka: rest };
      if (level === logLevel.ERROR) logger.error(obj, `kafka: ${message}`);
      else if (level === logLevel.WARN) logger.warn(obj, `kafka: ${message}`);
      else if (level === logLevel.INFO) logger.debug(obj, `kafka: ${message}`);
      else logger.trace(obj, `kafka: ${message}`);
    };
}

/**
 * kafkajs's own socket factory leaves Nagle's algorithm on: small produce and fetch requests
 * then wait for the peer's delayed ACK, adding ~40 ms to every hop (measured: raw loop p50
 * 44 ms → a few ms with this). Same as kafkajs's factory otherwise: TLS when asked, keep-alive.
 */
const socketFactory: ISocketFactory = ({ host, port, ssl, onConnect }) => {
  const socket = ssl ? tls.connect({ host, port, ...(net.isIP(host) ? {} : { servername: host }), ...ssl }, onConnect) : net.connect({ host, port }, onConnect);
  socket.setNoDelay(true);
  socket.setKeepAlive(true, 60_000);
  return socket;
};

export function createKafka(opts: KafkaClientOptions): Kafka {
  const config: KafkaConfig = {
    clientId: opts.clientId,
    brokers: [...opts.brokers],
    connectionTimeout: opts.connectionTimeoutMs ?? 3000,
    requestTimeout: opts.requestTimeoutMs ?? 30000,
    logLevel: logLevel.INFO,
    socketFactory,
    ...kafkajsSecurity(opts.security),
    logCreator: logCreator(opts.logger.child({ component: 'kafkajs' })),
    // Reconnect forever with capped backoff: a broker restart must never kill a service.
    // At most a second apart, so a restarted broker is found again within a second.
    retry: { initialRetryTime: 100, maxRetryTime: 1_000, retries: opts.retries ?? 30 },
  };
  return countRequests(new Kafka(config));
}

/**
 * A long-lived producer: acks=-1 on every send (set per call by produceAll), idempotent with one
 * request in flight so retries cannot reorder or duplicate within a session. A send that fails
 * (after ~1 minute of retries) or times out is "maybe written": the stage retries its records
 * and idempotency keys absorb the duplicate downstream.
 * The default partitioner is murmur2, the same as the Java client, so keys land on the same
 * partitions whoever produces them.
 */
export async function createProducer(kafka: Kafka): Promise<Producer> {
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    // ~1 minute of retries, then the send fails and its stage retries the records. Unbounded
    // retries (kafkajs's advice for idempotence) wedged a producer for good once its sequence
    // numbers were refused; produceAll resets the producer after a failure instead.
    retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 3000 },
    createPartitioner: Partitioners.DefaultPartitioner,
  });
  await producer.connect();
  return producer;
}

export type { Kafka, Producer, Admin, Consumer } from 'kafkajs';
