import { describe, expect, it } from 'vitest';
import {
  A2aError,
  envelopeBodyOf,
  parseEventId,
  settledLength,
  skillsOf,
  systemCard,
  taskStateOf,
  timelineEvents,
  type TaskRow,
  type TimelineEntry,
} from '@reach/a2a';
import { validateDescriptor } from '@reach/agents';
import type { AgentRecord, Capability } from '@reach/envelope';

describe('taskStateOf: the one Agent-Reach → A2A state mapping (docs/a2a.md table)', () => {
  const rows: Array<[string, number, number | null, unknown, string]> = [
    ['PENDING', 0, null, null, 'TASK_STATE_SUBMITTED'],
    ['PENDING', 1, 3002, null, 'TASK_STATE_WORKING'],
    ['ROUTED', 0, null, null, 'TASK_STATE_WORKING'],
    ['DELIVERING', 2, null, null, 'TASK_STATE_WORKING'],
    ['DELIVERED', 0, null, { status: 'ok', payload: 1 }, 'TASK_STATE_COMPLETED'],
    ['DELIVERED', 0, null, null, 'TASK_STATE_COMPLETED'],
    ['DELIVERED', 0, null, { status: 'error', payload: 'bad input' }, 'TASK_STATE_FAILED'],
    ['REJECTED', 0, 3003, null, 'TASK_STATE_REJECTED'],
    ['REJECTED', 0, 2001, null, 'TASK_STATE_REJECTED'],
    ['REJECTED', 0, 4102, null, 'TASK_STATE_FAILED'],
    ['DEAD', 3, 3004, null, 'TASK_STATE_FAILED'],
    ['DEAD', 0, 3005, null, 'TASK_STATE_FAILED'],
    ['DEAD', 0, 3007, null, 'TASK_STATE_CANCELED'],
  ];
  it.each(rows)('%s attempt %i code %s → %s', (status, attempt, code, result, want) => {
    expect(taskStateOf({ status, attempt, code, result })).toBe(want);
  });
});

const t0 = Date.UTC(2026, 0, 1);
function entry(state: string, ms: number, extra: Partial<TimelineEntry> = {}): TimelineEntry {
  return { state, at: new Date(t0 + ms), attempt: 0, service: 's', agent_id: null, code: null, reason: null, ...extra };
}
const row: TaskRow = {
  message_id: 'msg_1',
  status: 'DELIVERED',
  attempt: 0,
  agent_id: 'a',
  code: null,
  reason: null,
  updated_at: new Date(t0 + 40),
  session_id: 'ctx-1',
  capability: 'parse_pdf',
  result: { status: 'ok', payload: { pages: 3 } },
};
const timeline = [entry('PENDING', 0), entry('ROUTED', 10), entry('DELIVERING', 20), entry('DELIVERED', 30)];

describe('the task stream from the timeline', () => {
  it('numbers events by timeline position, sends the result artifact before the final COMPLETED, and stops there', () => {
    const events = timelineEvents(row, timeline, parseEventId(undefined));
    expect(events.map((e) => e.id)).toEqual(['1', '2', '3', '4.result', '4']);
    expect(events.map((e) => e.final)).toEqual([false, false, false, false, true]);
    expect(events[3]!.event).toEqual({
      artifactUpdate: {
        taskId: 'msg_1',
        contextId: 'ctx-1',
        artifact: { artifactId: 'result', name: 'result', parts: [{ data: { pages: 3 } }] },
        lastChunk: true,
      },
    });
  });

  it('resumes after a Last-Event-ID with exactly what came after it', () => {
    expect(timelineEvents(row, timeline, parseEventId('2')).map((e) => e.id)).toEqual(['3', '4.result', '4']);
    expect(timelineEvents(row, timeline, parseEventId('4.result')).map((e) => e.id)).toEqual(['4']);
    expect(timelineEvents(row, timeline, parseEventId('4')).map((e) => e.id)).toEqual([]);
    // an id this server never gave: from the start
    expect(parseEventId('x7')).toEqual({ position: 0, sawArtifactOfNext: false });
  });

  it('shows a retry as WORKING with its attempt and the failure code in the metadata', () => {
    const retried = [entry('PENDING', 0), entry('DELIVERING', 5), entry('PENDING', 9, { attempt: 1, code: 3002, reason: 'ack timeout' })];
    const last = timelineEvents({ ...row, status: 'PENDING', attempt: 1 }, retried, parseEventId('2'))[0]!.event;
    expect(last).toMatchObject({
      statusUpdate: { status: { state: 'TASK_STATE_WORKING' }, metadata: { reach: { state: 'PENDING', attempt: 1, code: 3002, position: 3 } } },
    });
  });

  it('sends an entry only once everything up to it is older than the settling window', () => {
    expect(settledLength(timeline, t0 + 1_015, 1_000)).toBe(2);
    expect(settledLength(timeline, t0 + 5_000, 1_000)).toBe(4);
    expect(settledLength(timeline, t0, 1_000)).toBe(0);
  });
});

