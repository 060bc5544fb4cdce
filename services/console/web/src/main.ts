import { api, ApiError, getToken, setToken, wasTokenRefused } from './api.js';
import { byId, empty, h, replace } from './dom.js';
import { formatClock } from './format.js';
import type { Agent, Overview, QosDelta } from './types.js';
import { renderAgents } from './views/agents.js';
import { renderCapabilities } from './views/capabilities.js';
import { DlqView } from './views/dlq.js';
import { LookupView } from './views/lookup.js';
import { AuditView } from './views/audit.js';
import { renderPipeline } from './views/pipeline.js';

/**
 * The console page: five tabs over one refresh loop. Every `refresh_ms` (2 s) it reads the
 * console's overview (service readiness, queue depth per stage), the agent list and the new
 * QoS samples, then redraws the open tab — no reload, no framework.
 */
const TABS = ['agents', 'capabilities', 'pipeline', 'dlq', 'lookup', 'audit'] as const;
type Tab = (typeof TABS)[number];
/** Samples of a trend kept while the page is open (2 min at the 2 s pace). */
const KEEP = 60;

const state = {
  tab: 'agents' as Tab,
  agents: [] as Agent[],
  qos: new Map<string, Array<[number, number, number]>>(),
  qosSeq: 0,
  overview: undefined as Overview | undefined,
  lagHistory: new Map<string, number[]>(),
  lagSampledAt: null as string | null,
  refreshMs: 2000,
};

const lookup = new LookupView((id) => {
  location.hash = `#lookup/${encodeURIComponent(id)}`;
});
const dlq = new DlqView();
const audit = new AuditView();

function keepLast<T>(list: T[], n: number): void {
  if (list.length > n) list.splice(0, list.length - n);
}

function renderTab(now = Date.now()): void {
  switch (state.tab) {
    case 'agents':
      if (!getToken()) return needsToken('agents-table', 'The agent list');
      return renderAgents({ agents: state.agents, qos: state.qos, now });
    case 'capabilities':
      if (!getToken()) return needsToken('caps-table', 'The capability map');
      return renderCapabilities(state.agents);
    case 'pipeline':
      return renderPipeline({ overview: state.overview, lagHistory: state.lagHistory, now });
    case 'dlq':
      return dlq.render(now);
    case 'lookup':
      return lookup.render(now);
    case 'audit':
      return audit.render();
  }
}

/** Agent listings need a token (docs/access-control.md): without one the page asks for it. */
function needsToken(tableId: string, what: string): void {
  replace(byId(tableId), empty(`${what} needs the admin token: paste it at the top right (it stays in this browser tab only).`));
}

function renderServices(): void {
  const services = state.overview?.services ?? [];
  replace(
    byId('services'),
    services.map((s) =>
      h(
        'span',
        { class: `svc svc-${s.state}`, title: `${s.service}: ${s.state}${s.detail ? ` (${s.detail})` : ''} — ${s.url}`, 'data-service': s.service },
        s.service,
      ),
    ),
  );
}

function renderToken(): void {
  const has = getToken() !== null;
  const el = byId('token-state');
  el.textContent = has ? 'admin token set' : wasTokenRefused() ? 'token refused (401): paste a valid one' : 'no token: pipeline only';
  el.className = `token-state ${has ? 'ok' : 'warn'}`;
  byId('token-forget').hidden = !has;
}

function setLive(ok: boolean, text: string): void {
  byId('live').className = `live ${ok ? 'ok' : 'bad'}`;
  byId('live-text').textContent = text;
}

async function refresh(): Promise<void> {
  const [overview, agents, qos] = await Promise.allSettled([
    api.get<Overview>('/api/overview'),
    // Never polled without a token: a 401 every 2 s would count against this address's failed-auth budget.
    getToken() ? api.get<{ agents: Agent[] }>('/api/registry/v1/agents') : Promise.resolve({ agents: [] as Agent[] }),
    getToken() ? api.get<QosDelta>(`/api/qos-history?since=${state.qosSeq}`) : Promise.resolve({ seq: state.qosSeq, agents: {} } as QosDelta),
  ]);
  const problems: string[] = [];
  if (overview.status === 'fulfilled') {
    state.overview = overview.value;
    state.refreshMs = overview.value.refresh_ms || 2000;
    const p = overview.value.pipeline;
    if (p.at && p.at !== state.lagSampledAt) {
      state.lagSampledAt = p.at;
      for (const s of p.stages) {
        let list = state.lagHistory.get(s.stage);
        if (!list) state.lagHistory.set(s.stage, (list = []));
        list.push(s.lag);
        keepLast(list, KEEP);
      }
    }
  } else problems.push(reason(overview.reason));
  if (agents.status === 'fulfilled') {
    state.agents = agents.value.agents;
    const ids = new Set(state.agents.map((a) => a.agent_id));
    for (const id of state.qos.keys()) if (!ids.has(id)) state.qos.delete(id);
  } else problems.push(`agents: ${reason(agents.reason)}`);
  if (qos.status === 'fulfilled') {
    // A console restarted since the last poll counts from 1 again: start over.
    if (qos.value.seq < state.qosSeq) state.qos.clear();
    state.qosSeq = qos.value.seq;
    for (const [id, points] of Object.entries(qos.value.agents)) {
      let list = state.qos.get(id);
      if (!list) state.qos.set(id, (list = []));
      list.push(...points);
      keepLast(list, KEEP);
    }
  }
  if (state.tab === 'dlq') await dlq.refresh();
  if (state.tab === 'lookup') await lookup.refresh();
  if (state.tab === 'audit') await audit.refresh();
  renderServices();
  renderToken();
  renderTab();
  const now = new Date();
  setLive(problems.length === 0, problems.length ? `offline — ${problems[0]}` : `live · ${formatClock(now.getTime())}`);
  document.body.dataset.refreshedAt = now.toISOString();
}

function reason(err: unknown): string {
  return err instanceof ApiError ? `${err.codeName}: ${err.message}` : String(err);
}

async function loop(): Promise<void> {
  try {
    await refresh();
  } catch (err) {
    setLive(false, `error — ${reason(err)}`);
  }
  setTimeout(() => void loop(), state.refreshMs);
}

function route(): void {
  const hash = decodeURIComponent(location.hash.replace(/^#/, ''));
  const [name, ...rest] = hash.split('/');
  state.tab = (TABS as readonly string[]).includes(name ?? '') ? (name as Tab) : 'agents';
  for (const t of TABS) {
    byId(`tab-${t}`).hidden = t !== state.tab;
    document.querySelector(`nav a[data-tab="${t}"]`)?.setAttribute('aria-selected', String(t === state.tab));
  }
  renderTab();
  if (state.tab === 'dlq') void dlq.refresh();
  if (state.tab === 'audit') void audit.refresh();
  if (state.tab === 'lookup' && rest.length) void lookup.lookup(rest.join('/'));
}

function wireControls(): void {
  byId<HTMLFormElement>('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = byId<HTMLInputElement>('token-input');
    const token = input.value.trim();
    if (!token) return;
    setToken(token);
    input.value = '';
    renderToken();
    route();
  });
  byId('token-forget').addEventListener('click', () => {
    setToken(null);
    renderToken();
    route();
  });
  for (const id of ['agents-filter', 'agents-status', 'caps-filter']) byId(id).addEventListener('input', () => renderTab());
  window.addEventListener('hashchange', route);
}

wireControls();
renderToken();
route();
void loop();
