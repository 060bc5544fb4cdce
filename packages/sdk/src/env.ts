import { tlsFromFiles, type ClientTls } from './tls.js';

/**
 * Where an agent finds Agent-Reach, from its environment. The SDK's variables are named
 * `AGENT_REACH_*` (SPEC R-G5's namespace), never `REACH_*`: those are the services' options, and
 * a service refuses to start with a `REACH_*` name it does not know. Defaults are the local
 * stack of `reach up` (DESIGN §3 ports).
 *
 *   AGENT_REACH_REGISTRY_URL    http://127.0.0.1:7411
 *   AGENT_REACH_DISPATCHER_URL  ws://127.0.0.1:7412/v1/connect
 *   AGENT_REACH_INGRESS_URL     http://127.0.0.1:7410
 *   AGENT_REACH_TOKEN           enrollment (or admin) token for registration, when needed
 *   AGENT_REACH_CA_FILE         PEM of a private CA for https/wss URLs (docs/transport-security.md)
 */
export interface ConnectionSettings {
  registryUrl: string;
  dispatcherUrl: string;
  ingressUrl: string;
  token?: string;
  tls?: ClientTls;
}

export function connectionFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): ConnectionSettings {
  const out: ConnectionSettings = {
    registryUrl: env.AGENT_REACH_REGISTRY_URL || 'http://127.0.0.1:7411',
    dispatcherUrl: env.AGENT_REACH_DISPATCHER_URL || 'ws://127.0.0.1:7412/v1/connect',
    ingressUrl: env.AGENT_REACH_INGRESS_URL || 'http://127.0.0.1:7410',
  };
  if (env.AGENT_REACH_TOKEN) out.token = env.AGENT_REACH_TOKEN;
  const tls = tlsFromFiles({ caFile: env.AGENT_REACH_CA_FILE }, { ca: 'AGENT_REACH_CA_FILE', cert: 'AGENT_REACH_CLIENT_CERT', key: 'AGENT_REACH_CLIENT_KEY' });
  if (tls) out.tls = tls;
  return out;
}
