import { readFileSync } from 'node:fs';
import type { SASLOptions } from 'kafkajs';
import { ConfigError, loadConfig } from '@reach/core';

/**
 * How a client authenticates to the brokers and protects the connection: SASL (PLAIN or
 * SCRAM-SHA-256/512) and TLS, from the REACH_KAFKA_* options. Kept here so kafkajs's option
 * shapes never leak into services.
 */
export type SaslMechanism = 'plain' | 'scram-sha-256' | 'scram-sha-512';

export interface KafkaSecurity {
  sasl?: { mechanism: SaslMechanism; username: string; password: string };
  /** TLS to the brokers; `ca` (PEM) replaces the system store when given. */
  tls?: { ca?: string };
}

export interface KafkaSecurityConfig {
  kafkaSaslMechanism: '' | SaslMechanism;
  kafkaSaslUsername: string;
  kafkaSaslPassword: string | undefined;
  kafkaTls: boolean;
  kafkaCaFile: string;
  caFile: string;
}

/** The config options a Kafka client's security is made of (every process with a Kafka client reads them). */
export const KAFKA_SECURITY_OPTIONS = ['kafkaSaslMechanism', 'kafkaSaslUsername', 'kafkaSaslPassword', 'kafkaTls', 'kafkaCaFile', 'caFile'] as const;

/** The security of the REACH_KAFKA_* variables of `env`; ConfigError (exit 78 material) naming the variable. */
export function kafkaSecurityFromEnv(env: Readonly<Record<string, string | undefined>>): KafkaSecurity {
  try {
    return kafkaSecurityFromConfig(loadConfig(KAFKA_SECURITY_OPTIONS, env));
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError((err as Error).message);
  }
}

/** The security options of a config; throws an Error naming the variable when they do not fit together. */
export function kafkaSecurityFromConfig(c: KafkaSecurityConfig, readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): KafkaSecurity {
  const out: KafkaSecurity = {};
  if (c.kafkaSaslMechanism) {
    if (!c.kafkaSaslUsername || !c.kafkaSaslPassword)
      throw new Error(`REACH_KAFKA_SASL_MECHANISM=${c.kafkaSaslMechanism} needs REACH_KAFKA_SASL_USERNAME and REACH_KAFKA_SASL_PASSWORD`);
    out.sasl = { mechanism: c.kafkaSaslMechanism, username: c.kafkaSaslUsername, password: c.kafkaSaslPassword };
  } else if (c.kafkaSaslUsername || c.kafkaSaslPassword) {
    throw new Error('REACH_KAFKA_SASL_USERNAME / REACH_KAFKA_SASL_PASSWORD are set but REACH_KAFKA_SASL_MECHANISM is not');
  }
  const caFile = c.kafkaCaFile || c.caFile;
  if (c.kafkaTls) {
    let ca: string | undefined;
    if (caFile) {
      try {
        ca = readFile(caFile);
      } catch (err) {
        throw new Error(`${c.kafkaCaFile ? 'REACH_KAFKA_CA_FILE' : 'REACH_CA_FILE'}=${caFile} cannot be read: ${(err as Error).message}`);
      }
    }
    out.tls = ca === undefined ? {} : { ca };
  } else if (c.kafkaCaFile) {
    throw new Error('REACH_KAFKA_CA_FILE is set but REACH_KAFKA_TLS is not true');
  }
  return out;
}

/** The kafkajs `ssl` / `sasl` settings of a KafkaSecurity. */
export function kafkajsSecurity(s: KafkaSecurity | undefined): { ssl?: { ca?: string[] } | true; sasl?: SASLOptions } {
  if (!s) return {};
  const out: { ssl?: { ca?: string[] } | true; sasl?: SASLOptions } = {};
  if (s.tls) out.ssl = s.tls.ca ? { ca: [s.tls.ca] } : true;
  if (s.sasl) out.sasl = { mechanism: s.sasl.mechanism, username: s.sasl.username, password: s.sasl.password } as SASLOptions;
  return out;
}
