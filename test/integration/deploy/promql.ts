import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/**
 * Helpers of the deployment tests: which metric names a PromQL expression reads, which names the
 * running services export, and the external tools (promtool, docker-compose) the tests run.
 */

/** The metric names a PromQL expression reads, and the `__name__` regexes it selects by. */
export interface MetricRefs {
  names: string[];
  patterns: string[];
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'offset', 'bool', 'inf', 'nan', 'atan2']);

/**
 * Tokenises `expr` enough to find metric names: Grafana variables, string literals, label
 * matchers, range and subquery brackets and grouping clauses are removed; what is left are
 * identifiers, of which functions and aggregations (followed by `(`) and keywords are skipped.
 */
export function metricRefs(expr: string): MetricRefs {
  const names = new Set<string>();
  const patterns = new Set<string>();
  let s = expr.replace(/#[^\n]*/g, ''); // PromQL comments
  s = s.replace(/\$\{[^}]*\}|\$__\w+|\$\w+/g, '5m'); // Grafana variables, used as durations here
  // Names selected by label: {__name__="x"} or {__name__=~"x.+"}
  for (const m of s.matchAll(/__name__\s*(=~|=)\s*(["'`])((?:\\.|(?!\2).)*)\2/g)) {
    if (m[1] === '=') names.add(m[3]!);
    else patterns.add(m[3]!);
  }
  s = s.replace(/"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`/g, '""');
  s = s.replace(/\{[^}]*\}/g, ' ');
  s = s.replace(/\[[^\]]*\]/g, ' ');
  s = s.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  for (const m of s.matchAll(/[0-9][0-9a-zA-Z_.]*|[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const token = m[0];
    if (/^[0-9]/.test(token) || KEYWORDS.has(token)) continue;
    const rest = s.slice(m.index + token.length);
    if (/^\s*\(/.test(rest)) continue; // a function, or an aggregation (its by/without clause is gone)
    names.add(token);
  }
  return { names: [...names].sort(), patterns: [...patterns].sort() };
}

/** Series Prometheus makes itself for every target rather than scraping them. */
export const SYNTHETIC_SERIES = new Set([
  'up',
  'scrape_duration_seconds',
  'scrape_samples_scraped',
  'scrape_samples_post_metric_relabeling',
  'scrape_series_added',
]);

/**
 * Every sample name a Prometheus text exposition declares: `# TYPE` lines (so a labelled
 * histogram without observations still counts, with its _bucket/_sum/_count series) and samples.
 */
export function exposedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) {
      const [, name, kind] = type as unknown as [string, string, string];
      names.add(name);
      if (kind === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
      if (kind === 'summary') for (const suffix of ['_sum', '_count']) names.add(name + suffix);
      continue;
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line);
    if (sample) names.add(sample[1]!);
  }
  return names;
}

export interface ScrapeJob {
  job: string;
  /** host:port as written in prometheus.yml (docker-compose host names). */
  target: string;
  port: number;
}

/** The scrape jobs of deploy/prometheus/prometheus.yml. */
export function scrapeJobs(file = 'deploy/prometheus/prometheus.yml'): ScrapeJob[] {
  const cfg = parse(readFileSync(file, 'utf8')) as { scrape_configs: Array<{ job_name: string; static_configs: Array<{ targets: string[] }> }> };
  return cfg.scrape_configs.flatMap((j) =>
    j.static_configs.flatMap((sc) => sc.targets.map((target) => ({ job: j.job_name, target, port: Number(target.split(':').pop()) }))),
  );
}

/**
 * Scrapes every job of prometheus.yml on the local stack (same ports, on 127.0.0.1) and returns
 * the names each exports. A target that does not answer fails: the stack runs every service.
 */
export async function scrapeLocalStack(): Promise<Map<string, Set<string>>> {
  const out = new Map<string, Set<string>>();
  for (const { job, port } of scrapeJobs()) {
    const url = `http://127.0.0.1:${port}/metrics`;
    let res: Response;
    try {
      res = await fetch(url, { signal: AbortSignal.timeout(5000) });
    } catch (err) {
      throw new Error(`${job}: GET ${url} failed (${(err as Error).message}); is the local stack up (reach up) with every service?`);
    }
    if (!res.ok) throw new Error(`${job}: GET ${url} answered ${res.status}`);
    out.set(job, exposedNames(await res.text()));
  }
  return out;
}

/** Names an expression reads that no scraped service exports (patterns: none matches). */
export function unknownMetrics(expr: string, exported: ReadonlySet<string>): string[] {
  const refs = metricRefs(expr);
  const missing = refs.names.filter((n) => !exported.has(n) && !SYNTHETIC_SERIES.has(n));
  for (const p of refs.patterns) {
    const re = new RegExp(`^(?:${p})$`);
    if (![...exported].some((n) => re.test(n))) missing.push(`{__name__=~"${p}"}`);
  }
  return missing;
}

/**
 * The path of an external tool, or an error saying how to get it: the deployment tests never
 * skip because a tool is missing (scripts/ensure-tools.sh installs both from Debian).
 */
export function requireTool(name: 'promtool' | 'docker-compose'): string {
  const pkg = name === 'promtool' ? 'prometheus' : 'docker-compose';
  try {
    return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(`${name} is missing: install Debian's ${pkg} package (sh scripts/ensure-tools.sh, run by npm test, does it as root)`);
  }
}

/** Runs a tool; resolves with its output, or throws with its output when it exits non-zero. */
export function run(cmd: string, args: readonly string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env, cwd: opts.cwd });
  } catch (err) {
    const e = err as { status?: number; stdout?: string; stderr?: string };
    throw new Error(`${cmd} ${args.join(' ')} exited ${e.status}:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}
