import { parseTimeParam, ReachError, NAME_FILTER_PATTERN } from '@reach/core';
import type { EntryStatus } from './entry.js';

/** Which entries a list or a bulk replay addresses. */
export interface EntryFilter {
  reason?: string;
  capability?: string;
  status?: EntryStatus;
  /** epoch ms, inclusive */
  since?: number;
  /** epoch ms, exclusive */
  until?: number;
  ids?: string[];
  /** Keyset paging: entries strictly older than this (created_at, dlq_id) position. */
  before?: { at: number; id: string };
}

export const DEFAULT_LIST_LIMIT = 100;
export const MAX_LIST_LIMIT = 1000;
export const DEFAULT_REPLAY_LIMIT = 1000;
export const MAX_REPLAY_LIMIT = 10_000;
export const DEFAULT_RATE_PER_S = 50;
export const MAX_RATE_PER_S = 10_000;

const STATUSES: readonly EntryStatus[] = ['PARKED', 'REPLAYED', 'PURGED', 'DEAD'];

function invalid(field: string, message: string): never {
  throw new ReachError('INVALID_ENVELOPE', `${field}: ${message}`, { details: { field } });
}

/** RFC 3339 or epoch milliseconds (docs/design.md §3: requests may give either); shared with the other time filters. */
export { parseTimeParam };

function parseName(v: unknown, field: string): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string' || !NAME_FILTER_PATTERN.test(v)) invalid(field, 'must be a name of letters, digits and _.:@/-');
  return v;
}

function parseIntIn(v: unknown, field: string, min: number, max: number, def: number): number {
  if (v === undefined || v === null || v === '') return def;
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < min || n > max) invalid(field, `must be an integer in [${min}, ${max}]`);
  return n;
}

function parseStatus(v: unknown): EntryStatus | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  const s = typeof v === 'string' ? v.toUpperCase() : v;
  if (!STATUSES.includes(s as EntryStatus)) invalid('status', `must be one of ${STATUSES.join(', ')}`);
  return s as EntryStatus;
}

/** The opaque paging cursor: the (created_at, dlq_id) of the last entry of a page. */
export function encodeCursor(at: Date, id: string): string {
  return Buffer.from(JSON.stringify([at.getTime(), id])).toString('base64url');
}

export function decodeCursor(raw: string): { at: number; id: string } {
  try {
    const [at, id] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof at === 'number' && typeof id === 'string') return { at, id };
  } catch {
    // reported below
  }
  invalid('cursor', 'is not a cursor this API returned');
}

/** `GET /v1/dlq?reason=&capability=&status=&since=&until=&limit=&cursor=` */
export function listFilterFromQuery(q: URLSearchParams): { filter: EntryFilter; limit: number } {
  const filter: EntryFilter = {};
  const reason = parseName(q.get('reason'), 'reason');
  if (reason) filter.reason = reason.toUpperCase();
  const capability = parseName(q.get('capability'), 'capability');
  if (capability) filter.capability = capability;
  const status = parseStatus(q.get('status'));
  if (status) filter.status = status;
  const since = parseTimeParam(q.get('since'), 'since');
  if (since !== undefined) filter.since = since;
  const until = parseTimeParam(q.get('until'), 'until');
  if (until !== undefined) filter.until = until;
  const cursor = q.get('cursor');
  if (cursor) filter.before = decodeCursor(cursor);
  return { filter, limit: parseIntIn(q.get('limit'), 'limit', 1, MAX_LIST_LIMIT, DEFAULT_LIST_LIMIT) };
}

export interface BulkReplayRequest {
  filter: EntryFilter;
  dryRun: boolean;
  ratePerS: number;
  limit: number;
}

/**
 * `POST /v1/dlq/{id}/replay` with no body, or `{dry_run?}`: a dry run answers what the replay
 * would do (the entry and the attempt it would start) and sends nothing.
 */
export function replayOneFromBody(body: unknown): { dryRun: boolean } {
  if (body === undefined || body === null) return { dryRun: false };
  if (typeof body !== 'object' || Array.isArray(body)) invalid('body', 'must be empty or a JSON object {"dry_run": true|false}');
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) if (k !== 'dry_run') invalid(k, 'is not a field of a replay (only dry_run)');
  if (b.dry_run !== undefined && typeof b.dry_run !== 'boolean') invalid('dry_run', 'must be a boolean');
  return { dryRun: b.dry_run === true };
}

