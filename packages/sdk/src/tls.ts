import { readFileSync } from 'node:fs';
import { Agent, fetch as undiciFetch } from 'undici';

/**
 * TLS settings of the SDK's connections to an Agent-Reach behind https/wss with a private CA
 * (docs/transport-security.md). Without them the system trust store is used (plus
 * NODE_EXTRA_CA_CERTS, read by Node at start), which is all a public CA needs.
 */
export interface ClientTls {
  /** PEM of the CA(s) to trust, instead of the system store. */
  ca?: string | Buffer;
  /** A client certificate and its key (PEM), for mutual TLS (admin calls when REACH_TLS_CLIENT_CA is set). */
  cert?: string | Buffer;
  key?: string | Buffer;
}

/** The fetch function of a TLS setting: the global fetch when there is nothing to change. */
export type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

const fetchers = new WeakMap<ClientTls, FetchFn>();

/**
 * A fetch that trusts `tls.ca` (and presents `tls.cert`) — Node's global fetch takes no TLS
 * options, so this goes through undici's own fetch with a connection pool of those options.
 * One pool per settings object, kept as long as the object lives.
 */
export function fetchFor(tls: ClientTls | undefined): FetchFn {
  if (!tls || (!tls.ca && !tls.cert)) return fetch;
  let f = fetchers.get(tls);
  if (!f) {
    const dispatcher = new Agent({ connect: { ...(tls.ca ? { ca: tls.ca } : {}), ...(tls.cert ? { cert: tls.cert, key: tls.key } : {}) } });
    f = (url, init) => undiciFetch(url, { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher }) as unknown as Promise<Response>;
    fetchers.set(tls, f);
  }
  return f;
}

/** The `ws` client options of a TLS setting. */
export function wsTlsOptions(tls: ClientTls | undefined): { ca?: string | Buffer; cert?: string | Buffer; key?: string | Buffer } {
  if (!tls) return {};
  return { ...(tls.ca ? { ca: tls.ca } : {}), ...(tls.cert ? { cert: tls.cert } : {}), ...(tls.key ? { key: tls.key } : {}) };
}

/**
 * TLS from files named in the environment: `<prefix>CA_FILE`, `<prefix>CLIENT_CERT`,
 * `<prefix>CLIENT_KEY` (the SDK uses AGENT_REACH_, the CLI REACH_ with REACH_TLS_CLIENT_*).
 * Undefined when none is set. A file that cannot be read throws, naming the variable.
 */
export function tlsFromFiles(
  files: { caFile?: string | undefined; certFile?: string | undefined; keyFile?: string | undefined },
  names: { ca: string; cert: string; key: string },
): ClientTls | undefined {
  const read = (path: string, name: string): string => {
    try {
      return readFileSync(path, 'utf8');
    } catch (err) {
      throw new Error(`${name}=${path} cannot be read: ${(err as Error).message}`);
    }
  };
  if (!files.caFile && !files.certFile) return undefined;
  if (!!files.certFile !== !!files.keyFile) throw new Error(`${names.cert} and ${names.key} must be set together`);
  return {
    ...(files.caFile ? { ca: read(files.caFile, names.ca) } : {}),
    ...(files.certFile && files.keyFile ? { cert: read(files.certFile, names.cert), key: read(files.keyFile, names.key) } : {}),
  };
}

/**
 * The TLS of a client of the stack that reads the services' own variables, REACH_CA_FILE and
 * REACH_TLS_CLIENT_CERT / REACH_TLS_CLIENT_KEY (`reach`, the test kit, the web console), given
 * by their config names. Undefined when none is set.
 */
export function stackClientTls(cfg: {
  caFile?: string | undefined;
  tlsClientCert?: string | undefined;
  tlsClientKey?: string | undefined;
}): ClientTls | undefined {
  return tlsFromFiles(
    { caFile: cfg.caFile, certFile: cfg.tlsClientCert, keyFile: cfg.tlsClientKey },
    { ca: 'REACH_CA_FILE', cert: 'REACH_TLS_CLIENT_CERT', key: 'REACH_TLS_CLIENT_KEY' },
  );
}
