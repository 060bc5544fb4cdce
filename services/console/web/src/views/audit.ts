import { api, ApiError, getToken } from '../api.js';
import { byId, empty, h, pill, replace } from '../dom.js';
import { formatClock } from '../format.js';
import { errorBox, table } from './widgets.js';

/** One row of GET /v1/audit (registry, admin). */
export interface AuditEntry {
  audit_id: string;
  at: string;
  actor: string;
  source: string | null;
  service: string;
  action: string;
  target: string | null;
  status: number;
  result: 'ok' | 'denied' | 'failed';
  detail: unknown;
}

/**
 * The audit trail of admin actions (issue #13; admin token): replays, purges, quota changes,
 * grants, revocations, agent deletions, rules reloads — who, when, what and the result —
 * newest first, filtered by action and result.
 */
export class AuditView {
  private entries: AuditEntry[] = [];
  private error: string | undefined;

  constructor() {
    byId<HTMLFormElement>('audit-filters').addEventListener('submit', (ev) => {
      ev.preventDefault();
      void this.refresh();
    });
  }

  async refresh(): Promise<void> {
    if (!getToken()) {
      this.entries = [];
      this.error = undefined;
      this.render();
      return;
    }
    const q = new URLSearchParams({ limit: '200' });
    const action = byId<HTMLInputElement>('audit-action').value.trim();
    const result = byId<HTMLSelectElement>('audit-result').value;
    if (action) q.set('action', action);
    if (result) q.set('result', result);
    try {
      this.entries = (await api.get<{ entries: AuditEntry[] }>(`/api/registry/v1/audit?${q}`)).entries;
      this.error = undefined;
    } catch (err) {
      this.error = err instanceof ApiError ? `${err.codeName}: ${err.message}` : String(err);
    }
    this.render();
  }

  render(): void {
    const el = byId('audit-table');
    if (!getToken()) return replace(el, empty('The audit trail needs the admin token: paste it at the top right (it stays in this browser tab only).'));
    if (this.error) return replace(el, errorBox(this.error));
    if (this.entries.length === 0) return replace(el, empty('No admin action recorded yet.'));
    replace(
      el,
      table(
        ['when', 'actor', 'source', 'action', 'target', 'result', 'service'],
        this.entries.map((e) =>
          h(
            'tr',
            { 'data-audit-id': e.audit_id, 'data-action': e.action, 'data-result': e.result },
            h('td', { title: e.at }, formatClock(Date.parse(e.at))),
            h('td', {}, e.actor),
            h('td', {}, e.source ?? ''),
            h('td', {}, e.action),
            h('td', { class: 'mono' }, e.target ?? ''),
            h('td', {}, pill(e.result, e.result === 'ok' ? 'ok' : e.result === 'denied' ? 'warn' : 'bad'), e.status ? ` ${e.status}` : ''),
            h('td', {}, e.service),
          ),
        ),
        'audit',
      ),
    );
  }
}
