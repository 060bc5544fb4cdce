import { describe, expect, it } from 'vitest';
import { kafkajsSecurity, kafkaSecurityFromConfig, type KafkaSecurityConfig } from '@reach/kafka';

const none: KafkaSecurityConfig = { kafkaSaslMechanism: '', kafkaSaslUsername: '', kafkaSaslPassword: undefined, kafkaTls: false, kafkaCaFile: '', caFile: '' };
const files: Record<string, string> = { '/ca/kafka.pem': 'KAFKA-CA', '/ca/all.pem': 'ALL-CA' };
const read = (p: string) => {
  const v = files[p];
  if (v === undefined) throw new Error('ENOENT');
  return v;
};

describe('Kafka SASL/TLS from REACH_KAFKA_*', () => {
  it('nothing set: plaintext, no SASL (the local stack)', () => {
    expect(kafkaSecurityFromConfig(none, read)).toEqual({});
    expect(kafkajsSecurity(kafkaSecurityFromConfig(none, read))).toEqual({});
  });

  it('SCRAM over TLS with a private CA becomes kafkajs ssl + sasl', () => {
    const s = kafkaSecurityFromConfig(
      { ...none, kafkaSaslMechanism: 'scram-sha-512', kafkaSaslUsername: 'reach', kafkaSaslPassword: 'pw', kafkaTls: true, kafkaCaFile: '/ca/kafka.pem' },
      read,
    );
    expect(kafkajsSecurity(s)).toEqual({ ssl: { ca: ['KAFKA-CA'] }, sasl: { mechanism: 'scram-sha-512', username: 'reach', password: 'pw' } });
  });

  it('TLS falls back to REACH_CA_FILE, then to the system store', () => {
    expect(kafkajsSecurity(kafkaSecurityFromConfig({ ...none, kafkaTls: true, caFile: '/ca/all.pem' }, read))).toEqual({ ssl: { ca: ['ALL-CA'] } });
    expect(kafkajsSecurity(kafkaSecurityFromConfig({ ...none, kafkaTls: true }, read))).toEqual({ ssl: true });
  });

  it.each([
    [{ kafkaSaslMechanism: 'plain' as const, kafkaSaslUsername: 'u' }, /needs REACH_KAFKA_SASL_USERNAME and REACH_KAFKA_SASL_PASSWORD/],
    [{ kafkaSaslUsername: 'u', kafkaSaslPassword: 'p' }, /REACH_KAFKA_SASL_MECHANISM is not/],
    [{ kafkaCaFile: '/ca/kafka.pem' }, /REACH_KAFKA_TLS is not true/],
    [{ kafkaTls: true, kafkaCaFile: '/nope.pem' }, /REACH_KAFKA_CA_FILE=\/nope.pem cannot be read/],
  ])('refuses a combination that cannot work: %j', (partial, why) => {
    expect(() => kafkaSecurityFromConfig({ ...none, ...partial }, read)).toThrow(why);
  });

  it('never puts the password in an error', () => {
    expect(() => kafkaSecurityFromConfig({ ...none, kafkaSaslMechanism: 'plain', kafkaSaslPassword: 'hunter2-secret' }, read)).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('hunter2') }),
    );
  });
});
