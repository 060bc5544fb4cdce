import { Agent as HttpsAgent } from 'node:https';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';

/**
 * How to reach a schema registry that wants basic auth and/or TLS with a private CA: the user
 * and password come from the URL's userinfo (`https://user:pass@registry:8081`, like the
 * PostgreSQL and Redis URLs), the CA from REACH_CA_FILE. The password is taken out of the URL
 * the client sees, so it never shows up in the client's errors.
 */
export interface RegistryConnection {
  /** The URL without userinfo. */
  readonly host: string;
  readonly auth?: { username: string; password: string };
  /** `Authorization` header value for plain fetch calls (the deploy step's compatibility check). */
  readonly authorization?: string;
  readonly agent?: HttpsAgent;
}

export interface RegistryTls {
  /** PEM of extra CAs to trust (REACH_CA_FILE); unset: the system store. */
  ca?: string;
}

export function registryConnection(url: string, tls: RegistryTls = {}): RegistryConnection {
  const u = new URL(url);
  const username = decodeURIComponent(u.username);
  const password = decodeURIComponent(u.password);
  u.username = '';
  u.password = '';
  const host = u.toString().replace(/\/$/, '');
  const out: { -readonly [K in keyof RegistryConnection]: RegistryConnection[K] } = { host };
  if (username || password) {
    out.auth = { username, password };
    out.authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  }
  if (u.protocol === 'https:' && tls.ca) out.agent = new HttpsAgent({ ca: tls.ca, keepAlive: true });
  return out;
}

/** The registry client of a connection, with the retries every caller uses. */
export function schemaRegistryClient(conn: RegistryConnection): SchemaRegistry {
  return new SchemaRegistry({
    host: conn.host,
    retry: { retries: 2 },
    ...(conn.auth ? { auth: conn.auth } : {}),
    // The registry client's type says http.Agent; an https.Agent is what it needs for https.
    ...(conn.agent ? { agent: conn.agent as never } : {}),
  });
}
