import { h, svg } from '../dom.js';
import { sparklinePath, trendOf } from '../sparkline.js';

/** A load bar: the filled part is the load rate (capped at 100 %), red past saturation. */
export function loadBar(rate: number, label: string): HTMLElement {
  const fill = h('div', { class: `bar-fill${rate >= 0.9 ? ' hot' : rate >= 0.7 ? ' warm' : ''}` });
  fill.style.width = `${Math.min(100, Math.max(0, rate * 100)).toFixed(1)}%`;
  return h('div', { class: 'bar-wrap' }, h('div', { class: 'bar' }, fill), h('span', { class: 'bar-label' }, label));
}

/** A sparkline with a trend arrow; `range` fixes the y axis (e.g. [0, 1] for QoS). */
/** `neutral` draws without the trend colour: for series where down is not bad (load, lag). */
export function sparkline(
  values: readonly number[],
  opts: { range?: [number, number]; title: string; width?: number; height?: number; neutral?: boolean },
): SVGSVGElement {
  const width = opts.width ?? 96;
  const height = opts.height ?? 24;
  const d = sparklinePath(values, { width, height, pad: 2, ...(opts.range ? { min: opts.range[0], max: opts.range[1] } : {}) });
  const trend = trendOf(values);
  return svg(
    'svg',
    {
      class: `spark ${opts.neutral ? 'spark-neutral' : `spark-${trend}`}`,
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: 'img',
      'aria-label': opts.title,
      'data-trend': trend,
    },
    svg('title', {}, opts.title),
    d ? svg('path', { d }) : null,
  );
}

export function trendArrow(values: readonly number[]): HTMLElement {
  const t = trendOf(values);
  return h('span', { class: `trend trend-${t}`, title: `trend: ${t}` }, t === 'up' ? '▲' : t === 'down' ? '▼' : '▬');
}

export function card(label: string, value: string | number, sub?: string, kind = ''): HTMLElement {
  return h(
    'div',
    { class: `card ${kind}` },
    h('div', { class: 'card-value' }, String(value)),
    h('div', { class: 'card-label' }, label),
    sub ? h('div', { class: 'card-sub' }, sub) : null,
  );
}

export function table(headers: ReadonlyArray<string | [string, string]>, rows: readonly HTMLTableRowElement[], cls = ''): HTMLTableElement {
  return h(
    'table',
    { class: `grid ${cls}` },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        headers.map((x) => (Array.isArray(x) ? h('th', { class: x[1] }, x[0]) : h('th', {}, x))),
      ),
    ),
    h('tbody', {}, rows),
  );
}

export function errorBox(message: string): HTMLElement {
  return h('div', { class: 'error-box', role: 'alert' }, message);
}
