/**
 * Passwords travel inside connection URLs (`postgres://user:pass@…`, `redis://:pass@…`,
 * `https://user:pass@registry`); these keep them out of logs, error messages, `reach ps` and
 * config dumps.
 */

/** The URL with its password replaced by `***` (unparseable input is not echoed back). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    for (const key of [...u.searchParams.keys()]) if (SECRET_QUERY.test(key)) u.searchParams.set(key, '***');
    return u.toString();
  } catch {
    return '<invalid url>';
  }
}

/** Query parameters that carry a secret (`?password=` of libpq, `sslpassword=`, `…token=`). */
const SECRET_QUERY = /pass|secret|token/i;

/** Every `scheme://user:password@` in free text (an error message, a log line) with the password hidden. */
export function redactUrlsIn(text: string): string {
  return text.replace(/\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)([^\s@/]+)@/gi, '$1***@');
}
