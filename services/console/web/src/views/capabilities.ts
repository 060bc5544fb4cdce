import { capabilityIndex } from '../capabilities.js';
import { byId, empty, h, pill, replace } from '../dom.js';
import { formatPercent } from '../format.js';
import type { Agent } from '../types.js';
import { table } from './widgets.js';

export function renderCapabilities(agents: readonly Agent[]): void {
  const text = byId<HTMLInputElement>('caps-filter').value.trim().toLowerCase();
  const entries = capabilityIndex(agents).filter((e) => !text || e.capability.toLowerCase().includes(text));
  replace(
    byId('caps-table'),
    entries.length === 0
      ? empty(agents.length ? 'No capability matches the filter.' : 'No agent is registered.')
      : table(
          ['capability', 'available', 'agents (best first)'],
          entries.map((e) =>
            h(
              'tr',
              { 'data-capability': e.capability },
              h('td', { class: 'mono strong' }, e.capability),
              h('td', { class: e.available === 0 ? 'bad' : '' }, `${e.available} of ${e.agents.length}`),
              h(
                'td',
                {},
                h(
                  'div',
                  { class: 'chips' },
                  e.agents.map((a) =>
                    h(
                      'a',
                      {
                        class: 'chip agent-chip',
                        href: '#agents',
                        'data-agent-id': a.agent_id,
                        title: `QoS ${a.qos.toFixed(3)} · load ${formatPercent(a.load_rate)}`,
                      },
                      pill(a.status),
                      ' ',
                      a.agent_id,
                      h('span', { class: 'sub' }, ` ${formatPercent(a.load_rate)}`),
                    ),
                  ),
                ),
              ),
            ),
          ),
          'caps',
        ),
  );
}
