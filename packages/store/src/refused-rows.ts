import { pgErrorCode } from './pg.js';

/**
 * A failure caused by the rows themselves (a value PostgreSQL cannot hold — a NUL byte in text,
 * a lone surrogate in jsonb —, a constraint, a size limit: SQLSTATE classes 22, 23 and 54).
 * Retrying the same rows can never succeed, so the caller isolates the culprit instead.
 * Everything else (connection lost, server shutting down, deadlock) is the dependency's: retry.
 */
export function isDataError(err: unknown): boolean {
  const code = pgErrorCode(err);
  return code !== undefined && ['22', '23', '54'].includes(code.slice(0, 2));
}

/**
 * Writes `items` with one call of `write`; when PostgreSQL refuses the rows themselves
 * (isDataError), halves the batch until each refused item is alone and hands it to `refused`,
 * writing everything else: one bad row never blocks its neighbours, and a healthy batch costs
 * one statement. Any other failure propagates (the caller retries the whole batch).
 */
export async function writeIsolatingRefused<T>(
  items: readonly T[],
  write: (items: readonly T[]) => Promise<void>,
  refused: (item: T, err: unknown) => Promise<void>,
): Promise<void> {
  if (items.length === 0) return;
  try {
    await write(items);
  } catch (err) {
    if (!isDataError(err)) throw err;
    if (items.length === 1) return refused(items[0]!, err);
    const half = Math.ceil(items.length / 2);
    await writeIsolatingRefused(items.slice(0, half), write, refused);
    await writeIsolatingRefused(items.slice(half), write, refused);
  }
}

/**
 * `text` with what PostgreSQL's text and jsonb cannot store replaced by U+FFFD: NUL and lone
 * (unpaired) UTF-16 surrogates. Well-formed text comes back unchanged (the same string).
 */
export function storableText(text: string): string {
  // eslint-disable-next-line no-control-regex
  return /[\u0000\ud800-\udfff]/.test(text) ? text.replace(/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd') : text;
}

/** A JSON value with every string (keys too) made storable (storableText). */
export function storableJson(value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  if (Array.isArray(value)) return value.map(storableJson);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[storableText(k)] = storableJson(v);
    return out;
  }
  return value;
}
