import { ACTOR_HEADER } from '@reach/core';
import { userInfo } from 'node:os';
import { adminCall, adminFailure } from '../admin-api.js';
import { printJson, usageError } from '../api.js';
import { table } from '../output.js';
import { parseSubcommand } from '../subcommand.js';

/**
 * `reach quota set|get|list|reset …` (docs/design.md §5, R-D7): per-producer quota overrides
 * through the admin API on ingress (docs/design.md §3), with the admin token of `reach up` (or
 * REACH_ADMIN_TOKEN).
 */
export const QUOTA_USAGE = `  reach quota set <agent_id> <rate_per_s> [--burst N]
                          override an agent's quota (applies on every ingress within 1 s)
  reach quota get <agent_id>            the quota that applies to an agent (override or default)
  reach quota list [--limit N] [--after AGENT_ID]
                          the overrides, by agent id, with the default
  reach quota reset <agent_id>          remove the override: the default applies again`;

type Quota = { agent_id: string; rate_per_s: number; burst: number; source: string; updated_at: string | null; updated_by?: string | null };

// Who made a change, for the audit column; the service keeps it only if it is a plain name.
function actor(): string {
  try {
    return `cli:${userInfo().username}`.replace(/[^A-Za-z0-9_.:@/ -]/g, '_').slice(0, 100);
  } catch {
    return 'cli';
  }
}

const call = <T>(method: string, path: string, body?: unknown): Promise<T> => adminCall<T>('ingress', method, path, body, { [ACTOR_HEADER]: actor() });

const row = (q: Quota) => ({
  agent_id: q.agent_id,
  rate_per_s: q.rate_per_s,
  burst: q.burst,
  source: q.source,
  updated_at: q.updated_at ?? '',
  updated_by: q.updated_by ?? '',
});

/** The bin's entry point for `reach quota …`; returns the exit status. */
export async function quotaCommand(argv: string[]): Promise<number> {
  const parsed = parseSubcommand(argv, { burst: { type: 'string' }, limit: { type: 'string' }, after: { type: 'string' } }, QUOTA_USAGE);
  if (typeof parsed === 'number') return parsed;
  const { values: v, positionals } = parsed;
  const [sub, agent, rate] = positionals;
  const path = (id: string) => `/v1/quotas/${encodeURIComponent(id)}`;
  try {
    switch (sub) {
      case 'set': {
        if (!agent || rate === undefined) return usageError(`usage: reach quota set <agent_id> <rate_per_s> [--burst N]`);
        // Numbers are checked by the service (one set of rules); only non-numbers stop here.
        const ratePerS = Number(rate);
        if (rate.trim() === '' || !Number.isFinite(ratePerS)) return usageError(`rate_per_s must be a number, got ${JSON.stringify(rate)}`);
        const body: Record<string, number> = { rate_per_s: ratePerS };
        if (v.burst !== undefined) {
          const burst = Number(v.burst);
          if (v.burst.trim() === '' || !Number.isFinite(burst)) return usageError(`--burst must be a number, got ${JSON.stringify(v.burst)}`);
          body.burst = burst;
        }
        const q = await call<Quota>('PUT', path(agent), body);
        if (v.json) printJson(q);
        else process.stdout.write(`quota of ${q.agent_id}: ${q.rate_per_s} msg/s, burst ${q.burst} (applies on every ingress within 1 s)\n`);
        return 0;
      }
      case 'get': {
        if (!agent) return usageError('usage: reach quota get <agent_id>');
        const q = await call<Quota & { applied?: unknown }>('GET', path(agent));
        if (v.json) printJson(q);
        else process.stdout.write(table([row(q)]));
        return 0;
      }
      case 'list': {
        const q = new URLSearchParams();
        if (v.limit !== undefined) q.set('limit', v.limit);
        if (v.after !== undefined) q.set('after', v.after);
        const page = await call<{ default: { rate_per_s: number; burst: number }; quotas: Quota[]; next_after: string | null }>(
          'GET',
          `/v1/quotas${q.size ? `?${q}` : ''}`,
        );
        if (v.json) printJson(page);
        else {
          process.stdout.write(`default: ${page.default.rate_per_s} msg/s, burst ${page.default.burst}\n`);
          process.stdout.write(table(page.quotas.map(row)));
          if (page.next_after) process.stderr.write(`more: reach quota list --after ${page.next_after}\n`);
        }
        return 0;
      }
      case 'reset': {
        if (!agent) return usageError('usage: reach quota reset <agent_id>');
        const q = await call<Quota & { removed: boolean }>('DELETE', path(agent));
        if (v.json) printJson(q);
        else
          process.stdout.write(
            q.removed
              ? `quota of ${q.agent_id} reset to the default: ${q.rate_per_s} msg/s, burst ${q.burst}\n`
              : `${q.agent_id} had no override (default applies)\n`,
          );
        return 0;
      }
      default:
        return usageError(`unknown quota command ${sub}\n\n${QUOTA_USAGE}`);
    }
  } catch (err) {
    return adminFailure(err, v.json);
  }
}
