import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Paths } from '../paths.js';

/**
 * The real Apache Kafka broker, fetched once from Maven Central by deploy/local/pom.xml into the
 * git-ignored cache and run as a single KRaft node (broker + controller) on 127.0.0.1:9092.
 */
export function kafkaVersion(p: Paths): string {
  const m = /<kafka\.version>([^<]+)<\/kafka\.version>/.exec(readFileSync(p.pom, 'utf8'));
  if (!m) throw new Error(`${p.pom} has no <kafka.version>`);
  return m[1]!;
}

function libsDir(p: Paths): string {
  return join(p.kafkaCache, kafkaVersion(p), 'libs');
}

function pomHash(p: Paths): string {
  return createHash('sha256').update(readFileSync(p.pom)).digest('hex').slice(0, 16);
}

export function kafkaFetched(p: Paths): boolean {
  const marker = join(libsDir(p), '.complete');
  return existsSync(marker) && readFileSync(marker, 'utf8').trim() === pomHash(p);
}

function run(cmd: string, args: string[], logFile?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', (err) => reject(new Error(`${cmd} could not start (${err.message}); is it installed and on PATH?`)));
    child.on('exit', (code) => {
      if (logFile) writeFileSync(logFile, out);
      if (code === 0) resolve();
      else reject(new Error(`${cmd} ${args.slice(0, 3).join(' ')} … exited with ${code}:\n${out.split('\n').slice(-25).join('\n')}`));
    });
  });
}

/** Downloads the pinned broker and its dependencies (once; later runs reuse the cache). */
export async function fetchKafka(p: Paths): Promise<void> {
  if (kafkaFetched(p)) return;
  const libs = libsDir(p);
  rmSync(libs, { recursive: true, force: true });
  mkdirSync(libs, { recursive: true });
  await run(
    'mvn',
    ['-B', '-q', '-f', p.pom, 'dependency:copy-dependencies', `-DoutputDirectory=${libs}`, '-DincludeScope=runtime'],
    join(p.logs, 'kafka-fetch.log'),
  );
  if (!readdirSync(libs).some((f) => f.startsWith('kafka_2.13-'))) throw new Error(`maven finished but ${libs} has no kafka_2.13 jar`);
  writeFileSync(join(libs, '.complete'), pomHash(p));
}

function kafkaClusterId(): string {
  // A KRaft cluster id is 16 random bytes, base64url without padding (what `kafka-storage random-uuid` prints).
  return randomBytes(16).toString('base64url');
}

function javaBase(p: Paths): string[] {
  return ['-Djava.awt.headless=true', `-Dlog4j2.configurationFile=${p.log4j}`, '-cp', `${libsDir(p)}/*`];
}

/** Writes the broker config (log.dirs into the state dir) and formats KRaft storage once. */
export async function formatKafka(p: Paths): Promise<void> {
  const props = readFileSync(p.serverProperties, 'utf8') + `\n# added by reach up\nlog.dirs=${p.kafkaData}\n`;
  writeFileSync(p.kafkaConfig, props);
  if (existsSync(join(p.kafkaData, 'meta.properties'))) return;
  mkdirSync(p.kafkaData, { recursive: true });
  await run('java', [...javaBase(p), 'kafka.tools.StorageTool', 'format', '-t', kafkaClusterId(), '-c', p.kafkaConfig], join(p.logs, 'kafka-format.log'));
}

/** The broker's command line; the heap stays ≤ 512 MiB. */
export function kafkaCommand(p: Paths): { cmd: string; args: string[] } {
  return {
    cmd: 'java',
    args: ['-Xms128m', '-Xmx512m', '-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20', '-XX:+ExitOnOutOfMemoryError', ...javaBase(p), 'kafka.Kafka', p.kafkaConfig],
  };
}
