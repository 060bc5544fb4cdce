import { bearer, newId, sameSecret, toReachError, verifyToken, type Logger, ACTOR_HEADER } from '@reach/core';
import type { Pool } from '@reach/store';
import type { AdminSecrets } from './admin-auth.js';
import type { Handler, Reply, Request } from './http.js';

/**
 * The audit trail of admin actions (issue #13, table `audit_log`, migration 009): every replay,
 * purge, quota change, grant, revocation, agent deletion and rules reload is recorded with who
 * (the credential's identity and source address), when, what (action, target, request body)
 * and the result — including refused attempts (401/403), which are what a reviewer looks for.
 * The row is written after the answer is known; a failed write is logged at error level and
 * never changes the answer (the action has happened by then).
 */
export type AuditResult = 'ok' | 'denied' | 'failed';

export interface AuditRecord {
  readonly actor: string;
  readonly source: string | null;
  readonly action: string;
  readonly target: string | null;
  readonly request: Record<string, unknown> | null;
  readonly status: number;
  readonly result: AuditResult;
  readonly detail: unknown;
}

/** Request bodies are kept up to this many characters of JSON. */
const MAX_BODY_CHARS = 4000;

/** The identity a bearer credential proves, as the audit trail names it. */
export function actorOf(authorization: string | string[] | undefined, secrets: AdminSecrets & { enrollmentToken?: string | undefined }): string {
  const token = bearer(authorization);
  if (!token) return 'anonymous';
  if (secrets.adminToken && sameSecret(token, secrets.adminToken)) return 'admin';
  if (secrets.enrollmentToken && sameSecret(token, secrets.enrollmentToken)) return 'enrollment';
  if (secrets.tokenSecret) {
    try {
      // Checked "at the epoch": an expired or revoked agent token still proves who holds it.
      return `agent:${verifyToken(token, secrets.tokenSecret, 0).sub}`;
    } catch {
      // nobody we issued a token to
    }
  }
  return 'invalid-token';
}

export function resultOf(status: number): AuditResult {
  if (status === 401 || status === 403) return 'denied';
  return status < 400 ? 'ok' : 'failed';
}

async function bodyOf(req: Request): Promise<unknown> {
  if (req.method === 'GET' || req.method === 'DELETE') return undefined;
  try {
    // json() is memoised: the handler already read it, or it was refused before reading it.
    const body = await req.json();
    if (body === undefined) return undefined;
    const text = JSON.stringify(body);
    return text.length <= MAX_BODY_CHARS ? body : { truncated: text.slice(0, MAX_BODY_CHARS) };
  } catch {
    return { unreadable: true };
  }
}

export interface AuditLogOptions {
  pg: Pool;
  service: string;
  instance: string;
  secrets: AdminSecrets & { enrollmentToken?: string | undefined };
  log: Logger;
}

export class AuditLog {
  constructor(private readonly o: AuditLogOptions) {}

  async record(r: AuditRecord): Promise<void> {
    try {
      await this.o.pg.query(
        `INSERT INTO audit_log (audit_id, actor, source, service, instance, action, target, request, status, result, detail)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [
          newId('aud'),
          r.actor,
          r.source,
          this.o.service,
          this.o.instance,
          r.action,
          r.target,
          r.request === null ? null : JSON.stringify(r.request),
          r.status,
          r.result,
          r.detail === undefined ? null : JSON.stringify(r.detail),
        ],
      );
    } catch (err) {
      this.o.log.error({ err, audit: { ...r, request: undefined } }, 'could not write the audit record of an admin action');
    }
  }

  /**
   * `handler` (guard included, so refusals are recorded too) with its outcome recorded as
   * `action` on the target `targetParam` names (a path parameter).
   */
  wrap(action: string, targetParam: string | null, handler: Handler): Handler {
    return async (req) => {
      let reply: Reply | undefined;
      let failure: unknown;
      try {
        reply = await handler(req);
      } catch (err) {
        failure = err;
      }
      const error = failure === undefined ? undefined : toReachError(failure);
      const status = reply?.status ?? error?.httpStatus ?? 500;
      const answer = reply?.body as { error?: unknown } | undefined;
      await this.record({
        actor: actorOf(req.headers.authorization, this.o.secrets),
        source: req.raw.socket.remoteAddress ?? null,
        action,
        target: targetParam === null ? null : (req.params[targetParam] ?? null),
        request: {
          method: req.method,
          path: req.path,
          body: (await bodyOf(req)) ?? null,
          // who the caller says it is (the CLI sends cli:<user>): stated, not proven, kept as given
          ...(typeof req.headers[ACTOR_HEADER] === 'string' ? { declared_actor: req.headers[ACTOR_HEADER].slice(0, 100) } : {}),
        },
        status,
        result: resultOf(status),
        detail: error ? error.toBody().error : status >= 400 ? (answer?.error ?? null) : null,
      });
      if (failure !== undefined) throw failure;
      return reply!;
    };
  }
}
