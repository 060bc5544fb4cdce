import { api, ApiError, enc, getToken } from '../api.js';
import { byId, empty, h, pill, replace } from '../dom.js';
import { formatClock, formatRelative } from '../format.js';
import type { DeadLetter, ReplayResult } from '../types.js';
import { errorBox, table } from './widgets.js';

const PAGE = 50;

/**
 * The dead-letter queue (admin token): filtered list, one entry in full, replay one. After a
 * replay the entry shows REPLAYED, the attempt it became and a link to that message's timeline.
 */
export class DlqView {
  private entries: DeadLetter[] = [];
  private selected: DeadLetter | undefined;
  private readonly replays = new Map<string, ReplayResult>();
  private error: string | undefined;
  private busy = new Set<string>();
  /** Entries asked for: the newest PAGE, more on request (the API caps a page at 1000). */
  private limit = PAGE;
  private more = false;

  constructor() {
    byId<HTMLFormElement>('dlq-filters').addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.limit = PAGE;
      void this.refresh();
    });
    byId('dlq-reset').addEventListener('click', () => {
      for (const id of ['dlq-reason', 'dlq-status', 'dlq-capability', 'dlq-since']) byId<HTMLInputElement>(id).value = '';
      this.limit = PAGE;
      void this.refresh();
    });
  }

  /** The list query from the filter form (GET /v1/dlq, docs/design.md §3). */
  private query(): string {
    const q = new URLSearchParams({ limit: String(this.limit) });
    const reason = byId<HTMLInputElement>('dlq-reason').value.trim();
    const status = byId<HTMLSelectElement>('dlq-status').value;
    const capability = byId<HTMLInputElement>('dlq-capability').value.trim();
    const since = byId<HTMLInputElement>('dlq-since').value;
    if (reason) q.set('reason', reason);
    if (status) q.set('status', status);
    if (capability) q.set('capability', capability);
    if (since && Number.isFinite(Date.parse(since))) q.set('since', new Date(since).toISOString());
    return q.toString();
  }

  async refresh(): Promise<void> {
    if (!getToken()) {
      this.entries = [];
      this.error = undefined;
      this.render();
      return;
    }
    try {
      const res = await api.get<{ entries: DeadLetter[]; next_cursor: string | null }>(`/api/dead-letter/v1/dlq?${this.query()}`);
      this.entries = res.entries;
      this.more = res.next_cursor !== null;
      this.error = undefined;
      if (this.selected) {
        const fresh = this.entries.find((e) => e.dlq_id === this.selected!.dlq_id);
        if (fresh) this.selected = { ...this.selected, ...fresh };
      }
    } catch (err) {
      this.error = err instanceof ApiError ? `${err.codeName}: ${err.message}` : String(err);
    }
    this.render();
  }

  async show(id: string): Promise<void> {
    try {
      this.selected = await api.get<DeadLetter>(`/api/dead-letter/v1/dlq/${enc(id)}`);
    } catch (err) {
      this.error = err instanceof ApiError ? `${err.codeName}: ${err.message}` : String(err);
    }
    this.render();
  }

  async replay(id: string): Promise<void> {
    this.busy.add(id);
    this.render();
    try {
      const result = await api.post<ReplayResult>(`/api/dead-letter/v1/dlq/${enc(id)}/replay`);
      this.replays.set(id, result);
      this.error = undefined;
    } catch (err) {
      this.error = err instanceof ApiError ? `replay of ${id} refused — ${err.codeName}: ${err.message}` : String(err);
    } finally {
      this.busy.delete(id);
    }
    if (this.selected?.dlq_id === id) await this.show(id);
    await this.refresh();
  }

  private replayButton(e: DeadLetter): HTMLButtonElement {
    const can = e.replayable && e.status !== 'PURGED' && !this.busy.has(e.dlq_id);
    return h(
      'button',
      {
        type: 'button',
        class: 'small',
        'data-action': 'replay',
        disabled: !can,
        title: e.replayable ? 'send the stored envelope again, as a new attempt' : 'this entry has no envelope to replay',
        onclick: () => void this.replay(e.dlq_id),
      },
      this.busy.has(e.dlq_id) ? 'Replaying…' : 'Replay',
    );
  }

  private replayNote(id: string): HTMLElement | null {
    const r = this.replays.get(id);
    if (!r) return null;
    return h(
      'div',
      { class: 'replay-result', 'data-testid': 'replay-result', 'data-message-id': r.message_id ?? '' },
      pill(r.status, 'ok'),
      ` as attempt ${r.attempt} (replay #${r.replay_count})`,
      r.message_id ? [' of ', h('a', { href: `#lookup/${r.message_id}`, class: 'mono' }, r.message_id)] : null,
    );
  }

  private row(e: DeadLetter, now: number): HTMLTableRowElement {
    const target = e.capability ?? e.topic ?? e.target_agent_id ?? '–';
    return h(
      'tr',
      { 'data-dlq-id': e.dlq_id, 'data-status': e.status, 'data-reason': e.reason, class: this.selected?.dlq_id === e.dlq_id ? 'selected' : '' },
      h('td', { title: e.created_at }, formatRelative(Date.parse(e.created_at), now), h('div', { class: 'sub' }, formatClock(Date.parse(e.created_at)))),
      h('td', {}, pill(e.reason, 'reason'), h('div', { class: 'sub' }, `${e.code} ${e.name ?? ''}`)),
      h(
        'td',
        { 'data-col': 'status' },
        pill(e.status),
        e.replay_count ? h('div', { class: 'sub' }, `${e.replay_count} replay${e.replay_count === 1 ? '' : 's'}`) : null,
      ),
      h(
        'td',
        { class: 'wrap' },
        e.message_id ? h('a', { href: `#lookup/${e.message_id}`, class: 'mono' }, e.message_id) : '–',
        h('div', { class: 'sub mono' }, `→ ${target}`),
      ),
      h('td', { class: 'num' }, e.attempts),
      h('td', { class: 'error-text', title: e.error ?? '' }, e.error ?? ''),
      h(
        'td',
        { class: 'actions' },
        h('button', { type: 'button', class: 'small quiet', 'data-action': 'show', onclick: () => void this.show(e.dlq_id) }, 'Show'),
        this.replayButton(e),
      ),
    );
  }

  private detail(e: DeadLetter): HTMLElement {
    const fields: Array<[string, unknown]> = [
      ['message', e.message_id],
      ['trace', e.trace_id],
      ['reason', `${e.reason} · ${e.code} ${e.name ?? ''}`],
      ['service', e.service],
      ['capability', e.capability],
      ['topic', e.topic],
      ['target agent', e.target_agent_id],
      ['type', e.message_type],
      ['producer', e.producer],
      ['attempts', e.attempts],
      ['replays', e.replay_count],
      ['expires', e.expire_at],
      ['created', e.created_at],
      ['updated', e.updated_at],
      ['replayed', e.replayed_at],
    ];
    return h(
      'div',
      { class: 'detail', 'data-dlq-id': e.dlq_id },
      h(
        'div',
        { class: 'detail-head' },
        h('span', { class: 'mono strong' }, e.dlq_id),
        pill(e.status),
        this.replayButton(e),
        h('button', { type: 'button', class: 'small quiet', title: 'close', onclick: () => ((this.selected = undefined), this.render()) }, '✕'),
      ),
      this.replayNote(e.dlq_id),
      e.error ? h('p', { class: 'error-text full' }, e.error) : null,
      h(
        'dl',
        { class: 'kv' },
        fields
          .filter(([, v]) => v !== null && v !== undefined && v !== '')
          .map(([k, v]) => [
            h('dt', {}, k),
            h('dd', { class: 'mono' }, k === 'message' || k === 'trace' ? h('a', { href: `#lookup/${String(v)}` }, String(v)) : String(v)),
          ]),
      ),
      e.history?.length ? [h('h4', {}, `History (${e.history.length})`), h('pre', { class: 'json' }, JSON.stringify(e.history, null, 2))] : null,
      e.envelope ? [h('h4', {}, 'Envelope'), h('pre', { class: 'json' }, JSON.stringify(e.envelope, null, 2))] : null,
    );
  }

  render(now = Date.now()): void {
    const listEl = byId('dlq-table');
    const side = byId('dlq-detail');
    if (!getToken()) {
      replace(listEl, empty('The dead-letter queue needs the admin token: paste it at the top right (it stays in this browser tab only).'));
      replace(side);
      side.hidden = true;
      return;
    }
    replace(
      listEl,
      this.error ? errorBox(this.error) : null,
      this.entries.length === 0
        ? empty('No dead letter matches the filter.')
        : [
            h(
              'p',
              { class: 'hint' },
              `${this.entries.length} entr${this.entries.length === 1 ? 'y' : 'ies'}, newest first${this.more ? '; older ones match too' : ''}.`,
            ),
            table(
              ['when', 'reason', 'status', 'message → target', ['attempts', 'num'], 'error', ''],
              this.entries.map((e) => this.row(e, now)),
              'dlq',
            ),
            this.more && this.limit < 1000
              ? h(
                  'button',
                  { type: 'button', class: 'quiet more', onclick: () => ((this.limit = Math.min(1000, this.limit + PAGE)), void this.refresh()) },
                  'Show older entries',
                )
              : null,
          ],
    );
    // The side panel takes room only while an entry is open.
    side.hidden = !this.selected;
    listEl.parentElement?.classList.toggle('with-side', this.selected !== undefined);
    replace(side, this.selected ? this.detail(this.selected) : null);
  }
}
