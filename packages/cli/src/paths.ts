import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository (or installed bundle) root: packages/cli/dist → ../../.. */
export const ROOT = resolve(fileURLToPath(new URL('../../../', import.meta.url)));

/**
 * Local state of `reach up`: Kafka jars cache, broker data, logs, the supervisor's state and
 * the generated admin token. Git-ignored; REACH_HOME moves it.
 */
export function reachHome(env: NodeJS.ProcessEnv = process.env): string {
  const home = env.REACH_HOME ? resolve(env.REACH_HOME) : join(ROOT, '.reach');
  mkdirSync(home, { recursive: true });
  return home;
}

export function dir(...parts: string[]): string {
  const d = join(...parts);
  if (!existsSync(d)) mkdirSync(d, { recursive: true });
  return d;
}

export const paths = (home: string) => ({
  home,
  logs: dir(home, 'logs'),
  kafkaCache: dir(home, 'cache', 'kafka'),
  kafkaData: join(home, 'data', 'kafka'),
  kafkaConfig: join(home, 'kafka.properties'),
  state: join(home, 'state.json'),
  adminToken: join(home, 'admin-token'),
  tokenSecret: join(home, 'token-secret'),
  rules: join(home, 'rules.yaml'),
  pom: join(ROOT, 'deploy', 'local', 'pom.xml'),
  serverProperties: join(ROOT, 'deploy', 'local', 'server.properties'),
  log4j: join(ROOT, 'deploy', 'local', 'log4j2.properties'),
});

export type Paths = ReturnType<typeof paths>;
