import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * A class-data-sharing archive of the broker's classes (JDK 17 AppCDS), so that a broker
 * restarted after kill -9 maps its ~5,000 classes instead of loading and verifying them from
 * the jars: the JVM part of a restart went from 2.6 s to 1.5 s on an idle machine, and more on a
 * loaded one, where class loading competes for the same cores.
 *
 * JDK 17 writes a dynamic archive only when a JVM started with -XX:ArchiveClassesAtExit exits
 * normally, never after kill -9, so `reach up` makes it once with a training run: a throwaway
 * broker on free ports and a temporary log dir, stopped with SIGTERM once it has started. The
 * archive sits beside the jars, named after them and the JVM's version: a stale or foreign
 * archive is never used (and the JVM would ignore one it cannot map anyway).
 */

/** `java -version` of this JVM, asked once per process (`reach up` names the archive 3+ times). */
let javaVersion: string | undefined;
function javaVersionText(): string {
  javaVersion ??= spawnSync('java', ['-version'], { encoding: 'utf8' }).stderr ?? '';
  return javaVersion;
}

/** Where the archive for these jars and this JVM lives (whether or not it exists yet). */
export function classArchivePath(libs: string, marker: string): string {
  const key = createHash('sha256').update(marker).update(javaVersionText()).digest('hex').slice(0, 12);
  return join(dirname(libs), `broker-classes-${key}.jsa`);
}

/** The JVM option that maps the archive, when it exists. */
export function classArchiveArgs(archive: string): string[] {
  return existsSync(archive) ? [`-XX:SharedArchiveFile=${archive}`, '-Xshare:auto'] : [];
}

/** A TCP port nothing listens on right now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface TrainingRun {
  /** The java arguments before the main class: class path and logging. */
  javaBase: string[];
  /** The node's config text with `{port}`, `{controllerPort}` and `{logDir}` to fill in. */
  config: (ports: { port: number; controllerPort: number; logDir: string }) => string;
  /** Formats the training node's storage (kafka.tools.StorageTool). */
  format: (configFile: string) => Promise<void>;
  /** Where the training broker's output goes. */
  logFile: string;
  timeoutMs?: number;
}

/**
 * Makes the archive with a training run, unless it exists. Never fails `reach up`: without an
 * archive the broker only starts slower, so an error comes back as a message to print.
 */
export async function ensureClassArchive(archive: string, run: TrainingRun): Promise<string | undefined> {
  if (existsSync(archive)) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'reach-kafka-cds-'));
  const partial = `${archive}.${process.pid}.partial`;
  try {
    const [port, controllerPort] = [await freePort(), await freePort()];
    const configFile = join(dir, 'training.properties');
    writeFileSync(configFile, run.config({ port, controllerPort, logDir: join(dir, 'data') }));
    await run.format(configFile);
    await startAndStop(['-Xmx512m', `-XX:ArchiveClassesAtExit=${partial}`, ...run.javaBase, 'kafka.Kafka', configFile], run.logFile, run.timeoutMs ?? 60_000);
    if (!existsSync(partial)) return 'the training broker stopped without writing a class archive';
    renameSync(partial, archive);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  } finally {
    rmSync(partial, { force: true });
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Starts the training broker, waits until it has started (all of a start's classes loaded), stops it politely. */
function startAndStop(args: string[], logFile: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('java', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let stopping = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      const what = stopping ? 'started but did not stop' : 'did not start';
      reject(new Error(`the training broker ${what} within ${timeoutMs / 1000}s`));
    }, timeoutMs);
    const onData = (d: Buffer) => {
      out += d.toString();
      if (!stopping && out.includes('Kafka Server started')) {
        stopping = true;
        child.kill('SIGTERM');
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      writeFileSync(logFile, out);
      if (stopping) resolve();
      else reject(new Error(`the training broker exited (${code}) before it started:\n${out.split('\n').slice(-10).join('\n')}`));
    });
  });
}

/** The marker that names the jars of a libs dir (its .complete file). */
export function libsMarker(libs: string): string {
  const file = join(libs, '.complete');
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : libs;
}
