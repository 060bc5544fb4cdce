import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Admin } from 'kafkajs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startTestAgent, stopTestAgents, testClient, uniqueName, type TestAgent } from '@reach/sdk/testing';
import { adminToken, urls } from '../helpers/env.js';
import { plainKafka } from '../helpers/kafka.js';
import { eventually } from '../helpers/wait.js';
import { reachCli } from '../helpers/cli.js';
import { startSdkAgent, textPart } from '../integration/a2a/sdk-agent.js';
import { registerProducer } from '../integration/ingress/producer-agent.js';

// The web console (R-F4) in a real browser — Debian's Chromium driven by playwright-core —
// against the running stack with live traffic: what the page shows must match the public APIs,
// a replay clicked on the page must replay the dead letter, and every view is kept as a
// screenshot under test-artifacts/console/.
const CONSOLE = `http://127.0.0.1:${process.env.REACH_CONSOLE_PORT ?? 7420}`;
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = join('test-artifacts', 'console');
/** Generous: the page refreshes every 2 s and the pipeline is asynchronous. */
const WAIT = { timeout: 30_000 };
const TEST_TIMEOUT = 120_000;

const cap = (what: string) => uniqueName(`console_${what}`).replace(/-/g, '_');
const client = testClient();
let browser: Browser;
let page: Page;
let admin: Admin;
let worker: TestAgent;
let workerCap: string;
let delivered: string[] = [];
const pageErrors: string[] = [];

interface ApiEvent {
  state: string;
  at: string;
  attempt: number;
  agent_id: string | null;
  detail: { chosen?: string; candidates?: Array<{ agent_id: string; score: number }> } | null;
}

async function adminGet<T>(base: string, path: string): Promise<T> {
  const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${adminToken()}` } });
  if (!res.ok) throw new Error(`GET ${path}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

async function openTab(tab: string): Promise<void> {
  await page.click(`nav a[data-tab="${tab}"]`);
  await page.waitForSelector(`#tab-${tab}:not([hidden])`, WAIT);
}

/** Sum of end offsets per topic, read with a plain kafkajs admin (not the console's code). */
async function endOffsets(topics: readonly string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const t of topics)
    out.set(
      t,
      (await admin.fetchTopicOffsets(t)).reduce((n, p) => n + Number(p.high), 0),
    );
  return out;
}

const rank: Record<string, number> = { PENDING: 0, ROUTED: 1, DELIVERING: 2, DELIVERED: 3, REJECTED: 3, DEAD: 3 };
const chronological = <T extends { at: string; attempt: number; state: string }>(xs: T[]) =>
  [...xs].sort((a, b) => Date.parse(a.at) - Date.parse(b.at) || a.attempt - b.attempt || (rank[a.state] ?? 9) - (rank[b.state] ?? 9));

/** Set when the browser or the console is missing: every test then fails with it (none is skipped). */
let setupError: Error | undefined;

async function setUp(): Promise<void> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM}: the web console is tested in a real browser. ` +
        `Run \`sh scripts/ensure-chromium.sh\` (Debian: apt-get install -y chromium) or set CHROMIUM_PATH.`,
    );
  }
  const ready = await fetch(`${CONSOLE}/readyz`).catch((err: Error) => err);
  if (ready instanceof Error || !ready.ok) {
    throw new Error(
      `the console does not answer ready on ${CONSOLE} (${ready instanceof Error ? ready.message : `HTTP ${ready.status}`}): is the stack up (\`reach up\`)?`,
    );
  }
  mkdirSync(ARTIFACTS, { recursive: true });
  admin = plainKafka().admin();
  await admin.connect();
  // Root cannot use Chromium's sandbox; the page under test is our own.
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on('pageerror', (err) => pageErrors.push(err.message));

  workerCap = cap('echo');
  worker = await startTestAgent({ handlers: { [workerCap]: async (m) => ({ echo: m.payload }) }, descriptor: { metadata: { max_concurrency: 4 } } });
  delivered = [];
  for (let i = 0; i < 3; i++) {
    const out = await client.submit({ capability: workerCap, payload: { n: i } }, { waitMs: 15_000 });
    expect(out.status).toBe('DELIVERED');
    delivered.push(out.message_id);
  }
}

