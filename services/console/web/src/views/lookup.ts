import { a2aIdsOf } from '../a2a.js';
import { api, ApiError, enc, getToken } from '../api.js';
import { byId, empty, h, pill, replace } from '../dom.js';
import { formatClock, formatDuration } from '../format.js';
import type { Message, MessageEvents, Trace } from '../types.js';
import {
  layoutWaterfall,
  routingDecision,
  TERMINAL_STATES,
  type MessageTimeline,
  type RoutingDecision,
  type TimelineEvent,
  type WaterfallLayout,
  type WaterfallRow,
} from '../waterfall.js';
import { errorBox, table } from './widgets.js';

type Result = { kind: 'message'; message: Message; timeline: MessageTimeline } | { kind: 'trace'; trace: Trace; timelines: MessageTimeline[] };

/** Bars narrower than this are drawn at this width so a 1 ms hop stays visible. */
const MIN_BAR_PCT = 0.6;

/**
 * "Where is my message?": a message id or a trace id → every state of every attempt on one
 * time axis (GET /v1/messages/{id}/events, GET /v1/traces/{trace_id}), with the router's
 * decision (rule, candidates and their scores, the choice). Refreshes itself until terminal.
 */
export class LookupView {
  private id: string | undefined;
  private result: Result | undefined;
  private error: string | undefined;

  constructor(private readonly navigate: (id: string) => void) {
    byId<HTMLFormElement>('lookup-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const id = byId<HTMLInputElement>('lookup-input').value.trim();
      if (id) this.navigate(id);
    });
  }

  async lookup(id: string): Promise<void> {
    if (id !== this.id) {
      this.id = id;
      this.result = undefined;
      this.error = undefined;
      byId<HTMLInputElement>('lookup-input').value = id;
    }
    await this.refresh(true);
  }

  /** Fetches again while something is still moving (not every message terminal). */
  async refresh(force = false): Promise<void> {
    const id = this.id;
    if (!id) return this.render();
    if (!force && this.result && this.settled()) return;
    if (!getToken()) {
      this.error = 'Message and trace lookups need a token: paste the admin token at the top right.';
      return this.render();
    }
    try {
      this.result = id.startsWith('msg_') ? await this.fetchMessage(id) : await this.fetchTrace(id);
      this.error = undefined;
    } catch (err) {
      this.error =
        err instanceof ApiError ? (err.status === 404 ? `Nothing known about ${id} (yet): ${err.message}` : `${err.codeName}: ${err.message}`) : String(err);
    }
    if (id === this.id) this.render();
  }

  private settled(): boolean {
    const r = this.result;
    if (!r) return false;
    const statuses = r.kind === 'message' ? [r.message.status] : r.trace.messages.map((m) => m.status);
    return statuses.every((s) => TERMINAL_STATES.includes(s));
  }

  private async fetchMessage(id: string): Promise<Result> {
    const [message, events] = await Promise.all([
      api.get<Message>(`/api/ingress/v1/messages/${enc(id)}`),
      api.get<MessageEvents>(`/api/ingress/v1/messages/${enc(id)}/events`),
    ]);
    return { kind: 'message', message, timeline: { message_id: id, parent_message_id: message.parent_message_id, events: events.events } };
  }

  private async fetchTrace(id: string): Promise<Result> {
    const trace = await api.get<Trace>(`/api/ingress/v1/traces/${enc(id)}`);
    return {
      kind: 'trace',
      trace,
      timelines: trace.messages.map((m) => ({ message_id: m.message_id, parent_message_id: m.parent_message_id, events: m.events })),
    };
  }

  render(now = Date.now()): void {
    const root = byId('lookup-result');
    if (!this.id) {
      replace(root, empty('Paste a message id (msg_…) or a trace id to see its journey, stage by stage.'));
      return;
    }
    if (this.error) {
      replace(root, errorBox(this.error));
      return;
    }
    const r = this.result;
    if (!r) {
      replace(root, empty(`Looking up ${this.id}…`));
      return;
    }
    const timelines = r.kind === 'message' ? [r.timeline] : r.timelines;
    const layout = layoutWaterfall(timelines, now);
    replace(
      root,
      r.kind === 'message' ? messageHeader(r.message, r.timeline.events) : traceHeader(r.trace),
      attemptsStrip(layout),
      waterfall(layout, timelines.length > 1),
      decisions(layout),
      r.kind === 'message' && r.message.result !== undefined
        ? [h('h3', {}, 'Result'), h('pre', { class: 'json' }, JSON.stringify(r.message.result, null, 2))]
        : null,
    );
  }
}

function kv(pairs: Array<[string, unknown, string?]>): HTMLElement {
  return h(
    'dl',
    { class: 'kv wide' },
    pairs
      .filter(([, v]) => v !== null && v !== undefined && v !== '')
      .map(([k, v, link]) => [h('dt', {}, k), h('dd', { class: 'mono' }, link ? h('a', { href: link }, String(v)) : String(v))]),
  );
}

