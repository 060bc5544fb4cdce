import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { portOpen, waitFor } from '@reach/cli';
import type { Pki } from './pki.js';

/**
 * Private Redis and PostgreSQL servers for the transport-security tests, on spare ports, never
 * the machine's own (which run without passwords, PostgreSQL with trust auth on 127.0.0.1, so a
 * password test against them could not fail). Both take a password and speak TLS with the
 * test's PKI; PostgreSQL refuses unencrypted TCP connections outright.
 */
export interface PrivateRedis {
  readonly port: number;
  readonly tlsPort: number;
  readonly password: string;
  stop(): Promise<void>;
}

export async function startPrivateRedis(pki: Pki, opts: { port: number; tlsPort: number; password: string }): Promise<PrivateRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'reach-redis-'));
  const child = spawn(
    'redis-server',
    [
      '--port', String(opts.port),
      '--bind', '127.0.0.1',
      '--requirepass', opts.password,
      '--tls-port', String(opts.tlsPort),
      '--tls-cert-file', pki.serverCert,
      '--tls-key-file', pki.serverKey,
      '--tls-ca-cert-file', pki.caCert,
      '--tls-auth-clients', 'no',
      '--save', '',
      '--appendonly', 'no',
      '--dir', dir,
    ], // prettier-ignore
    { stdio: 'ignore' },
  );
  await waitFor(`redis-server on ${opts.port}`, () => portOpen('127.0.0.1', opts.port), 10_000, 50);
  return {
    port: opts.port,
    tlsPort: opts.tlsPort,
    password: opts.password,
    stop: async () => {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface PrivatePostgres {
  readonly port: number;
  readonly user: string;
  readonly password: string;
  /** postgres://user:password@127.0.0.1:port/<db>?sslmode=verify-full&sslrootcert=<ca> */
  url(db: string, caFile?: string): string;
  stop(): void;
}

/** The PostgreSQL server binaries of the machine (Debian puts them under /usr/lib/postgresql/<major>/bin). */
export function postgresBin(): string | undefined {
  try {
    const majors = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
    return majors.length ? join('/usr/lib/postgresql', majors[0]!, 'bin') : undefined;
  } catch {
    return undefined;
  }
}

/** Runs as the postgres user when this process is root (initdb and postgres refuse to run as root). */
function asPostgres(cmd: string, args: string[]): void {
  const argv = process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--', cmd, ...args] : [cmd, ...args];
  execFileSync(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
}

export function startPrivatePostgres(pki: Pki, opts: { port: number; user: string; password: string }): PrivatePostgres {
  const bin = postgresBin();
  if (!bin) throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin');
  const dir = mkdtempSync(join(tmpdir(), 'reach-pg-'));
  const data = join(dir, 'data');
  const tls = join(dir, 'tls');
  mkdirSync(tls);
  copyFileSync(pki.serverCert, join(tls, 'server.pem'));
  copyFileSync(pki.serverKey, join(tls, 'server.key'));
  writeFileSync(join(dir, 'pw'), opts.password);
  if (process.getuid?.() === 0) {
    for (const f of ['', 'tls', 'tls/server.pem', 'tls/server.key', 'pw']) chownSync(join(dir, f), uidOf('postgres'), gidOf('postgres'));
  }
  chmodSync(join(tls, 'server.key'), 0o600);
  asPostgres(join(bin, 'initdb'), [
    '-D',
    data,
    '-U',
    opts.user,
    `--pwfile=${join(dir, 'pw')}`,
    '--auth-local=trust',
    '--auth-host=scram-sha-256',
    '-E',
    'UTF8',
  ]);
  writeFileSync(
    join(data, 'postgresql.auto.conf'),
    [
      `port = ${opts.port}`,
      `listen_addresses = '127.0.0.1'`,
      `unix_socket_directories = '${dir}'`,
      'ssl = on',
      `ssl_cert_file = '${join(tls, 'server.pem')}'`,
      `ssl_key_file = '${join(tls, 'server.key')}'`,
      'password_encryption = scram-sha-256',
      'max_connections = 40',
      'shared_buffers = 16MB',
      'fsync = off',
      '',
    ].join('\n'),
  );
  // TCP only with TLS and a password; plaintext TCP is refused.
  writeFileSync(join(data, 'pg_hba.conf'), 'local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\nhostnossl all all 127.0.0.1/32 reject\n');
  if (process.getuid?.() === 0) for (const f of ['postgresql.auto.conf', 'pg_hba.conf']) chownSync(join(data, f), uidOf('postgres'), gidOf('postgres'));
  asPostgres(join(bin, 'pg_ctl'), ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '30', 'start']);
  return {
    port: opts.port,
    user: opts.user,
    password: opts.password,
    url: (db, caFile = pki.caCert) =>
      `postgres://${encodeURIComponent(opts.user)}:${encodeURIComponent(opts.password)}@127.0.0.1:${opts.port}/${db}?sslmode=verify-full&sslrootcert=${encodeURIComponent(caFile)}`,
    stop: () => {
      try {
        asPostgres(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

function uidOf(user: string): number {
  return Number(execFileSync('id', ['-u', user]).toString().trim());
}

function gidOf(user: string): number {
  return Number(execFileSync('id', ['-g', user]).toString().trim());
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}
