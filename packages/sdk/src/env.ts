import { modeOf, type ReachMode } from './mode.js';
import { tlsFromFiles, type ClientTls } from './tls.js';

/**
 * Where an agent finds Agent-Reach, from its environment. The SDK's variables are named
 * `AGENT_REACH_*` (R-G5's namespace), never `REACH_*`: those are the services' options, and
 * a service refuses to start with a `REACH_*` name it does not know. Defaults are the local
 * stack of `reach up` (docs/design.md §3 ports).
 *
 *   AGENT_REACH_MODE            queued (default) or direct: no infrastructure, an in-process LocalReach
 *   AGENT_REACH_REGISTRY_URL    http://127.0.0.1:7411
 *   AGENT_REACH_DISPATCHER_URL  ws://127.0.0.1:7412/v1/connect
 *   AGENT_REACH_INGRESS_URL     http://127.0.0.1:7410
 *   AGENT_REACH_TOKEN           enrollment (or admin) token for registration, when needed
 *   AGENT_REACH_CA_FILE         PEM of a private CA for https/wss URLs (docs/transport-security.md)
 *   AGENT_REACH_CLIENT_CERT     client certificate (PEM) for mutual TLS, with AGENT_REACH_CLIENT_KEY
 */
/**
 * Every `AGENT_REACH_*` variable the SDKs read: the source of the generated SDK config
 * reference in docs/configuration.md (scripts/gen-docs.mjs); test/unit/sdk/sdk-variables.test.ts fails when either SDK
 * reads a name missing here.
 */
export const SDK_VARIABLES: ReadonlyArray<{ env: string; default: string; sdks: 'both' | 'python'; description: string }> = [
  {
    env: 'AGENT_REACH_MODE',
    default: 'queued',
    sdks: 'both',
    description:
      '`queued`: through the services. `direct`: no infrastructure, a local control plane with the same routing and delivery semantics (docs/direct-mode.md).',
  },
  {
    env: 'AGENT_REACH_REGISTRY_URL',
    default: 'http://127.0.0.1:7411',
    sdks: 'both',
    description: 'The registry (registration, heartbeats, pre-flight before the routes view arrives).',
  },
  { env: 'AGENT_REACH_DISPATCHER_URL', default: 'ws://127.0.0.1:7412/v1/connect', sdks: 'both', description: "The dispatcher's WebSocket." },
  { env: 'AGENT_REACH_INGRESS_URL', default: 'http://127.0.0.1:7410', sdks: 'both', description: 'The HTTP message API (`node.client()`).' },
  { env: 'AGENT_REACH_TOKEN', default: '', sdks: 'both', description: 'Enrollment (or admin) token for registration, when the registry needs one.' },
  { env: 'AGENT_REACH_CA_FILE', default: '', sdks: 'both', description: 'PEM of a private CA for https/wss endpoints (docs/transport-security.md).' },
  { env: 'AGENT_REACH_CLIENT_CERT', default: '', sdks: 'both', description: 'Client certificate (PEM) for mutual TLS, with AGENT_REACH_CLIENT_KEY.' },
  { env: 'AGENT_REACH_CLIENT_KEY', default: '', sdks: 'both', description: 'Private key (PEM) of AGENT_REACH_CLIENT_CERT.' },
  {
    env: 'AGENT_REACH_NODE',
    default: "the checkout's .reach/tools/node, else node on the PATH",
    sdks: 'python',
    description: 'Direct mode: the Node.js 24 binary that runs the local control plane.',
  },
  {
    env: 'AGENT_REACH_LOCAL_REACH',
    default: "the checkout's packages/sdk/dist/direct/serve-main.js",
    sdks: 'python',
    description: 'Direct mode: the local control plane script.',
  },
];

export interface ConnectionSettings {
  /** AGENT_REACH_MODE (direct|queued); absent = queued. */
  mode?: ReachMode;
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
  if (env.AGENT_REACH_MODE) out.mode = modeOf(undefined, env);
  if (env.AGENT_REACH_TOKEN) out.token = env.AGENT_REACH_TOKEN;
  const tls = tlsFromFiles(
    { caFile: env.AGENT_REACH_CA_FILE, certFile: env.AGENT_REACH_CLIENT_CERT, keyFile: env.AGENT_REACH_CLIENT_KEY },
    { ca: 'AGENT_REACH_CA_FILE', cert: 'AGENT_REACH_CLIENT_CERT', key: 'AGENT_REACH_CLIENT_KEY' },
  );
  if (tls) out.tls = tls;
  return out;
}
