import { adminCall, adminFailure } from '../admin-api.js';
import { printJson, usageError } from '../api.js';
import { table } from '../output.js';
import { parseSubcommand } from '../subcommand.js';

/**
 * `reach dlq list|show|replay|purge …` (docs/design.md §5): the dead-letter admin API (docs/design.md §3) on
 * the dead-letter port, with the admin token of `reach up` (or REACH_ADMIN_TOKEN).
 */
export const DLQ_USAGE = `  reach dlq list [--reason R] [--capability C] [--status S] [--since T] [--until T] [--limit N] [--cursor X]
                          dead letters, newest first (T: RFC 3339 or epoch ms)
  reach dlq show <dlq_id>               one entry: error, history, envelope (or raw bytes)
  reach dlq replay <dlq_id> [--dry-run] send one entry back through ingress as a new attempt
                          (--dry-run: show the entry and the attempt it would start; send nothing)
  reach dlq replay (--reason R | --capability C | --since T [--until T] | --status S) [--dry-run] [--rate N] [--limit N]
                          replay every matching PARKED/DEAD entry, N per second (default 50)
  reach dlq purge <dlq_id>              purge an entry (kept for audit as PURGED, bytes dropped)`;

const call = <T>(method: string, path: string, body?: unknown): Promise<T> => adminCall<T>('deadLetter', method, path, body);

type Entry = Record<string, unknown>;

function short(v: unknown, n: number): string {
  const s = v === null || v === undefined ? '' : String(v);
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

function listRows(entries: Entry[]): Array<Record<string, unknown>> {
  return entries.map((e) => ({
    dlq_id: e.dlq_id,
    status: e.status,
    reason: e.reason,
    code: e.code,
    target: e.capability ?? e.topic ?? e.target_agent_id ?? '',
    message_id: e.message_id ?? '(raw)',
    attempts: e.attempts,
    replays: e.replay_count,
    created_at: e.created_at,
    error: short(e.error, 60),
  }));
}

/**
 * Where a dead letter came from, for people: the topic with the record's partition and offset,
 * or why there is no single record (before, `reach dlq show` printed partition and offset null).
 */
export function sourceText(source: unknown): string {
  const s = (source !== null && typeof source === 'object' ? source : {}) as { topic?: unknown; partition?: unknown; offset?: unknown };
  const topic = typeof s.topic === 'string' && s.topic !== '' ? s.topic : 'unknown';
  if (s.partition !== null && s.partition !== undefined && s.offset !== null && s.offset !== undefined) {
    return `${topic} partition ${String(s.partition)} offset ${String(s.offset)}`;
  }
  if (topic === 'http') return 'http (submitted over HTTP: no Kafka record)';
  return `${topic} (no single record: declared from what the stage kept, e.g. the read model)`;
}

/** The bin's entry point for `reach dlq …`; returns the exit status. */
export async function dlqCommand(argv: string[]): Promise<number> {
  const parsed = parseSubcommand(
    argv,
    {
      reason: { type: 'string' },
      capability: { type: 'string' },
      status: { type: 'string' },
      since: { type: 'string' },
      until: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      'dry-run': { type: 'boolean', default: false },
      rate: { type: 'string' },
    },
    DLQ_USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const { values: v, positionals } = parsed;
  const [sub, id] = positionals;
  try {
    switch (sub) {
      case 'list': {
        const q = new URLSearchParams();
        for (const k of ['reason', 'capability', 'status', 'since', 'until', 'limit', 'cursor'] as const) {
          const val = v[k];
          if (typeof val === 'string') q.set(k, val);
        }
        const page = await call<{ entries: Entry[]; next_cursor: string | null }>('GET', `/v1/dlq${q.size ? `?${q}` : ''}`);
        if (v.json) printJson(page);
        else {
          process.stdout.write(table(listRows(page.entries)));
          if (page.next_cursor) process.stderr.write(`more: reach dlq list … --cursor ${page.next_cursor}\n`);
        }
        return 0;
      }
      case 'show': {
        if (!id) return usageError('usage: reach dlq show <dlq_id>');
        const e = await call<Entry>('GET', `/v1/dlq/${encodeURIComponent(id)}`);
        if (v.json) {
          printJson(e);
          return 0;
        }
        const { history, envelope, raw_b64, source, ...fields } = e;
        const rows = Object.entries({ ...fields, source: sourceText(source) })
          .filter(([, val]) => val !== null && val !== undefined)
          .map(([field, value]) => ({ field, value }));
        process.stdout.write(table(rows, ['field', 'value']));
        if (Array.isArray(history) && history.length > 0) process.stdout.write(`\nhistory\n${history.map((h) => `  ${JSON.stringify(h)}`).join('\n')}\n`);
        if (envelope) process.stdout.write(`\nenvelope\n${JSON.stringify(envelope, null, 2)}\n`);
        else if (typeof raw_b64 === 'string') process.stdout.write(`\nraw bytes (base64, not decodable, not replayable)\n${raw_b64}\n`);
        return 0;
      }
      case 'replay': {
        if (id) {
          const dryRun = v['dry-run'];
          const r = await call<Entry>('POST', `/v1/dlq/${encodeURIComponent(id)}/replay`, dryRun ? { dry_run: true } : undefined);
          if (v.json) printJson(r);
          else if (dryRun) {
            process.stdout.write(`dry run: would replay ${String(r.dlq_id)} (message ${String(r.message_id)}) as attempt ${String(r.attempt)}; nothing sent\n`);
            process.stdout.write(table(listRows([r])));
          } else process.stdout.write(`replayed ${String(r.dlq_id)} (message ${String(r.message_id)}) as attempt ${String(r.attempt)}\n`);
          return 0;
        }
        const body: Record<string, unknown> = {};
        for (const k of ['reason', 'capability', 'status', 'since', 'until'] as const) if (typeof v[k] === 'string') body[k] = v[k];
        if (Object.keys(body).length === 0)
          return usageError(`replay needs an id or a filter (--reason, --capability, --status, --since/--until)\n\n${DLQ_USAGE}`);
        if (v['dry-run']) body.dry_run = true;
        for (const [flag, field] of [
          ['rate', 'rate_per_s'],
          ['limit', 'limit'],
        ] as const) {
          const raw = v[flag];
          if (raw === undefined) continue;
          const n = Number(raw);
          if (!Number.isFinite(n) || n <= 0) return usageError(`--${flag} must be a positive number`);
          body[field] = n;
        }
        const r = await call<{ matched: number; replayed: number; skipped: number; dry_run: boolean }>('POST', '/v1/dlq/replay', body);
        if (v.json) printJson(r);
        else process.stdout.write(table([{ matched: r.matched, replayed: r.replayed, skipped: r.skipped, dry_run: r.dry_run }]));
        return 0;
      }
      case 'purge': {
        if (!id) return usageError('usage: reach dlq purge <dlq_id>');
        const r = await call<Entry>('DELETE', `/v1/dlq/${encodeURIComponent(id)}`);
        if (v.json) printJson(r);
        else process.stdout.write(`purged ${String(r.dlq_id)} (${String(r.status)})\n`);
        return 0;
      }
      default:
        return usageError(`unknown dlq command ${sub}\n\n${DLQ_USAGE}`);
    }
  } catch (err) {
    return adminFailure(err, v.json);
  }
}