function capability(name: string, extra: Partial<Capability> = {}): Capability {
  return { name, version: null, mode: 'handle', tags: [], consumption: 'single', scope_json: null, constraints_json: null, ...extra };
}

describe('Agent Card skills from the registry view', () => {
  it('one skill per handled capability, tags merged, description and examples from the descriptor scope', () => {
    const agents = [
      { capabilities: [capability('parse_pdf', { tags: ['docs'], scope_json: JSON.stringify({ description: 'Parses PDFs', examples: ['{"url":"…"}'] }) })] },
      { capabilities: [capability('parse_pdf', { tags: ['fast'] }), capability('news', { mode: 'subscribe' })] },
    ] as unknown as AgentRecord[];
    expect(skillsOf(agents)).toEqual([
      {
        id: 'parse_pdf',
        name: 'parse_pdf',
        description: 'Parses PDFs',
        tags: ['docs', 'fast'],
        examples: ['{"url":"…"}'],
        inputModes: ['application/json', 'text/plain'],
        outputModes: ['application/json', 'text/plain'],
      },
    ]);
  });
  it('declares streaming, and no push notifications nor extended card (their methods answer that, docs/a2a.md)', () => {
    expect(systemCard('http://h', [], '1').capabilities).toEqual({ streaming: true, pushNotifications: false, extendedAgentCard: false });
  });
});

describe('an A2A message as an envelope', () => {
  const message = { messageId: 'm-1', contextId: 'c-1', role: 'ROLE_USER' as const, parts: [{ data: { q: 1 } }] };
  it('skill → capability, contextId → session_id, messageId → idempotency key, one data part → the payload', () => {
    expect(envelopeBodyOf({ message, metadata: { skill: 'parse_pdf' } }, undefined)).toEqual({
      capability: 'parse_pdf',
      message_type: 'task_request',
      payload: { q: 1 },
      idempotency_key: 'm-1',
      session_id: 'c-1',
      headers: { 'a2a-message-id': 'm-1', 'a2a-context-id': 'c-1' },
    });
  });
  it('a capability endpoint needs no skill, and refuses another one', () => {
    expect(envelopeBodyOf({ message }, 'parse_pdf').capability).toBe('parse_pdf');
    expect(() => envelopeBodyOf({ message, metadata: { skill: 'other' } }, 'parse_pdf')).toThrow(A2aError);
    expect(() => envelopeBodyOf({ message }, undefined)).toThrow(/name the skill/);
  });
  it('several parts travel as they are', () => {
    const parts = [{ text: 'a' }, { url: 'https://x/y.pdf' }];
    expect(envelopeBodyOf({ message: { ...message, parts }, metadata: { skill: 's' } }, undefined).payload).toEqual({ parts });
  });
  it('a message asking for push notifications is PushNotificationNotSupportedError (-32003): the card says pushNotifications: false', () => {
    const asked = { message, metadata: { skill: 's' }, configuration: { taskPushNotificationConfig: { url: 'https://hook.test/x' } } };
    expect(() => envelopeBodyOf(asked, undefined)).toThrow(A2aError);
    try {
      envelopeBodyOf(asked, undefined);
    } catch (err) {
      expect((err as A2aError).toJsonRpc()).toMatchObject({ code: -32003 });
    }
    expect(envelopeBodyOf({ message, metadata: { skill: 's' }, configuration: { returnImmediately: true } }, undefined).capability).toBe('s');
  });
});

describe('a capability’s description and examples in the descriptor', () => {
  it('are kept in its scope, where the Agent Card reads them', () => {
    const d = validateDescriptor(
      {
        agent_type: 'pdf',
        capabilities: [{ name: 'parse_pdf', scope: { access: 'read' }, description: 'Parses PDFs', examples: ['{"url":"https://x/y.pdf"}'] }],
      },
      { maxCapabilities: 10, dictionary: new Set(), defaultTtlS: 60 },
    );
    expect(d.descriptor.capabilities[0]!.scope).toEqual({ access: 'read', description: 'Parses PDFs', examples: ['{"url":"https://x/y.pdf"}'] });
    expect(() =>
      validateDescriptor(
        { agent_type: 'pdf', capabilities: [{ name: 'parse_pdf', examples: 'one' }] },
        { maxCapabilities: 10, dictionary: new Set(), defaultTtlS: 60 },
      ),
    ).toThrow(/examples/);
  });
});

describe('an A2A agent in the descriptor', () => {
  it('endpoints.a2a is its JSON-RPC URL, stored as the http endpoint of protocol a2a/1.0', () => {
    const rules = { maxCapabilities: 10, dictionary: new Set<string>(), defaultTtlS: 60 };
    const d = validateDescriptor({ agent_type: 'a2a', endpoints: { a2a: 'https://geo/a2a/v1' }, capabilities: ['route_plan'] }, rules);
    expect(d.descriptor.endpoints).toEqual({ ws: null, http: 'https://geo/a2a/v1', protocol_version: 'a2a/1.0' });
    expect(() => validateDescriptor({ agent_type: 'a2a', endpoints: { a2a: 'https://geo/a2a/v1', http: 'https://geo/push' } }, rules)).toThrow(/not both/);
  });
});
