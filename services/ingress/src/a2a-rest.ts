import { ERROR, A2A_VERSION_HEADER } from '@reach/core';
import { A2A_CAPABILITY_PREFIX, A2A_ERRORS, A2A_PROTOCOL_VERSION, A2A_REST_PATH, A2A_REST_SUFFIX, A2aError, type A2aErrorName } from '@reach/a2a';
import type { HttpServer, Reply, Request } from '@reach/service-kit';
import type { A2aOps } from './a2a-ops.js';
import { restFrame } from './a2a-stream.js';

/**
 * The HTTP+JSON binding of A2A 1.0 (spec §11), over the same operations as the JSON-RPC one
 * (docs/a2a.md): `POST /message:send`, `POST /message:stream`, `GET /tasks/{id}`, `GET /tasks`,
 * `POST /tasks/{id}:cancel`, `POST /tasks/{id}:subscribe` (and the push-notification config
 * paths and `GET /extendedAgentCard`, which answer that they are not offered), under `/a2a/rest` and under each
 * capability's `/a2a/capabilities/{capability}/rest`. Errors are google.rpc.Status bodies with
 * an ErrorInfo naming the A2A error (§11.6); a refused credential is the 401 with Agent-Reach's
 * 1003 body every service answers.
 */
const HTTP_OF: Record<A2aErrorName, [number, string]> = {
  JSONParseError: [400, 'INVALID_ARGUMENT'],
  InvalidRequestError: [400, 'INVALID_ARGUMENT'],
  MethodNotFoundError: [404, 'NOT_FOUND'],
  InvalidParamsError: [400, 'INVALID_ARGUMENT'],
  InternalError: [500, 'INTERNAL'],
  TaskNotFoundError: [404, 'NOT_FOUND'],
  TaskNotCancelableError: [400, 'FAILED_PRECONDITION'],
  PushNotificationNotSupportedError: [400, 'FAILED_PRECONDITION'],
  UnsupportedOperationError: [400, 'FAILED_PRECONDITION'],
  ContentTypeNotSupportedError: [400, 'INVALID_ARGUMENT'],
  InvalidAgentResponseError: [500, 'INTERNAL'],
  ExtendedAgentCardNotConfiguredError: [400, 'FAILED_PRECONDITION'],
  ExtensionSupportRequiredError: [400, 'FAILED_PRECONDITION'],
  VersionNotSupportedError: [400, 'FAILED_PRECONDITION'],
};

const JSON_HEADERS = { 'content-type': 'application/a2a+json', [A2A_VERSION_HEADER]: A2A_PROTOCOL_VERSION };

/** `TaskNotFoundError` → `TASK_NOT_FOUND` (spec §11.6). */
export function reasonOf(name: string): string {
  return name
    .replace(/Error$/, '')
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toUpperCase();
}

export function restError(err: A2aError): Reply {
  if (err.errorName === 'AuthenticationError')
    return {
      status: 401,
      headers: { ...JSON_HEADERS, 'www-authenticate': 'Bearer' },
      body: { error: { code: ERROR.AUTH_FAILED, name: 'AUTH_FAILED', status: 'UNAUTHENTICATED', message: err.message, details: err.data ?? [] } },
    };
  const [status, grpc] = HTTP_OF[err.errorName];
  const info = {
    '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
    reason: reasonOf(err.errorName),
    domain: 'a2a-protocol.org',
    metadata: { jsonRpcCode: String(A2A_ERRORS[err.errorName].code) },
  };
  return { status, headers: JSON_HEADERS, body: { error: { code: status, status: grpc, message: err.message, details: [info, ...(err.data ?? [])] } } };
}

/** ListTasks' parameters from the query string (spec §11.5). */
export function listParamsOf(q: URLSearchParams): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['contextId', 'status', 'pageToken', 'statusTimestampAfter']) {
    const v = q.get(k);
    if (v !== null && v !== '') out[k] = v;
  }
  for (const k of ['pageSize', 'historyLength']) {
    const v = q.get(k);
    if (v !== null && v !== '') out[k] = Number(v);
  }
  if (q.get('includeArtifacts') === 'true') out.includeArtifacts = true;
  return out;
}

async function bodyOf(req: Request): Promise<unknown> {
  try {
    return await req.json();
  } catch {
    throw new A2aError('JSONParseError');
  }
}

export function registerA2aRest(http: HttpServer, ops: A2aOps): void {
  const run = async (req: Request, work: (c: ReturnType<A2aOps['caller']>) => Promise<Reply>): Promise<Reply> => {
    try {
      return await work(ops.caller(req));
    } catch (err) {
      return restError(ops.internalError(err));
    }
  };
  const ok = (body: unknown): Reply => ({ status: 200, headers: JSON_HEADERS, body });

  const mount = (prefix: string, boundOf: (req: Request) => string | undefined): void => {
    http.route('POST', `${prefix}/message:send`, (req) => run(req, async (c) => ok(await ops.sendMessage(c.who, c.token, await bodyOf(req), boundOf(req)))));
    http.route('POST', `${prefix}/message:stream`, (req) =>
      run(req, async (c) => ops.sendStreaming(c.who, c.token, await bodyOf(req), boundOf(req), c.lastEventId, restFrame)),
    );
    http.route('GET', `${prefix}/tasks`, (req) => run(req, async (c) => ok(await ops.listTasks(c.who, listParamsOf(req.query)))));
    http.route('GET', `${prefix}/tasks/{id}`, (req) => run(req, async (c) => ok(await ops.getTask(c.who, { id: req.params.id }))));
    // `POST /tasks/{id}:cancel` and `POST /tasks/{id}:subscribe`: one path segment, the verb after the colon.
    http.route('POST', `${prefix}/tasks/{idAndVerb}`, (req) =>
      run(req, async (c) => {
        const m = /^(.+):(cancel|subscribe)$/.exec(req.params.idAndVerb!);
        if (!m) throw new A2aError('MethodNotFoundError', `POST ${req.path}: use /tasks/{id}:cancel or /tasks/{id}:subscribe`);
        if (m[2] === 'cancel') return ok(await ops.cancelTask(c.who, { id: m[1] }));
        return ops.subscribe(c.who, { id: m[1] }, c.lastEventId, restFrame);
      }),
    );
    // Push notifications are not offered (the card says pushNotifications: false): every config
    // operation is PushNotificationNotSupportedError (spec §3.3.4), after the credential check.
    const noPush = (req: Request): Promise<Reply> =>
      run(req, () => {
        throw new A2aError('PushNotificationNotSupportedError', 'push notifications are not offered: stream the task (resumable) or poll GetTask');
      });
    http.route('POST', `${prefix}/tasks/{id}/pushNotificationConfigs`, noPush);
    http.route('GET', `${prefix}/tasks/{id}/pushNotificationConfigs`, noPush);
    http.route('GET', `${prefix}/tasks/{id}/pushNotificationConfigs/{configId}`, noPush);
    http.route('DELETE', `${prefix}/tasks/{id}/pushNotificationConfigs/{configId}`, noPush);
    http.route('GET', `${prefix}/extendedAgentCard`, (req) =>
      run(req, () => {
        throw new A2aError('UnsupportedOperationError', 'there is no extended Agent Card (capabilities.extendedAgentCard: false)');
      }),
    );
  };
  mount(A2A_REST_PATH, () => undefined);
  mount(`${A2A_CAPABILITY_PREFIX}{capability}${A2A_REST_SUFFIX}`, (req) => req.params.capability);
}