function messageHeader(m: Message, events: readonly TimelineEvent[]): HTMLElement {
  const a2a = a2aIdsOf(events);
  return h(
    'div',
    { class: 'lookup-head', 'data-message-id': m.message_id, 'data-status': m.status },
    h(
      'div',
      { class: 'title' },
      h('span', { class: 'mono strong' }, m.message_id),
      ' ',
      pill(m.status),
      m.code ? h('span', { class: 'code' }, ` ${m.code} ${m.name ?? ''}`) : null,
    ),
    kv([
      ['attempt', m.attempt],
      ['agent', m.agent_id],
      ['reason', m.reason],
      ['capability', m.capability],
      ['topic', m.topic],
      ['target agent', m.target_agent_id],
      ['type', m.message_type],
      ['producer', m.producer],
      // A2A ids next to the message id: the task an A2A client got (this id) and the tasks A2A agents answered with
      ['A2A task', a2a.clientMessageId ? `${m.message_id} (A2A message ${a2a.clientMessageId})` : undefined],
      ['A2A agent task', a2a.agentTaskIds.join(', ')],
      ['created', m.created_at],
      ['updated', m.updated_at],
      ['trace', m.trace_id, `#lookup/${m.trace_id}`],
      ['parent', m.parent_message_id, m.parent_message_id ? `#lookup/${m.parent_message_id}` : undefined],
    ]),
  );
}

function traceHeader(t: Trace): HTMLElement {
  return h(
    'div',
    { class: 'lookup-head', 'data-trace-id': t.trace_id },
    h(
      'div',
      { class: 'title' },
      'trace ',
      h('span', { class: 'mono strong' }, t.trace_id),
      h('span', { class: 'sub' }, ` · ${t.messages.length} message${t.messages.length === 1 ? '' : 's'}`),
    ),
    table(
      ['message', 'status', 'attempt', 'agent', 'capability / topic'],
      t.messages.map((m) =>
        h(
          'tr',
          { 'data-message-id': m.message_id },
          h('td', {}, h('a', { href: `#lookup/${m.message_id}`, class: 'mono' }, m.message_id)),
          h('td', {}, pill(m.status)),
          h('td', { class: 'num' }, m.attempt),
          h('td', { class: 'mono' }, m.agent_id ?? '–'),
          h('td', { class: 'mono' }, m.capability ?? m.topic ?? m.target_agent_id ?? '–'),
        ),
      ),
      'trace-messages',
    ),
  );
}

function attemptsStrip(layout: WaterfallLayout): HTMLElement {
  return h(
    'div',
    { class: 'attempts' },
    layout.attempts.map((a) =>
      h(
        'div',
        { class: `attempt-chip ${a.outcome === 'DELIVERED' ? 'ok' : TERMINAL_STATES.includes(a.outcome) ? 'bad' : 'warn'}`, 'data-attempt': a.attempt },
        h('span', { class: 'strong' }, `attempt ${a.attempt}`),
        ` ${a.outcome} · ${formatDuration(a.durationMs)}`,
        a.agent_id ? h('span', { class: 'sub mono' }, ` · ${a.agent_id}`) : null,
        a.code ? h('span', { class: 'sub' }, ` · code ${a.code}`) : null,
      ),
    ),
  );
}

function barFor(r: WaterfallRow): HTMLElement {
  const bar = h('div', { class: `wf-bar state-${r.state.toLowerCase()}${r.open ? ' open' : ''}${r.terminal ? ' terminal' : ''}` });
  bar.style.left = `${Math.min(r.leftPct, 100 - MIN_BAR_PCT).toFixed(3)}%`;
  bar.style.width = `${Math.max(r.widthPct, MIN_BAR_PCT).toFixed(3)}%`;
  return bar;
}

