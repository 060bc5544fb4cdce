import { isA2aAgent } from '../a2a.js';
import { h, pill, replace, empty, byId } from '../dom.js';
import { formatDuration, formatPercent, formatRelative } from '../format.js';
import type { Agent } from '../types.js';
import { card, loadBar, sparkline, table, trendArrow } from './widgets.js';

export interface AgentsData {
  agents: readonly Agent[];
  /** agent_id → [at, qos, load_rate] samples, oldest first */
  qos: ReadonlyMap<string, ReadonlyArray<[number, number, number]>>;
  now: number;
}

function matches(a: Agent, text: string): boolean {
  if (!text) return true;
  const t = text.toLowerCase();
  return (
    a.agent_id.toLowerCase().includes(t) ||
    a.agent_type.toLowerCase().includes(t) ||
    (a.metadata.domain ?? '').toLowerCase().includes(t) ||
    a.capabilities.some((c) => c.name.toLowerCase().includes(t))
  );
}

function row(a: Agent, samples: ReadonlyArray<[number, number, number]>, now: number): HTMLTableRowElement {
  const qosSeries = samples.map((s) => s[1]);
  const loadSeries = samples.map((s) => s[2]);
  const leaseMs = Date.parse(a.lease_expires_at);
  return h(
    'tr',
    { 'data-agent-id': a.agent_id, 'data-status': a.status },
    h(
      'td',
      { class: 'agent' },
      h(
        'div',
        { class: 'mono strong' },
        a.agent_id,
        isA2aAgent(a)
          ? h('span', { class: 'badge-a2a', 'data-a2a': 'true', title: 'A2A agent: reached with SendMessage, probed by the registry' }, 'A2A')
          : null,
      ),
      h('div', { class: 'sub' }, a.agent_type),
    ),
    h('td', { 'data-col': 'status' }, pill(a.status)),
    h('td', { 'data-col': 'domain' }, a.metadata.domain ?? 'default'),
    h(
      'td',
      { 'data-col': 'load', 'data-load-rate': a.load.load_rate },
      loadBar(a.load.load_rate, `${a.load.current_load} / ${a.metadata.max_concurrency} · ${formatPercent(a.load.load_rate)}`),
      loadSeries.some((v) => v > 0) ? sparkline(loadSeries, { range: [0, 1], title: 'load rate trend', width: 72, height: 14, neutral: true }) : null,
    ),
    h(
      'td',
      { 'data-col': 'qos', 'data-qos': a.qos },
      h(
        'div',
        { class: 'qos' },
        h('span', { class: 'num' }, a.qos.toFixed(3)),
        trendArrow(qosSeries),
        sparkline(qosSeries.length ? qosSeries : [a.qos], { range: [0, 1], title: `QoS over the last ${qosSeries.length} samples` }),
      ),
    ),
    h(
      'td',
      { 'data-col': 'capabilities' },
      h(
        'div',
        { class: 'chips' },
        a.capabilities.map((c) =>
          h(
            'span',
            {
              class: 'chip',
              'data-capability': c.name,
              title: `mode ${c.mode}${c.version ? ` · v${c.version}` : ''}${c.tags.length ? ` · tags ${c.tags.join(', ')}` : ''}`,
            },
            c.name,
          ),
        ),
      ),
    ),
    h(
      'td',
      { 'data-col': 'latency' },
      formatDuration(a.load.avg_latency_ms),
      h('div', { class: 'sub' }, `queue ${a.load.queue_length} · health ${a.load.health.toFixed(2)}`),
    ),
    h(
      'td',
      { 'data-col': 'lease', class: a.lease_valid ? '' : 'bad' },
      a.lease_valid ? `expires ${formatRelative(leaseMs, now)}` : 'expired',
      h('div', { class: 'sub' }, `rev ${a.revision}`),
    ),
  );
}

export function renderAgents(data: AgentsData): void {
  const text = byId<HTMLInputElement>('agents-filter').value.trim();
  const status = byId<HTMLSelectElement>('agents-status').value;
  const all = data.agents;
  const count = (s: string) => all.filter((a) => a.status === s).length;
  const capacity = all.reduce((n, a) => n + (a.status === 'OFFLINE' ? 0 : a.metadata.max_concurrency), 0);
  const inUse = all.reduce((n, a) => n + (a.status === 'OFFLINE' ? 0 : a.load.current_load), 0);
  replace(
    byId('agents-summary'),
    card('agents', all.length, `${new Set(all.flatMap((a) => a.capabilities.map((c) => c.name))).size} capabilities`),
    card('online', count('ONLINE'), undefined, 'ok'),
    card('cooldown', count('COOLDOWN'), 'QoS under the threshold', count('COOLDOWN') ? 'warn' : ''),
    card('offline', count('OFFLINE'), undefined, count('OFFLINE') ? 'bad' : ''),
    card('load', capacity ? formatPercent(inUse / capacity) : '–', `${inUse} of ${capacity} slots busy`),
  );
  const rank = (s: string) => (s === 'ONLINE' ? 0 : s === 'COOLDOWN' ? 1 : 2);
  const shown = all
    .filter((a) => (!status || a.status === status) && matches(a, text))
    .sort((x, y) => rank(x.status) - rank(y.status) || x.agent_id.localeCompare(y.agent_id));
  replace(
    byId('agents-table'),
    all.length === 0
      ? empty('No agent is registered. Start one (examples/echo-agent.ts) and it appears here within 2 s.')
      : shown.length === 0
        ? empty('No agent matches the filter.')
        : table(
            ['agent', 'status', 'domain', 'load', 'QoS · trend', 'capabilities', 'latency', 'lease'],
            shown.map((a) => row(a, data.qos.get(a.agent_id) ?? [], data.now)),
            'agents',
          ),
  );
}
