import { describe, expect, it } from 'vitest';
import { ConfigError, OPTIONS, checkUnknownEnv, describeOptions, loadConfig } from '@reach/core';

function configError(fn: () => unknown): ConfigError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ConfigError);
  return caught as ConfigError;
}

describe('loadConfig', () => {
  it('returns the documented defaults for an empty environment', () => {
    const cfg = loadConfig(
      [
        'kafkaBrokers',
        'schemaRegistryUrl',
        'databaseUrl',
        'redisUrl',
        'logLevel',
        'httpHost',
        'maxPayloadBytes',
        'topicPartitions',
        'topicReplicationFactor',
        'ingressPort',
        'registryPort',
        'dispatcherPort',
        'trackerPort',
        'deadLetterPort',
        'routerPort',
        'retrySchedulerPort',
        'devSchemaRegistryPort',
        'adminToken',
        'shutdownTimeoutMs',
      ],
      {},
    );
    expect(cfg).toEqual({
      kafkaBrokers: ['127.0.0.1:9092'],
      schemaRegistryUrl: 'http://127.0.0.1:8081',
      databaseUrl: 'postgres://postgres@127.0.0.1:5432/reach',
      redisUrl: 'redis://127.0.0.1:6379/0',
      logLevel: 'info',
      httpHost: '127.0.0.1',
      maxPayloadBytes: 262144,
      topicPartitions: 6,
      topicReplicationFactor: 1,
      ingressPort: 7410,
      registryPort: 7411,
      dispatcherPort: 7412,
      trackerPort: 7413,
      deadLetterPort: 7414,
      routerPort: 7415,
      retrySchedulerPort: 7416,
      devSchemaRegistryPort: 8081,
      adminToken: undefined,
      shutdownTimeoutMs: 15000,
    });
  });

  it('parses set variables, treats empty as unset, and returns only the asked keys', () => {
    const cfg = loadConfig(['kafkaBrokers', 'maxPayloadBytes', 'logLevel', 'ingressPort'], {
      REACH_KAFKA_BROKERS: ' k1:9092 , k2:9092,',
      REACH_MAX_PAYLOAD_BYTES: '4096',
      REACH_LOG_LEVEL: '',
      REACH_INGRESS_PORT: '0',
      PATH: '/usr/bin', // not ours: ignored
    });
    expect(cfg).toEqual({ kafkaBrokers: ['k1:9092', 'k2:9092'], maxPayloadBytes: 4096, logLevel: 'info', ingressPort: 0 });
  });

  it('names the variable when an int is invalid or out of range', () => {
    const notInt = configError(() => loadConfig(['maxPayloadBytes'], { REACH_MAX_PAYLOAD_BYTES: '256kb' }));
    expect(notInt.message).toContain('REACH_MAX_PAYLOAD_BYTES');
    expect(notInt.message).toContain('"256kb"');
    expect(notInt.message).toContain('expected an integer');
    const range = configError(() => loadConfig(['ingressPort'], { REACH_INGRESS_PORT: '70000' }));
    expect(range.message).toContain('REACH_INGRESS_PORT');
    expect(range.message).toContain('[0, 65535]');
    expect(configError(() => loadConfig(['topicPartitions'], { REACH_TOPIC_PARTITIONS: '1.5' })).message).toContain('REACH_TOPIC_PARTITIONS');
  });

  it('names every bad variable at once, and validates enums, URLs and secrets', () => {
    const err = configError(() =>
      loadConfig(['logLevel', 'redisUrl', 'databaseUrl', 'adminToken'], {
        REACH_LOG_LEVEL: 'verbose',
        REACH_REDIS_URL: 'http://127.0.0.1:6379',
        REACH_DATABASE_URL: 'not a url',
        REACH_ADMIN_TOKEN: 'short-secret',
      }),
    );
    for (const name of ['REACH_LOG_LEVEL', 'REACH_REDIS_URL', 'REACH_DATABASE_URL', 'REACH_ADMIN_TOKEN']) expect(err.message).toContain(name);
    expect(err.message).not.toContain('short-secret'); // secrets never echoed
  });

  it('rejects an unknown REACH_ variable with a did-you-mean hint', () => {
    const err = configError(() => loadConfig(['kafkaBrokers'], { REACH_KAFKA_BROKER: '127.0.0.1:9092' }));
    expect(err.message).toContain('unknown configuration variable');
    expect(err.message).toContain('REACH_KAFKA_BROKER (did you mean REACH_KAFKA_BROKERS?)');
    // Even when the key is not asked for by this service.
    const other = configError(() => loadConfig(['kafkaBrokers'], { REACH_MAX_PAYLOAD_BYTE: '1' }));
    expect(other.message).toContain('did you mean REACH_MAX_PAYLOAD_BYTES?');
    // No hint when nothing is close.
    const far = configError(() => checkUnknownEnv({ REACH_SOMETHING_COMPLETELY_DIFFERENT: 'x' }));
    expect(far.message).toContain('REACH_SOMETHING_COMPLETELY_DIFFERENT');
    expect(far.message).not.toContain('did you mean');
    // Allowed non-option names and foreign variables pass.
    expect(() => checkUnknownEnv({ REACH_HOME: '/tmp/x', HOME: '/root', REACHABLE: '1' })).not.toThrow();
  });

  it('describes every option for the generated reference, one row each', () => {
    const rows = describeOptions();
    expect(rows.map((r) => r.env)).toEqual(Object.values(OPTIONS).map((o) => o.env));
    expect(new Set(rows.map((r) => r.env)).size).toBe(rows.length);
    for (const r of rows) expect(r.env).toMatch(/^REACH_[A-Z0-9_]+$/);
    expect(rows.find((r) => r.env === 'REACH_ADMIN_TOKEN')!.default).toBe('(unset)');
    expect(rows.find((r) => r.env === 'REACH_KAFKA_BROKERS')!.default).toBe('127.0.0.1:9092');
    expect(rows.find((r) => r.env === 'REACH_RETENTION_MESSAGES')!.default).toBe('7d');
    expect(rows.find((r) => r.env === 'REACH_RETENTION_AUDIT')!.default).toBe('400d');
  });

  it('reads durations in seconds, minutes, hours or days', () => {
    const load = (v: string) => loadConfig(['retentionMessages'], { REACH_RETENTION_MESSAGES: v }).retentionMessages;
    expect(loadConfig(['retentionMessages'], {}).retentionMessages).toBe(7 * 86400);
    expect(load('30s')).toBe(30);
    expect(load('45')).toBe(45);
    expect(load('10m')).toBe(600);
    expect(load('12h')).toBe(43200);
    expect(load('7d')).toBe(604800);
    expect(configError(() => load('7 days')).message).toContain('REACH_RETENTION_MESSAGES="7 days" is invalid: expected a duration');
    expect(configError(() => loadConfig(['partitionInterval'], { REACH_PARTITION_INTERVAL: '1s' })).message).toContain('in [5s, 31d]');
  });
});