beforeAll(async () => {
  await setUp().catch((err: Error) => {
    setupError = err;
  });
}, TEST_TIMEOUT);
beforeEach(() => {
  if (setupError) throw setupError;
});

afterAll(async () => {
  await stopTestAgents();
  await browser?.close();
  await admin?.disconnect();
});

describe('web console in Chromium', () => {
  it('without a token asks for it before showing agents or dead letters', { timeout: TEST_TIMEOUT }, async () => {
    // Agent listings need a token since issue #13 (docs/access-control.md).
    await page.goto(`${CONSOLE}/#agents`);
    await page.waitForSelector('#agents-table .empty', WAIT);
    expect(await page.textContent('#agents-table')).toContain('needs the admin token');
    await page.goto(`${CONSOLE}/#dlq`);
    await page.waitForSelector('#dlq-table .empty', WAIT);
    expect(await page.textContent('#dlq-table')).toContain('needs the admin token');
    // a token the services refuse is forgotten at once (no polling with it: failed
    // authentications are rate-limited per address, docs/access-control.md)
    await page.fill('#token-input', 'rt1.not.a-token');
    await page.click('#token-form button[type=submit]');
    await expect.poll(() => page.textContent('#token-state'), WAIT).toContain('token refused');
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    await page.fill('#token-input', adminToken());
    await page.click('#token-form button[type=submit]');
    await page.waitForSelector('#token-state.ok', WAIT);
    // the token lives in this tab's sessionStorage, never in the page's markup
    expect(await page.content()).not.toContain(adminToken());
  });

  it('lists the same agents as GET /v1/agents, and a new agent appears without a reload', { timeout: TEST_TIMEOUT }, async () => {
    await openTab('agents');
    const row = page.locator(`tr[data-agent-id="${worker.agentId}"]`);
    await row.waitFor(WAIT);
    const api = await eventually(
      'the page and GET /v1/agents to agree',
      async () => {
        const { agents } = (await adminGet(urls.registry, '/v1/agents')) as { agents: Array<{ agent_id: string; status: string }> };
        const shown = await page.$$eval('#agents-table tr[data-agent-id]', (rows) =>
          rows.map((r) => `${r.getAttribute('data-agent-id')}:${r.getAttribute('data-status')}`),
        );
        const want = agents.map((a) => `${a.agent_id}:${a.status}`);
        return shown.length === want.length && [...shown].sort().join() === [...want].sort().join() ? agents : undefined;
      },
      30_000,
    );
    expect(api.length).toBeGreaterThan(0);
    interface Record {
      status: string;
      qos: number;
      metadata: { domain: string; max_concurrency: number };
      load: { current_load: number };
    }
    // A heartbeat may land between reading the API and reading the page: compare until one
    // refresh of the page shows the record the API gives.
    const shownVsApi = async () => {
      const r = await adminGet<Record>(urls.registry, `/v1/agents/${encodeURIComponent(worker.agentId)}`);
      const want = [r.status, r.metadata.domain, `${r.load.current_load} / ${r.metadata.max_concurrency}`, r.qos.toFixed(3)];
      const have = [
        await row.locator('[data-col=status]').textContent(),
        await row.locator('[data-col=domain]').textContent(),
        (await row.locator('[data-col=load]').textContent())?.match(/\d+ \/ \d+/)?.[0],
        await row.locator('[data-col=qos] .num').textContent(),
      ];
      return { same: JSON.stringify(want) === JSON.stringify(have), want, have };
    };
    await expect.poll(shownVsApi, WAIT).toMatchObject({ same: true });
    expect(await row.locator('[data-col=capabilities]').textContent()).toContain(workerCap);
    expect(await row.locator('[data-col=qos] svg.spark').count()).toBe(1);

    // live: an agent registered now shows up while the page stays open
    const late = await startTestAgent({ handlers: { [workerCap]: async () => ({}) } });
    await page.locator(`tr[data-agent-id="${late.agentId}"]`).waitFor(WAIT);
    await shot('agents');
  });

  it('maps each capability to the agents that offer it', { timeout: TEST_TIMEOUT }, async () => {
    await openTab('capabilities');
    const row = page.locator(`tr[data-capability="${workerCap}"]`);
    await row.waitFor(WAIT);
    const { agents } = (await adminGet(urls.registry, `/v1/agents?capability=${workerCap}`)) as { agents: Array<{ agent_id: string }> };
    await expect
      .poll(async () => (await row.locator('[data-agent-id]').evaluateAll((els) => els.map((e) => e.getAttribute('data-agent-id')))).sort(), WAIT)
      .toEqual(agents.map((a) => a.agent_id).sort());
    await shot('capabilities');
  });

  it('shows queue depth per stage from the consumer groups, within the offsets Kafka reports around it', { timeout: TEST_TIMEOUT }, async () => {
    const topics = ['reach.ingress.v1', 'reach.pending.v1', 'reach.routed.v1', 'reach.retry.v1', 'reach.dlq.v1', 'reach.status-batches.v1'];
    const before = await endOffsets(topics);
    const t0 = Date.now();
    await openTab('pipeline');
    // a sample the console took after `before` was read
    await expect.poll(async () => Date.parse((await page.locator('#pipeline-flow').getAttribute('data-sampled-at')) ?? '') > t0, WAIT).toBe(true);
    const shown = await page.$$eval('#pipeline-table tr[data-stage]', (rows) =>
      rows.map((r) => {
        const cell = (c: string) => Number((r.querySelector(`[data-col=${c}]`)?.textContent ?? '').replace(/,/g, ''));
        return {
          stage: r.getAttribute('data-stage'),
          cells: [...r.querySelectorAll('td')].map((td) => td.textContent),
          end: cell('end'),
          committed: cell('committed'),
          lag: cell('lag'),
        };
      }),
    );
    const after = await endOffsets(topics);
    expect(shown.map((s) => s.stage)).toEqual(['ingress', 'pending', 'routed', 'retry', 'dlq', 'status']);
    const groups = ['reach-ingress', 'reach-router', 'reach-dispatcher', 'reach-retry-scheduler', 'reach-dead-letter', 'reach-tracker'];
    shown.forEach((s, i) => {
      expect(s.cells[1]).toBe(topics[i]);
      expect(s.cells[2]).toBe(groups[i]);
      expect(s.end).toBeGreaterThanOrEqual(before.get(topics[i]!)!);
      expect(s.end).toBeLessThanOrEqual(after.get(topics[i]!)!);
      expect(s.committed).toBeLessThanOrEqual(s.end);
      expect(s.lag).toBe(s.end - s.committed);
    });
    await shot('pipeline');
  });

  it('draws a delivered message as a waterfall matching GET /v1/messages/{id}/events, with the routing decision', { timeout: TEST_TIMEOUT }, async () => {
    const id = delivered[0]!;
    const { events } = await adminGet<{ events: ApiEvent[] }>(urls.ingress, `/v1/messages/${id}/events`);
    expect(events.map((e) => e.state)).toContain('DELIVERED');
    await page.goto(`${CONSOLE}/#lookup/${id}`);
    await page.locator('[data-testid=waterfall] .wf-row[data-state=DELIVERED]').waitFor(WAIT);
    const rows = await page.$$eval('[data-testid=waterfall] .wf-row', (els) =>
      els.map((e) => ({ state: e.getAttribute('data-state')!, attempt: Number(e.getAttribute('data-attempt')), at: e.getAttribute('data-at')! })),
    );
    expect(rows).toEqual(chronological(events).map((e) => ({ state: e.state, attempt: e.attempt, at: new Date(e.at).toISOString() })));
    expect(await page.locator('.lookup-head').getAttribute('data-status')).toBe('DELIVERED');

    const routed = events.find((e) => e.state === 'ROUTED')!;
    const decision = page.locator('.decision[data-state=ROUTED]');
    expect(await decision.locator('[data-field=chosen]').textContent()).toBe(routed.detail!.chosen);
    for (const c of routed.detail!.candidates!) {
      expect(await decision.locator(`tr[data-candidate="${c.agent_id}"] [data-col=score]`).textContent()).toBe(c.score.toFixed(4));
    }
    await shot('message');

    // the same message found by its trace id
    const { trace_id } = await adminGet<{ trace_id: string }>(urls.ingress, `/v1/messages/${id}`);
    await page.fill('#lookup-input', trace_id);
    await page.click('#lookup-form button[type=submit]');
    await page.locator(`.lookup-head[data-trace-id="${trace_id}"]`).waitFor(WAIT);
    await page.locator(`.trace-messages tr[data-message-id="${id}"]`).waitFor(WAIT);
    await page.locator(`[data-testid=waterfall] .wf-row[data-message-id="${id}"][data-state=DELIVERED]`).waitFor(WAIT);
    await shot('trace');
  });

  it('lists dead letters like GET /v1/dlq with filters, and a replay clicked on the page replays the entry', { timeout: TEST_TIMEOUT }, async () => {
    // Nobody offers this capability: the router parks the message as NO_ROUTE until expire_at.
    const nobody = cap('nobody');
    const sent = await client.submit({ capability: nobody, payload: { parked: true }, expire_at: Date.now() + 10 * 60_000 });
    type Entries = { entries: Array<{ dlq_id: string; message_id: string; status: string; error: string; replay_count: number }> };
    const listPath = `/v1/dlq?reason=NO_ROUTE&capability=${nobody}&limit=50`;
    const parked = await eventually(
      'the dead letter',
      async () => (await adminGet<Entries>(urls.deadLetter, listPath)).entries.find((e) => e.message_id === sent.message_id),
      30_000,
    );
    expect(parked.status).toBe('PARKED');

    await page.goto(`${CONSOLE}/#dlq`);
    await page.fill('#dlq-reason', 'NO_ROUTE');
    await page.fill('#dlq-capability', nobody);
    await page.click('#dlq-filters button[type=submit]');
    const row = page.locator(`tr[data-dlq-id="${parked.dlq_id}"]`);
    await row.waitFor(WAIT);
    // The unfiltered list shown before the filter applies may hold this recent entry too: wait
    // until the table holds exactly as many rows as the filtered API answer, then compare them.
    const expectedIds = (await adminGet<Entries>(urls.deadLetter, listPath)).entries.map((e) => e.dlq_id);
    await page
      .locator('#dlq-table tr[data-dlq-id]')
      .nth(expectedIds.length)
      .waitFor({ state: 'detached', ...WAIT });
    const shownIds = await page.$$eval('#dlq-table tr[data-dlq-id]', (rows) => rows.map((r) => r.getAttribute('data-dlq-id')));
    expect(shownIds).toEqual(expectedIds);

    // since: a time after the entry hides it; clearing it brings it back
    // (datetime-local is in the browser's time zone: let the browser format it)
    const later = await page.evaluate(
      (ms) => {
        const d = new Date(ms);
        const p = (n: number) => String(n).padStart(2, '0');
        return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
      },
      Date.now() + 2 * 60_000,
    );
    await page.fill('#dlq-since', later);
    await page.click('#dlq-filters button[type=submit]');
    await row.waitFor({ state: 'detached', ...WAIT });
    await page.fill('#dlq-since', '');
    await page.click('#dlq-filters button[type=submit]');
    await row.waitFor(WAIT);

    await row.locator('button[data-action=show]').click();
    const detail = page.locator(`#dlq-detail .detail[data-dlq-id="${parked.dlq_id}"]`);
    await detail.waitFor(WAIT);
    expect(await detail.textContent()).toContain(parked.error);
    await shot('dlq');

    await detail.locator('button[data-action=replay]').click();
    const note = page.locator('#dlq-detail [data-testid=replay-result]');
    await note.waitFor(WAIT);
    expect(await note.getAttribute('data-message-id')).toBe(sent.message_id);
    const after = await eventually(
      'the replay in the API',
      async () => {
        const e = await adminGet<{ status: string; replay_count: number }>(urls.deadLetter, `/v1/dlq/${parked.dlq_id}`);
        return e.replay_count >= 1 ? e : undefined;
      },
      30_000,
    );
    expect(after.replay_count).toBe(1);
    await page.locator(`tr[data-dlq-id="${parked.dlq_id}"] [data-col=status]`).filter({ hasText: after.status }).waitFor(WAIT);
    // the replay is a new attempt of the same message in its timeline
    await eventually(
      'attempt 1 in the timeline',
      async () => (await adminGet<{ events: ApiEvent[] }>(urls.ingress, `/v1/messages/${sent.message_id}/events`)).events.some((e) => e.attempt >= 1),
      30_000,
    );
    await shot('dlq-replayed');
  });

  it('shows the audit trail like GET /v1/audit, filtered by action (the replay above is one)', { timeout: TEST_TIMEOUT }, async () => {
    await openTab('audit');
    await page.fill('#audit-action', 'dlq.replay');
    await page.click('#audit-filters button[type=submit]');
    const { entries } = await adminGet<{ entries: Array<{ audit_id: string; action: string; actor: string; result: string }> }>(
      urls.registry,
      '/v1/audit?action=dlq.replay&limit=1',
    );
    expect(entries[0]).toMatchObject({ action: 'dlq.replay', actor: 'admin', result: 'ok' });
    const row = page.locator(`#audit-table tr[data-audit-id="${entries[0]!.audit_id}"]`);
    await row.waitFor(WAIT);
    expect(await row.getAttribute('data-action')).toBe('dlq.replay');
    expect(await row.textContent()).toContain('admin');
    await shot('audit');
  });

  it('marks an A2A agent, and shows the A2A ids next to the message id of a message it answered for an A2A client', { timeout: TEST_TIMEOUT }, async () => {
    // An A2A agent written with @a2a-js/sdk, imported by its card; an A2A client sends it a message through Agent-Reach.
    const skill = uniqueName('console-a2a');
    const a2aAgent = await startSdkAgent(skill, () => ({ kind: 'complete', parts: [textPart('done')] }));
    try {
      const imported = await reachCli(['agents', 'import-a2a', a2aAgent.cardUrl, '--agent-id', uniqueName('a2a.console'), '--json']);
      expect(imported.code, imported.stderr).toBe(0);
      const agentId = (JSON.parse(imported.stdout) as { agent_id: string }).agent_id;
      const sender = await registerProducer('console-a2a');
      const clientMessageId = uniqueName('client-msg');
      const res = await fetch(`${urls.ingress}/a2a/v1`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'A2A-Version': '1.0', authorization: `Bearer ${sender.token}` },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'SendMessage',
          params: { message: { messageId: clientMessageId, role: 'ROLE_USER', parts: [{ text: 'hi' }] }, metadata: { skill: skill.replace(/-/g, '_') } },
        }),
      });
      const task = ((await res.json()) as { result: { task: { id: string; status: { state: string } } } }).result.task;
      expect(task.status.state).toBe('TASK_STATE_COMPLETED');

      await openTab('agents');
      await page.locator(`tr[data-agent-id="${agentId}"] [data-a2a]`).waitFor(WAIT);
      expect(await page.locator(`tr[data-agent-id="${worker.agentId}"] [data-a2a]`).count()).toBe(0);

      await page.goto(`${CONSOLE}/#lookup/${task.id}`);
      await page.locator(`.lookup-head[data-message-id="${task.id}"]`).waitFor(WAIT);
      await eventually('the A2A ids in the header', async () => {
        const text = (await page.locator('.lookup-head').textContent()) ?? '';
        return text.includes(`A2A message ${clientMessageId}`) && /A2A agent task[0-9a-f-]{36}/.test(text) ? true : undefined;
      });
      await shot('a2a-message');
    } finally {
      await a2aAgent.stop();
    }
  });

  it('raised no uncaught error in the page', () => {
    expect(pageErrors).toEqual([]);
  });
});

afterEach(async (ctx) => {
  // a failing step leaves the page as it was, for whoever reads the artifacts
  if (ctx.task.result?.state === 'fail' && page)
    await page.screenshot({ path: join(ARTIFACTS, `failed-${ctx.task.name.slice(0, 40).replace(/\W+/g, '-')}.png`), fullPage: true }).catch(() => undefined);
});
