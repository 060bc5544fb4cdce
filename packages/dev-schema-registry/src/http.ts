import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '@reach/core';
import { describe, Registry, RegistryError, type SchemaRequest } from './registry.js';

/**
 * The REST subset of the Confluent Schema Registry that @kafkajs/confluent-schema-registry and
 * common tools call, over node:http. Handlers return a JSON-able value (sent with 200) or throw
 * RegistryError (sent as Confluent's `{"error_code","message"}` with its status).
 */
const CONTENT_TYPE = 'application/vnd.schemaregistry.v1+json';
const ACCEPTED_TYPES = new Set(['application/vnd.schemaregistry.v1+json', 'application/vnd.schemaregistry+json', 'application/json']);
const MAX_BODY_BYTES = 8 * 1024 * 1024;

interface Request {
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  /** The parsed JSON body (an empty object for requests without one). */
  readonly body: Record<string, unknown>;
}

/** A reply sent as is: the `/schema` routes answer the schema text itself, not a JSON string of it. */
class Raw {
  constructor(readonly text: string) {}
}

/** Returns a value sent as JSON, or Raw. */
type Handler = (req: Request) => unknown;

interface Route {
  readonly method: string;
  readonly segments: readonly string[];
  readonly handler: Handler;
}

function routes(registry: Registry): Route[] {
  const state = registry.state;
  const flag = (q: URLSearchParams, name: string) => q.get(name) === 'true';
  const table: Array<[string, string, Handler]> = [
    ['GET', '/', () => ({})],
    ['GET', '/healthz', () => ({ status: 'ok' })],

    ['GET', '/schemas/types', () => ['AVRO']],
    ['GET', '/schemas/ids/:id', ({ params }) => ({ schema: registry.schemaById(params.id!) })],
    ['GET', '/schemas/ids/:id/schema', ({ params }) => new Raw(registry.schemaById(params.id!))],
    ['GET', '/schemas/ids/:id/versions', ({ params }) => registry.usages(params.id!)],
    ['GET', '/schemas/ids/:id/subjects', ({ params }) => [...new Set(registry.usages(params.id!).map((u) => u.subject))]],

    ['GET', '/subjects', ({ query }) => state.subjectNames(flag(query, 'deleted'))],
    ['POST', '/subjects/:subject', ({ params, body }) => registry.lookup(params.subject!, body as SchemaRequest)],
    [
      'DELETE',
      '/subjects/:subject',
      ({ params, query }) => {
        if (flag(query, 'permanent')) throw new RegistryError(400, 400, 'Permanent deletion is not supported by the development registry');
        return registry.deleteSubject(params.subject!);
      },
    ],
    ['GET', '/subjects/:subject/versions', ({ params }) => registry.versions(params.subject!)],
    ['POST', '/subjects/:subject/versions', ({ params, body }) => registry.register(params.subject!, body as SchemaRequest)],
    ['GET', '/subjects/:subject/versions/:version', ({ params }) => describe(registry.version(params.subject!, params.version!))],
    ['GET', '/subjects/:subject/versions/:version/schema', ({ params }) => new Raw(registry.version(params.subject!, params.version!).schema)],

    [
      'POST',
      '/compatibility/subjects/:subject/versions',
      ({ params, query, body }) => compatibility(registry.testCompatibility(params.subject!, undefined, body as SchemaRequest), flag(query, 'verbose')),
    ],
    [
      'POST',
      '/compatibility/subjects/:subject/versions/:version',
      ({ params, query, body }) => compatibility(registry.testCompatibility(params.subject!, params.version!, body as SchemaRequest), flag(query, 'verbose')),
    ],

    ['GET', '/config', () => ({ compatibilityLevel: registry.getConfig(null) })],
    ['PUT', '/config', async ({ body }) => ({ compatibility: await registry.setConfig(null, body) })],
    ['GET', '/config/:subject', ({ params, query }) => ({ compatibilityLevel: registry.getConfig(params.subject!, flag(query, 'defaultToGlobal')) })],
    ['PUT', '/config/:subject', async ({ params, body }) => ({ compatibility: await registry.setConfig(params.subject!, body) })],
    ['DELETE', '/config/:subject', async ({ params }) => ({ compatibilityLevel: await registry.deleteConfig(params.subject!) })],
  ];
  return table.map(([method, path, handler]) => ({ method, segments: path.split('/').filter(Boolean), handler }));
}

function compatibility(result: { compatible: boolean; messages: string[] }, verbose: boolean) {
  return verbose ? { is_compatible: result.compatible, messages: result.messages } : { is_compatible: result.compatible };
}

/** Matches decoded path segments against a route's; `:name` segments capture. */
function match(route: Route, segments: readonly string[]): Record<string, string> | null {
  if (route.segments.length !== segments.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const want = route.segments[i]!;
    const got = segments[i]!;
    if (want.startsWith(':')) params[want.slice(1)] = got;
    else if (want !== got) return null;
  }
  return params;
}

async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new RegistryError(413, 413, 'HTTP 413 Request Entity Too Large');
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  // Only the media type counts, not its parameters (charset).
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== '' && !ACCEPTED_TYPES.has(type)) throw new RegistryError(415, 415, 'HTTP 415 Unsupported Media Type');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new RegistryError(400, 400, `Malformed JSON: ${(err as Error).message}`);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new RegistryError(422, 422, 'The request body must be a JSON object');
  return body as Record<string, unknown>;
}

function send(res: ServerResponse, status: number, reply: unknown): void {
  const text = reply instanceof Raw ? reply.text : JSON.stringify(reply);
  res.writeHead(status, { 'content-type': CONTENT_TYPE, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The request listener for node:http's createServer. */
export function requestListener(registry: Registry, logger: Logger): (req: IncomingMessage, res: ServerResponse) => void {
  const table = routes(registry);
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    let segments: string[];
    try {
      // Split before decoding, so a subject with an encoded '/' stays one segment.
      segments = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    } catch {
      throw new RegistryError(404, 404, 'HTTP 404 Not Found');
    }
    const candidates = table.map((route) => ({ route, params: match(route, segments) })).filter((c) => c.params !== null);
    const found = candidates.find((c) => c.route.method === req.method);
    if (!found) {
      throw candidates.length > 0 ? new RegistryError(405, 405, 'HTTP 405 Method Not Allowed') : new RegistryError(404, 404, 'HTTP 404 Not Found');
    }
    const body = req.method === 'POST' || req.method === 'PUT' ? await readBody(req) : {};
    send(res, 200, await found.route.handler({ params: found.params!, query: url.searchParams, body }));
  };
  return (req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (err instanceof RegistryError) {
        logger.debug({ method: req.method, url: req.url, status: err.status, error_code: err.errorCode }, err.message);
        send(res, err.status, { error_code: err.errorCode, message: err.message });
      } else {
        logger.error({ err, method: req.method, url: req.url }, 'unexpected error');
        send(res, 500, { error_code: 500, message: err instanceof Error ? err.message : String(err) });
      }
    });
  };
}
