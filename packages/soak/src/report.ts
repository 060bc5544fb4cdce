import type { SoakReport } from './run.js';

const mib = (n: number | null) => (n === null ? '-' : (n / 1048576).toFixed(1));
const pad = (cells: string[], widths: number[]) => cells.map((c, i) => c.padStart(widths[i]!)).join('  ');

/** The soak's table (one row per sample) and its verdict, as `pnpm soak` prints it. */
export function soakReport(r: SoakReport): string {
  const head = ['min', 'rss MiB (sum)', 'rss max proc', 'PG MiB', 'PG idx MiB', 'Redis db MiB', 'keys', 'no TTL', 'Kafka MiB', 'lag', 'open', 'accepted'];
  const rows = r.samples.map((s) => {
    const procs = Object.entries(s.rss);
    const top = procs.reduce((a, b) => (b[1] > a[1] ? b : a), ['-', 0] as [string, number]);
    return [
      (s.atS / 60).toFixed(1),
      mib(procs.reduce((n, [, v]) => n + v, 0)),
      `${top[0]} ${mib(top[1])}`,
      mib(s.pgTotal),
      mib(s.pgIndexes),
      mib(s.redisDbBytes),
      String(s.redisKeys),
      String(s.redisKeysWithoutTtl),
      mib(s.kafkaLogBytes),
      s.consumerLag === null ? '?' : String(s.consumerLag),
      String(s.openCircuits.length),
      String(s.accepted),
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const v = r.verdict;
  const mark = (ok: boolean | null) => (ok === true ? '✔' : ok === false ? '✘' : '?');
  const opened = [...v.circuitsOpened.stable, ...v.circuitsOpened.transient];
  return [
    `soak: ${r.options.minutes} min at ${r.options.rate} msg/s, ${(r.options.failRate * 100).toFixed(1)} % handler failures; retention: messages ${r.retention.messagesS} s in partitions of ${r.retention.partitionIntervalS} s, idempotency keys ${r.retention.idempotencyTtlS} s`,
    pad(head, widths),
    ...rows.map((row) => pad(row, widths)),
    '',
    `handled ${r.handled} (failed ${r.failed}), refused ${r.refused}${
      r.refused
        ? ` (${Object.entries(r.refusals)
            .map(([k, n]) => `${k}: ${n}`)
            .join(', ')})`
        : ''
    }; retention dropped ${r.droppedPartitions} partitions and ${r.purgedRows} stray rows; oldest partition kept starts ${r.oldestKeptS === null ? '-' : `${r.oldestKeptS.toFixed(0)} s`} ago`,
    `${mark(v.notTerminal === 0 && v.checked > 0)} every message terminal: ${v.checked - v.notTerminal}/${v.checked} (${Object.entries(v.byStatus)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')})`,
    `${mark(opened.length === 0)} no healthy agent's circuit opened${opened.length ? `: opened for ${v.circuitsOpened.stable.length} stable and ${v.circuitsOpened.transient.length} transient agents (${opened.slice(0, 4).join(', ')})` : ''}`,
    `${mark(v.rss.ok)} RSS flat within 10 % after warm-up: ${v.rss.detail}`,
    `${mark(v.postgres.ok)} PostgreSQL levels off: ${v.postgres.detail}`,
    `${mark(v.redis.ok)} Redis levels off: ${v.redis.detail}`,
    v.ok ? 'verdict: PASS' : 'verdict: FAIL',
  ].join('\n');
}
