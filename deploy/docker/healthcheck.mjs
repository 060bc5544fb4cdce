/* global process, fetch, AbortSignal */
// Container health check without curl in the image: GET the URL given (a service's /readyz or
// /healthz) and exit 0 on a 2xx answer, 1 otherwise or after 4 s.
const url = process.argv[2];
if (!url) {
  process.stderr.write('usage: node healthcheck.mjs <url>\n');
  process.exit(2);
}
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(4000) });
  process.exit(res.ok ? 0 : 1);
} catch {
  process.exit(1);
}
