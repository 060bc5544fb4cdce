import { parseArgs } from 'node:util';
import { adminCall, adminFailure } from '../admin-api.js';
import { printJson, usageError } from '../api.js';
import { table } from '../output.js';

/**
 * `reach audit` (issue #13): the audit trail of admin actions from `GET /v1/audit` on the
 * registry (admin token of `reach up`, or REACH_ADMIN_TOKEN), newest first.
 */
export const AUDIT_USAGE = `  reach audit [--action A] [--actor X] [--result ok|denied|failed] [--since T] [--until T] [--limit N]
                          the audit trail of admin actions (replay, purge, quota, grant, revoke, agent delete, rules reload)`;

interface AuditEntry {
  audit_id: string;
  at: string;
  actor: string;
  source: string | null;
  service: string;
  action: string;
  target: string | null;
  status: number;
  result: string;
}

/** The bin's entry point for `reach audit …`; returns the exit status. */
export async function auditCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: false,
      options: {
        json: { type: 'boolean', default: false },
        action: { type: 'string' },
        actor: { type: 'string' },
        result: { type: 'string' },
        since: { type: 'string' },
        until: { type: 'string' },
        limit: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    return usageError(`${(err as Error).message}\n\n${AUDIT_USAGE}`);
  }
  const { values: v } = parsed;
  if (v.help) {
    process.stdout.write(AUDIT_USAGE + '\n');
    return 0;
  }
  // The filters are checked by the service (one set of rules).
  const q = new URLSearchParams();
  for (const k of ['action', 'actor', 'result', 'since', 'until', 'limit'] as const) if (v[k] !== undefined) q.set(k, v[k]);
  try {
    const page = await adminCall<{ entries: AuditEntry[] }>('registry', 'GET', `/v1/audit${q.size ? `?${q}` : ''}`);
    if (v.json) printJson(page);
    else
      process.stdout.write(
        table(
          page.entries.map((e) => ({
            at: e.at,
            actor: e.actor,
            source: e.source ?? '',
            action: e.action,
            target: e.target ?? '',
            result: e.result,
            status: e.status || '',
            service: e.service,
          })),
        ),
      );
    return 0;
  } catch (err) {
    return adminFailure(err, v.json);
  }
}