/**
 * `POST /v1/dlq/replay` `{reason?, capability?, since?, until?, ids?, dry_run?, rate_per_s?, limit?}`.
 * An empty filter is refused: replaying everything must be asked for explicitly (e.g. since=0).
 */
export function bulkReplayFromBody(body: unknown): BulkReplayRequest {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) invalid('body', 'must be a JSON object with a filter');
  const b = body as Record<string, unknown>;
  const known = new Set(['reason', 'capability', 'since', 'until', 'ids', 'dry_run', 'rate_per_s', 'limit', 'status']);
  for (const k of Object.keys(b)) if (!known.has(k)) invalid(k, 'is not a field of the replay filter');
  const filter: EntryFilter = {};
  const reason = parseName(b.reason, 'reason');
  if (reason) filter.reason = reason.toUpperCase();
  const capability = parseName(b.capability, 'capability');
  if (capability) filter.capability = capability;
  const status = parseStatus(b.status);
  if (status) filter.status = status;
  const since = parseTimeParam(b.since, 'since');
  if (since !== undefined) filter.since = since;
  const until = parseTimeParam(b.until, 'until');
  if (until !== undefined) filter.until = until;
  if (b.ids !== undefined) {
    if (
      !Array.isArray(b.ids) ||
      b.ids.length === 0 ||
      b.ids.length > MAX_REPLAY_LIMIT ||
      !b.ids.every((i) => typeof i === 'string' && NAME_FILTER_PATTERN.test(i))
    ) {
      invalid('ids', `must be a non-empty array of at most ${MAX_REPLAY_LIMIT} entry ids`);
    }
    filter.ids = b.ids as string[];
  }
  if (Object.keys(filter).length === 0) invalid('body', 'give at least one of reason, capability, status, since, until, ids');
  if (b.dry_run !== undefined && typeof b.dry_run !== 'boolean') invalid('dry_run', 'must be a boolean');
  const ratePerS = b.rate_per_s === undefined ? DEFAULT_RATE_PER_S : Number(b.rate_per_s);
  if (typeof b.rate_per_s !== 'undefined' && (typeof b.rate_per_s !== 'number' || !(ratePerS > 0) || ratePerS > MAX_RATE_PER_S)) {
    invalid('rate_per_s', `must be a number in (0, ${MAX_RATE_PER_S}]`);
  }
  return {
    filter,
    dryRun: b.dry_run === true,
    ratePerS,
    limit: parseIntIn(b.limit, 'limit', 1, MAX_REPLAY_LIMIT, DEFAULT_REPLAY_LIMIT),
  };
}

/**
 * The WHERE clause of a filter, with its parameters numbered from `first`. A capability
 * matches its name exactly, with or without a pinned `@major` on either side.
 */
export function whereClause(f: EntryFilter, first = 1): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  const p = (v: unknown) => {
    params.push(v);
    return `$${first + params.length - 1}`;
  };
  if (f.reason !== undefined) parts.push(`reason = ${p(f.reason)}`);
  if (f.capability !== undefined) {
    parts.push(f.capability.includes('@') ? `capability = ${p(f.capability)}` : `split_part(capability, '@', 1) = ${p(f.capability)}`);
  }
  // Purged entries are kept for audit but never listed or replayed unless asked for by status.
  if (f.status !== undefined) parts.push(`status = ${p(f.status)}`);
  else parts.push(`status <> 'PURGED'`);
  if (f.since !== undefined) parts.push(`created_at >= ${p(new Date(f.since).toISOString())}::timestamptz`);
  if (f.until !== undefined) parts.push(`created_at < ${p(new Date(f.until).toISOString())}::timestamptz`);
  if (f.ids !== undefined) parts.push(`dlq_id = ANY(${p(f.ids)}::text[])`);
  if (f.before !== undefined) parts.push(`(created_at, dlq_id) < (${p(new Date(f.before.at).toISOString())}::timestamptz, ${p(f.before.id)})`);
  return { sql: parts.join(' AND '), params };
}