function waterfall(layout: WaterfallLayout, showMessage: boolean): HTMLElement {
  if (layout.rows.length === 0) return empty('No event recorded yet.');
  const axis = h(
    'div',
    { class: 'wf-axis' },
    layout.ticks.map((t) => {
      const tick = h('span', { class: 'wf-tick' }, formatDuration(t.ms).replace(/\.0+ s$/, ' s'));
      tick.style.left = `${t.pct.toFixed(3)}%`;
      return tick;
    }),
  );
  let lastMessage = '';
  let lastAttemptKey = '';
  const rows: HTMLElement[] = [];
  for (const r of layout.rows) {
    if (showMessage && r.message_id !== lastMessage) {
      rows.push(
        h(
          'div',
          { class: 'wf-group', 'data-message-id': r.message_id },
          '  '.repeat(r.depth),
          h('a', { href: `#lookup/${r.message_id}`, class: 'mono' }, r.message_id),
        ),
      );
      lastMessage = r.message_id;
    }
    const attemptKey = `${r.message_id}/${r.attempt}`;
    const firstOfAttempt = attemptKey !== lastAttemptKey;
    lastAttemptKey = attemptKey;
    rows.push(
      h(
        'div',
        {
          class: `wf-row${firstOfAttempt ? ' attempt-start' : ''}`,
          'data-state': r.state,
          'data-attempt': r.attempt,
          'data-at': new Date(r.at).toISOString(),
          'data-message-id': r.message_id,
        },
        h(
          'div',
          { class: 'wf-label' },
          pill(r.state),
          h('span', { class: 'sub' }, ` #${r.attempt} ${r.service}`),
          r.agent_id ? h('span', { class: 'sub mono' }, ` → ${r.agent_id}`) : null,
          r.code ? h('span', { class: 'code' }, ` ${r.code}`) : null,
        ),
        h('div', { class: 'wf-track' }, barFor(r)),
        h(
          'div',
          { class: 'wf-time', title: new Date(r.at).toISOString() },
          h('span', { class: 'num' }, `+${formatDuration(r.offsetMs)}`),
          h('span', { class: 'sub' }, ` ${formatClock(r.at)}`),
        ),
        h('div', { class: 'wf-dur num' }, r.terminal ? '■' : r.open ? `${formatDuration(r.durationMs)}…` : formatDuration(r.durationMs)),
      ),
    );
    if (r.reason) rows.push(h('div', { class: 'wf-note' }, r.reason));
  }
  return h(
    'div',
    { class: 'waterfall', 'data-testid': 'waterfall' },
    h(
      'div',
      { class: 'wf-head' },
      h('div', { class: 'wf-label' }, 'state · attempt · stage'),
      h('div', { class: 'wf-track' }, axis),
      h('div', { class: 'wf-time' }, 'since first event'),
      h('div', { class: 'wf-dur' }, 'until next'),
    ),
    rows,
    h('div', { class: 'wf-total' }, `total ${formatDuration(layout.totalMs)}`),
  );
}

function decisionPanel(r: WaterfallRow, d: RoutingDecision): HTMLElement {
  const extra = Object.entries(d.extra).filter(([, v]) => v !== undefined && v !== null);
  return h(
    'div',
    { class: 'decision', 'data-message-id': r.message_id, 'data-attempt': r.attempt, 'data-state': r.state },
    h(
      'div',
      { class: 'decision-head' },
      h('span', { class: 'strong' }, `Routing decision · attempt ${r.attempt}`),
      ` · strategy `,
      h('span', { class: 'mono', 'data-field': 'strategy' }, d.strategy),
      d.rule ? [' · rule ', h('span', { class: 'mono', 'data-field': 'rule' }, d.rule)] : null,
      ' · chose ',
      h('span', { class: 'mono strong', 'data-field': 'chosen' }, d.chosen ?? 'no agent'),
      h(
        'span',
        { class: 'sub' },
        ` · ${d.candidatesTotal} candidate${d.candidatesTotal === 1 ? '' : 's'}${d.candidatesTotal > d.candidates.length ? `, best ${d.candidates.length} listed` : ''}`,
      ),
    ),
    d.candidates.length
      ? table(
          ['', 'candidate', ['score', 'num'], ['load rate', 'num'], ['health', 'num'], ['priority', 'num'], ['locality', 'num']],
          d.candidates.map((c) =>
            h(
              'tr',
              { 'data-candidate': c.agent_id, class: c.agent_id === d.chosen ? 'chosen' : '' },
              h('td', {}, c.agent_id === d.chosen ? '✔' : c.saturated ? 'saturated' : ''),
              h('td', { class: 'mono' }, c.agent_id),
              h('td', { class: 'num', 'data-col': 'score' }, c.score.toFixed(4)),
              h('td', { class: 'num' }, c.load_rate?.toFixed(3) ?? '–'),
              h('td', { class: 'num' }, c.health?.toFixed(3) ?? '–'),
              h('td', { class: 'num' }, c.priority?.toFixed(3) ?? '–'),
              h('td', { class: 'num' }, c.locality ?? '–'),
            ),
          ),
          'candidates',
        )
      : null,
    extra.length
      ? h(
          'dl',
          { class: 'kv' },
          extra.map(([k, v]) => [h('dt', {}, k), h('dd', { class: 'mono' }, typeof v === 'object' ? JSON.stringify(v) : String(v))]),
        )
      : null,
  );
}

function decisions(layout: WaterfallLayout): HTMLElement | null {
  const panels: HTMLElement[] = [];
  const others: HTMLTableRowElement[] = [];
  for (const r of layout.rows) {
    const d = routingDecision(r.detail);
    if (d) panels.push(decisionPanel(r, d));
    else if (r.detail && typeof r.detail === 'object' && Object.keys(r.detail).length > 0) {
      others.push(
        h(
          'tr',
          { 'data-state': r.state, 'data-attempt': r.attempt },
          h('td', {}, pill(r.state), h('span', { class: 'sub' }, ` #${r.attempt} ${r.service}`)),
          h('td', { class: 'mono wrap' }, JSON.stringify(r.detail)),
        ),
      );
    }
  }
  if (!panels.length && !others.length) return null;
  return h(
    'div',
    { class: 'decisions' },
    panels.length ? h('h3', {}, 'Routing') : null,
    panels,
    others.length ? [h('h3', {}, 'Stage details'), table(['stage', 'detail'], others, 'steps')] : null,
  );
}
