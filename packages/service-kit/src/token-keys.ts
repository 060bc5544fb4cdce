import { readFileSync } from 'node:fs';
import { ConfigError, parseTokenKeys, TokenKeys, type Logger } from '@reach/core';
import { PeriodicJob } from './periodic.js';

/**
 * The token key set of a service (docs/transport-security.md, "Rotating the signing key"):
 * REACH_TOKEN_SECRETS_FILE, else REACH_TOKEN_SECRETS, as the ring; REACH_TOKEN_SECRET as the
 * legacy key for tokens without a kid. The file is re-read periodically, so an operator rotates
 * by rewriting it (a mounted Kubernetes Secret is updated in place) and no service restarts —
 * the dispatcher keeps every agent's socket open through a rotation.
 */
export interface TokenKeyConfig {
  tokenSecret: string | undefined;
  tokenSecrets: string | undefined;
  tokenSecretsFile: string;
  tokenSecretsReloadMs: number;
}

type ReadFile = (path: string) => string;
const readUtf8: ReadFile = (p) => readFileSync(p, 'utf8');

function readRing(file: string, readFile: ReadFile): ReturnType<typeof parseTokenKeys> {
  let text: string;
  try {
    text = readFile(file);
  } catch (err) {
    throw new ConfigError(`REACH_TOKEN_SECRETS_FILE=${file} cannot be read: ${(err as Error).message}`);
  }
  try {
    return parseTokenKeys(text);
  } catch (err) {
    throw new ConfigError(`REACH_TOKEN_SECRETS_FILE=${file} is invalid: ${(err as Error).message}`);
  }
}

/** The key set of a config; undefined when no key is configured. Throws ConfigError. */
export function loadTokenKeys(c: TokenKeyConfig, readFile: ReadFile = readUtf8): TokenKeys | undefined {
  if (c.tokenSecretsFile) return new TokenKeys(readRing(c.tokenSecretsFile, readFile), c.tokenSecret);
  return TokenKeys.from(c.tokenSecrets, c.tokenSecret);
}

/**
 * Re-reads REACH_TOKEN_SECRETS_FILE into `keys` every interval. A file that cannot be read or
 * parsed (half-written, say) keeps the current set and logs a warning: a broken edit must not
 * lock every agent out.
 */
export function watchTokenKeys(keys: TokenKeys, c: TokenKeyConfig, log: Logger, readFile: ReadFile = readUtf8): PeriodicJob {
  let last = keys.kids.join(',');
  let lastText: string | undefined;
  const job = new PeriodicJob(
    'token key reload',
    c.tokenSecretsReloadMs,
    async () => {
      let text: string;
      try {
        text = readFile(c.tokenSecretsFile);
      } catch (err) {
        log.warn({ err: { message: (err as Error).message } }, 'token keys: REACH_TOKEN_SECRETS_FILE cannot be read; keeping the current keys');
        return;
      }
      if (text === lastText) return;
      lastText = text;
      let ring;
      try {
        ring = parseTokenKeys(text);
      } catch (err) {
        log.warn({ reason: (err as Error).message }, 'token keys: REACH_TOKEN_SECRETS_FILE is invalid; keeping the current keys');
        return;
      }
      keys.replace(ring, c.tokenSecret);
      const now = keys.kids.join(',');
      if (now !== last) log.info({ kids: keys.kids, signing: keys.signing.kid }, 'token keys reloaded');
      last = now;
    },
    log,
  );
  return job;
}

/** The variables any of which gives a service token keys. */
export const TOKEN_KEY_ENV = ['REACH_TOKEN_SECRET', 'REACH_TOKEN_SECRETS', 'REACH_TOKEN_SECRETS_FILE'] as const;

/** True when the environment names a token key source (checked before start by the services that cannot work without one). */
export function hasTokenKeyEnv(env: Readonly<Record<string, string | undefined>>): boolean {
  return TOKEN_KEY_ENV.some((name) => !!env[name]);
}

/** The key set a service cannot run without; ConfigError (exit 78) naming the variables when none is set. */
export function requireTokenKeys(keys: TokenKeys | undefined, service: string): TokenKeys {
  if (!keys) throw new ConfigError(`${service}: REACH_TOKEN_SECRET is required (or REACH_TOKEN_SECRETS / REACH_TOKEN_SECRETS_FILE): it verifies agent tokens`);
  return keys;
}
