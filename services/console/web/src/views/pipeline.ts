import { byId, empty, h, pill, replace } from '../dom.js';
import { formatCount, formatRate, formatRelative } from '../format.js';
import type { Overview, StageRow } from '../types.js';
import { errorBox, sparkline, table } from './widgets.js';

export interface PipelineData {
  overview: Overview | undefined;
  /** stage → recent lag values, oldest first (kept by the page while it is open) */
  lagHistory: ReadonlyMap<string, readonly number[]>;
  now: number;
}

const STAGE_TITLES: Record<string, string> = {
  ingress: 'ingress → validated',
  pending: 'pending → routed',
  routed: 'routed → delivered',
  retry: 'retries (backoff)',
  dlq: 'dead letters → stored',
  status: 'status → read model',
};

function lagClass(s: StageRow): string {
  if (s.members === 0 && s.lag > 0) return 'bad';
  if (s.lag >= 1000) return 'bad';
  if (s.lag >= 100) return 'warn';
  return 'ok';
}

function stageCard(s: StageRow, history: readonly number[]): HTMLElement {
  return h(
    'div',
    { class: `stage ${lagClass(s)}`, 'data-stage': s.stage, 'data-lag': s.lag },
    h('div', { class: 'stage-name' }, s.stage, h('span', { class: 'sub' }, ` ${STAGE_TITLES[s.stage] ?? ''}`)),
    h('div', { class: 'stage-lag' }, h('span', { class: 'num' }, formatCount(s.lag)), h('span', { class: 'sub' }, ' waiting')),
    sparkline(history.length ? history : [s.lag], { title: `lag of ${s.stage}`, width: 150, height: 28, neutral: true }),
    h('div', { class: 'stage-rates' }, `in ${formatRate(s.produced_per_s)} · out ${formatRate(s.consumed_per_s)}`),
    h('div', { class: 'sub' }, `${s.consumer} · ${s.members} consumer${s.members === 1 ? '' : 's'} · ${s.group_state}`),
  );
}

function stageRow(s: StageRow): HTMLTableRowElement {
  return h(
    'tr',
    { 'data-stage': s.stage },
    h('td', { class: 'strong' }, s.stage),
    h('td', { class: 'mono' }, s.topic),
    h('td', { class: 'mono' }, s.group),
    h(
      'td',
      {},
      pill(s.group_state, s.group_state === 'Stable' ? 'ok' : s.group_state === 'Empty' || s.group_state === 'Dead' ? 'bad' : 'warn'),
      ` ${s.members}`,
    ),
    h('td', { class: 'num' }, s.partitions),
    h('td', { class: 'num', 'data-col': 'end' }, formatCount(s.end_offset)),
    h('td', { class: 'num', 'data-col': 'committed' }, formatCount(s.committed_offset)),
    h('td', { class: `num strong ${lagClass(s)}`, 'data-col': 'lag' }, formatCount(s.lag)),
    h('td', { class: 'num' }, formatCount(s.max_partition_lag)),
    h('td', { class: 'num' }, formatRate(s.produced_per_s)),
    h('td', { class: 'num' }, formatRate(s.consumed_per_s)),
  );
}

export function renderPipeline(data: PipelineData): void {
  const o = data.overview;
  const pipeline = o?.pipeline;
  const flow = byId('pipeline-flow');
  if (!pipeline || pipeline.stages.length === 0) {
    replace(flow, pipeline?.error ? errorBox(`Kafka offsets unavailable: ${pipeline.error}`) : empty('Reading consumer offsets…'));
    replace(byId('pipeline-table'));
  } else {
    flow.setAttribute('data-sampled-at', pipeline.at ?? '');
    replace(
      flow,
      pipeline.error
        ? errorBox(`Last read failed (${pipeline.error}); showing the sample of ${pipeline.at ? formatRelative(Date.parse(pipeline.at), data.now) : 'never'}.`)
        : null,
      pipeline.stages.map((s) => stageCard(s, data.lagHistory.get(s.stage) ?? [])),
    );
    replace(
      byId('pipeline-table'),
      table(
        [
          ['stage', ''],
          ['topic', ''],
          ['consumer group', ''],
          ['group', ''],
          ['partitions', 'num'],
          ['end offset', 'num'],
          ['committed', 'num'],
          ['lag', 'num'],
          ['max partition lag', 'num'],
          ['in', 'num'],
          ['out', 'num'],
        ],
        pipeline.stages.map(stageRow),
        'pipeline',
      ),
    );
  }
  replace(
    byId('services-table'),
    table(
      ['service', 'state', 'endpoint', 'detail'],
      (o?.services ?? []).map((s) =>
        h(
          'tr',
          { 'data-service': s.service, 'data-state': s.state },
          h('td', { class: 'strong' }, s.service),
          h('td', {}, pill(s.state, s.state === 'ready' ? 'ok' : s.state === 'starting' ? 'warn' : 'bad')),
          h('td', { class: 'mono' }, s.url),
          h('td', { class: 'sub' }, s.detail ?? ''),
        ),
      ),
      'svc-table',
    ),
  );
}
