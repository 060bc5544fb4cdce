import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository (or installed bundle) root: packages/cli/dist → ../../.. */
export const ROOT = resolve(fileURLToPath(new URL('../../../', import.meta.url)));

/** The state dir when REACH_HOME is not set: <repo>/.reach. */
export function defaultHome(): string {
  return join(ROOT, '.reach');
}

/**
 * Local state of `reach up`: Kafka jars cache, broker data, logs, the supervisor's state and
 * the generated admin token. Git-ignored; REACH_HOME moves it. Every stack command (`up`,
 * `down`, `ps`, `restart`) addresses the stack of its REACH_HOME, so a second stack (other
 * ports, its own REACH_HOME) runs next to the default one without either touching the other.
 */
export function reachHome(env: NodeJS.ProcessEnv = process.env): string {
  const home = env.REACH_HOME ? resolve(env.REACH_HOME) : defaultHome();
  mkdirSync(home, { recursive: true });
  return home;
}

export function dir(...parts: string[]): string {
  const d = join(...parts);
  if (!existsSync(d)) mkdirSync(d, { recursive: true });
  return d;
}

/** The files of a state dir; `create: false` only names them (to read another state dir's cache). */
export const paths = (home: string, opts: { create?: boolean } = {}) => ({
  home,
  logs: opts.create === false ? join(home, 'logs') : dir(home, 'logs'),
  kafkaCache: opts.create === false ? join(home, 'cache', 'kafka') : dir(home, 'cache', 'kafka'),
  kafkaData: join(home, 'data', 'kafka'),
  kafkaConfig: join(home, 'kafka.properties'),
  state: join(home, 'state.json'),
  adminToken: join(home, 'admin-token'),
  tokenSecret: join(home, 'token-secret'),
  rules: join(home, 'rules.yaml'),
  pom: join(ROOT, 'deploy', 'local', 'pom.xml'),
  serverProperties: join(ROOT, 'deploy', 'local', 'server.properties'),
  clusterProperties: join(ROOT, 'deploy', 'local', 'cluster.properties'),
  log4j: join(ROOT, 'deploy', 'local', 'log4j2.properties'),
});

export type Paths = ReturnType<typeof paths>;
