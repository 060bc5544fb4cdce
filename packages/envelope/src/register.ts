import { SchemaType } from '@kafkajs/confluent-schema-registry';
import { registryConnection, schemaRegistryClient, type RegistryConnection, type RegistryTls } from './registry-client.js';
import { ReachError, type Logger } from '@reach/core';
import { schemaDef } from './schemas.js';

export interface RegisterResult {
  subject: string;
  schema: string;
  id: number;
}

async function checkCompatible(conn: RegistryConnection, subject: string, canonical: string): Promise<string[] | undefined> {
  // Plain fetch (the registry client has no verbose compatibility call): a private CA of an
  // https registry must then be in NODE_EXTRA_CA_CERTS for the deploy step (docs/transport-security.md).
  const res = await fetch(`${conn.host}/compatibility/subjects/${encodeURIComponent(subject)}/versions/latest?verbose=true`, {
    method: 'POST',
    headers: { 'content-type': 'application/vnd.schemaregistry.v1+json', ...(conn.authorization ? { authorization: conn.authorization } : {}) },
    body: JSON.stringify({ schema: canonical }),
  });
  if (res.status === 404) return undefined; // a new subject: nothing to be compatible with
  const body = (await res.json()) as { is_compatible?: boolean; messages?: string[]; message?: string };
  if (!res.ok) throw new Error(`compatibility check of ${subject} failed: HTTP ${res.status} ${body.message ?? ''}`);
  return body.is_compatible ? [] : (body.messages ?? ['incompatible with the latest version']);
}

/**
 * The deploy step (run by `reach up` / `reach setup`, never by services at run time): registers
 * every schema of schemas/ under its subjects after an explicit compatibility check against the
 * latest registered version, failing loudly with the registry's reasons when a change would
 * break readers. Registering an already-registered schema is a no-op that returns its id.
 */
export async function registerSchemas(
  url: string,
  bindings: ReadonlyArray<{ subject: string; schema: string }>,
  logger: Logger,
  tls: RegistryTls = {},
): Promise<RegisterResult[]> {
  const conn = registryConnection(url, tls);
  const registry = schemaRegistryClient(conn);
  const out: RegisterResult[] = [];
  for (const { subject, schema } of bindings) {
    const def = schemaDef(schema);
    const problems = await checkCompatible(conn, subject, def.canonical);
    if (problems && problems.length > 0) {
      throw new ReachError(
        'UNKNOWN_SCHEMA',
        `schemas/${schema}.avsc is not BACKWARD compatible with the latest version of ${subject}:\n  ${problems.join('\n  ')}\nA breaking change needs a new major (reach.v2.*, new topics).`,
        { retryable: false },
      );
    }
    const { id } = await registry.register({ type: SchemaType.AVRO, schema: def.canonical }, { subject });
    out.push({ subject, schema, id });
    logger.debug({ subject, schema, id }, 'schema registered');
  }
  return out;
}
