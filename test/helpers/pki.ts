import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A throwaway PKI made with the real `openssl` for the transport-security tests: a CA, a server
 * certificate for 127.0.0.1/localhost signed by it (usable by the services, Kafka, Redis and
 * PostgreSQL), a client certificate signed by it (mutual TLS), and a second CA nobody trusts
 * with a client certificate of its own (the impostor). Keys are unencrypted PKCS#8 PEM.
 */
export interface Pki {
  readonly dir: string;
  readonly caCert: string;
  readonly serverCert: string;
  readonly serverKey: string;
  /** Server key followed by its certificate, for servers that want both in one PEM file (Kafka). */
  readonly serverKeyAndCert: string;
  readonly clientCert: string;
  readonly clientKey: string;
  readonly strangerCaCert: string;
  readonly strangerClientCert: string;
  readonly strangerClientKey: string;
  remove(): void;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

function makeCa(dir: string, name: string): void {
  openssl(dir, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.pem`, '-days', '2', '-subj', `/CN=${name}`]);
}

function issue(dir: string, ca: string, name: string, cn: string, ext: string): void {
  openssl(dir, ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`]);
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
  ]);
}

export function makePki(): Pki {
  const dir = mkdtempSync(join(tmpdir(), 'reach-pki-'));
  makeCa(dir, 'ca');
  issue(dir, 'ca', 'server', 'localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  issue(dir, 'ca', 'client', 'reach-operator', 'extendedKeyUsage=clientAuth\n');
  makeCa(dir, 'stranger-ca');
  issue(dir, 'stranger-ca', 'stranger-client', 'reach-operator', 'extendedKeyUsage=clientAuth\n');
  const p = (f: string) => join(dir, f);
  const keyAndCert = p('server-key-and-cert.pem');
  execFileSync('sh', ['-c', `cat server.key server.pem > ${keyAndCert}`], { cwd: dir });
  return {
    dir,
    caCert: p('ca.pem'),
    serverCert: p('server.pem'),
    serverKey: p('server.key'),
    serverKeyAndCert: keyAndCert,
    clientCert: p('client.pem'),
    clientKey: p('client.key'),
    strangerCaCert: p('stranger-ca.pem'),
    strangerClientCert: p('stranger-client.pem'),
    strangerClientKey: p('stranger-client.key'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
