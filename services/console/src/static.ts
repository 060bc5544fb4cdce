import { readdirSync, readFileSync } from 'node:fs';
import { extname, join, sep } from 'node:path';
import type { HttpServer, Reply } from '@reach/service-kit';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * What a browser may load, locked down: scripts, styles and requests from this origin only,
 * no framing. The page builds its DOM with textContent, never from HTML strings.
 */
const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

/**
 * The page: web/index.html, web/style.css, web/favicon.svg and the ES modules tsc compiles
 * into web/dist (served under /js/, one folder deep). Read once at start: the files are part of the build.
 */
export function registerStatic(http: HttpServer, webDir: string): void {
  const files = new Map<string, Reply>();
  const add = (urlPath: string, file: string) => {
    const type = TYPES[extname(file)];
    if (!type) return;
    files.set(urlPath, { status: 200, body: readFileSync(file, 'utf8'), text: true, headers: { 'content-type': type, ...SECURITY_HEADERS } });
  };
  for (const name of ['index.html', 'style.css', 'favicon.svg']) add(`/${name}`, join(webDir, name));
  for (const name of readdirSync(join(webDir, 'dist'), { recursive: true, encoding: 'utf8' })) {
    if (name.endsWith('.js')) add(`/js/${name.split(sep).join('/')}`, join(webDir, 'dist', name));
  }

  const serve = (path: string): Reply => files.get(path) ?? { status: 404, body: { error: { code: 404, name: 'NOT_FOUND', message: `no file ${path}` } } };
  http.route('GET', '/', () => serve('/index.html'));
  http.route('GET', '/{file}', (req) => serve(`/${req.params.file}`));
  http.route('GET', '/js/{file}', (req) => serve(`/js/${req.params.file}`));
  http.route('GET', '/js/{dir}/{file}', (req) => serve(`/js/${req.params.dir}/${req.params.file}`));
}
