import { fetchFor, stackClientTls, type FetchFn } from '@reach/sdk';

/**
 * The services the console talks to, as a client like the CLI: their public HTTP APIs (proxied
 * for the page) and their /readyz. Each base URL comes from REACH_CONSOLE_UPSTREAMS when named
 * there, else from REACH_HTTP_HOST and the service's own REACH_*_PORT, so `reach up` needs no
 * extra setting and a container deployment names each service's address once.
 */
export const UPSTREAMS = ['ingress', 'registry', 'dispatcher', 'tracker', 'dead-letter', 'router', 'retry-scheduler'] as const;
export type UpstreamName = (typeof UPSTREAMS)[number];

export const UPSTREAM_PORT_OPTIONS = {
  ingress: 'ingressPort',
  registry: 'registryPort',
  dispatcher: 'dispatcherPort',
  tracker: 'trackerPort',
  'dead-letter': 'deadLetterPort',
  router: 'routerPort',
  'retry-scheduler': 'retrySchedulerPort',
} as const satisfies Record<UpstreamName, string>;

type PortKey = (typeof UPSTREAM_PORT_OPTIONS)[UpstreamName];

export interface UpstreamConfig extends Readonly<Record<PortKey, number>> {
  readonly httpHost: string;
  /** REACH_CONSOLE_UPSTREAMS: JSON object, service name → base URL (validated by the config loader). */
  readonly consoleUpstreams: string;
  /** REACH_TLS_CERT: the stack serves TLS, so the derived base URLs are https. */
  readonly tlsCert?: string;
}

export interface UpstreamTlsConfig {
  /** REACH_CA_FILE: the CA the services' certificates are checked against (unset: the system store and NODE_EXTRA_CA_CERTS). */
  readonly caFile: string;
  /** REACH_TLS_CLIENT_CERT / _KEY: the console's client certificate, for a stack with mutual TLS (REACH_TLS_CLIENT_CA). */
  readonly tlsClientCert: string;
  readonly tlsClientKey: string;
}

/**
 * The fetch of the console's calls to the services. Under mutual TLS the services take the
 * admin token only over a connection with a client certificate, so the console presents its
 * own. That lends no one admin rights: the console's port applies the same rule (the same
 * REACH_TLS_CLIENT_CA), so a request reaches the proxy with the admin token only if its
 * caller presented a certificate of that CA to the console first.
 */
export function upstreamFetch(cfg: UpstreamTlsConfig): FetchFn {
  return fetchFor(stackClientTls(cfg));
}

export function resolveUpstreams(cfg: UpstreamConfig): Record<UpstreamName, string> {
  const given = JSON.parse(cfg.consoleUpstreams) as Partial<Record<UpstreamName, string>>;
  // Services bound to every interface are reached on loopback from this machine.
  const host = cfg.httpHost === '0.0.0.0' || cfg.httpHost === '::' ? '127.0.0.1' : cfg.httpHost;
  const scheme = cfg.tlsCert ? 'https' : 'http';
  const out = {} as Record<UpstreamName, string>;
  for (const name of UPSTREAMS) {
    out[name] = (given[name] ?? `${scheme}://${host.includes(':') ? `[${host}]` : host}:${cfg[UPSTREAM_PORT_OPTIONS[name]]}`).replace(/\/+$/, '');
  }
  return out;
}
