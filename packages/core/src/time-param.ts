import { ReachError } from './errors.js';

/**
 * A time given in a request (docs/design.md §3: RFC 3339, or epoch milliseconds) → epoch ms; empty →
 * undefined; anything else is a 4101 naming `field`. Shared by every API that filters by time.
 */
export function parseTimeParam(v: unknown, field: string): number | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  const invalid = (message: string): never => {
    throw new ReachError('INVALID_ENVELOPE', `${field}: ${message}`, { details: { field } });
  };
  if (typeof v === 'number') {
    if (Number.isFinite(v) && v >= 0) return Math.trunc(v);
    invalid('must be an RFC 3339 time or epoch milliseconds');
  }
  if (typeof v !== 'string') return invalid('must be an RFC 3339 time or epoch milliseconds');
  if (/^\d{1,15}$/.test(v)) return Number(v);
  const ms = Date.parse(v);
  if (!Number.isFinite(ms) || !/^\d{4}-\d{2}-\d{2}/.test(v)) invalid(`${JSON.stringify(v)} is not an RFC 3339 time or epoch milliseconds`);
  return ms;
}
