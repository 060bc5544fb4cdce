import type { Logger, TokenSecret } from '@reach/core';
import { adminOnly, type AuditLog, type HttpServer, type Reply, type Request } from '@reach/service-kit';
import { entryJson } from './entry.js';
import { bulkReplayFromBody, encodeCursor, listFilterFromQuery, replayOneFromBody } from './filters.js';
import type { DeadLetterMetrics } from './metrics.js';
import { ReplayRefused, type Replayer } from './replayer.js';
import type { DeadLetterStore } from './store.js';

export interface AdminApiDeps {
  http: HttpServer;
  store: DeadLetterStore;
  replayer: Replayer;
  metrics: DeadLetterMetrics;
  adminToken: string | undefined;
  tokenSecret: TokenSecret | undefined;
  log: Logger;
  /** Replays and purges are admin actions of the audit trail. */
  audit: AuditLog;
}

function notFound(id: string): Reply {
  return { status: 404, body: { error: { code: 404, name: 'NOT_FOUND', message: `dead letter ${id} not found` } } };
}

function refused(err: ReplayRefused): Reply {
  return err.status === 404
    ? { status: 404, body: { error: { code: 404, name: 'NOT_FOUND', message: err.message } } }
    : { status: 409, body: { error: { code: 409, name: 'NOT_REPLAYABLE', message: err.message } } };
}

/**
 * The admin API of docs/design.md §3 on the dead-letter port:
 * `GET /v1/dlq` (reason, capability, status, since, until, limit, cursor; newest first),
 * `GET /v1/dlq/{id}`, `POST /v1/dlq/{id}/replay` (body `{dry_run}` optional), `POST /v1/dlq/replay` (filter body),
 * `DELETE /v1/dlq/{id}` (purge: the row stays for audit with status PURGED; its bytes and
 * payload are dropped).
 */
export function registerAdminApi(d: AdminApiDeps): void {
  const guard =
    (handler: (req: Request) => Promise<Reply>) =>
    async (req: Request): Promise<Reply> =>
      adminOnly(req.headers.authorization, d, 'the dead-letter API') ?? handler(req);

  d.http.route(
    'GET',
    '/v1/dlq',
    guard(async (req) => {
      const { filter, limit } = listFilterFromQuery(req.query);
      const rows = await d.store.list(filter, limit + 1);
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      const next = rows.length > limit && last ? encodeCursor(last.created_at, last.dlq_id) : null;
      return { status: 200, body: { entries: page.map((r) => entryJson(r, false)), next_cursor: next } };
    }),
  );

  d.http.route(
    'GET',
    '/v1/dlq/{id}',
    guard(async (req) => {
      const row = await d.store.get(req.params.id!);
      return row ? { status: 200, body: entryJson(row, true) } : notFound(req.params.id!);
    }),
  );

  d.http.route(
    'POST',
    '/v1/dlq/replay',
    d.audit.wrap(
      'dlq.replay_filter',
      null,
      guard(async (req) => {
        const request = bulkReplayFromBody(await req.json());
        const result = await d.replayer.replayMatching(request);
        d.log.info({ filter: request.filter, ...result, replayed_ids: undefined }, 'bulk replay done');
        return { status: 200, body: result };
      }),
    ),
  );

  d.http.route(
    'POST',
    '/v1/dlq/{id}/replay',
    d.audit.wrap(
      'dlq.replay',
      'id',
      guard(async (req) => {
        const { dryRun } = replayOneFromBody(await req.json());
        try {
          const id = req.params.id!;
          return { status: 200, body: dryRun ? await d.replayer.preview(id) : await d.replayer.replay(id, 'manual') };
        } catch (err) {
          if (err instanceof ReplayRefused) return refused(err);
          throw err;
        }
      }),
    ),
  );

  d.http.route(
    'DELETE',
    '/v1/dlq/{id}',
    d.audit.wrap(
      'dlq.purge',
      'id',
      guard(async (req) => {
        const id = req.params.id!;
        const row = await d.store.purge(id, { event: 'PURGED', at: new Date().toISOString() });
        if (!row) {
          const existing = await d.store.get(id);
          if (!existing) return notFound(id);
          return { status: 200, body: { dlq_id: id, status: existing.status } };
        }
        d.metrics.purged();
        d.log.info({ dlq_id: id, message_id: row.message_id, trace_id: row.trace_id }, 'dead letter purged');
        return { status: 200, body: { dlq_id: id, status: row.status } };
      }),
    ),
  );
}
