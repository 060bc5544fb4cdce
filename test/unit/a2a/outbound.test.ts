import { describe, expect, it } from 'vitest';
import { a2aSkillOf, capabilityNameOf, classifyA2aAnswer, descriptorFromCard, isA2aAgent, partsOf, sendMessageBody } from '@reach/a2a';

const rpc = (result: unknown) => JSON.stringify({ jsonrpc: '2.0', id: 1, result });
const task = (state: string, extra: Record<string, unknown> = {}) => ({ id: 't-1', contextId: 'c', status: { state }, ...extra });

describe('an A2A agent’s answer as a delivery outcome', () => {
  it('COMPLETED is an ack with the artifact as the result (and the agent’s task id); a direct Message too', () => {
    expect(classifyA2aAnswer(200, rpc({ task: task('TASK_STATE_COMPLETED', { artifacts: [{ artifactId: 'a', parts: [{ data: { x: 1 } }] }] }) }))).toEqual({
      kind: 'ack',
      result: { status: 'ok', payload: { x: 1 } },
      taskId: 't-1',
    });
    expect(classifyA2aAnswer(200, rpc({ message: { messageId: 'm', role: 'ROLE_AGENT', parts: [{ text: 'hi' }] } }))).toEqual({
      kind: 'ack',
      result: { status: 'ok', payload: 'hi' },
    });
    // GetTask answers the Task itself
    expect(classifyA2aAnswer(200, rpc(task('TASK_STATE_COMPLETED')))).toEqual({ kind: 'ack', taskId: 't-1' });
  });
  it('FAILED, REJECTED, CANCELED and a question back are rejects (3003) with the agent’s words', () => {
    const failed = task('TASK_STATE_FAILED', { status: { state: 'TASK_STATE_FAILED', message: { parts: [{ text: 'no disk' }] } } });
    expect(classifyA2aAnswer(200, rpc({ task: failed }))).toEqual({ kind: 'reject', code: 3003, reason: 'A2A task FAILED: no disk' });
    expect(classifyA2aAnswer(200, rpc({ task: task('TASK_STATE_REJECTED') }))).toMatchObject({ kind: 'reject', code: 3003 });
    expect(classifyA2aAnswer(200, rpc({ task: task('TASK_STATE_INPUT_REQUIRED') }))).toMatchObject({ kind: 'reject', code: 3003 });
  });
  it('SUBMITTED or WORKING is still working: poll the task', () => {
    expect(classifyA2aAnswer(200, rpc({ task: task('TASK_STATE_WORKING') }))).toEqual({ kind: 'working', taskId: 't-1', state: 'TASK_STATE_WORKING' });
  });
  it('an internal error, HTTP 5xx or garbage is a failure (retried); invalid params or 4xx a reject', () => {
    expect(classifyA2aAnswer(200, JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32603, message: 'boom' } }))).toMatchObject({ kind: 'failure' });
    expect(classifyA2aAnswer(503, '')).toMatchObject({ kind: 'failure' });
    expect(classifyA2aAnswer(200, 'not json')).toMatchObject({ kind: 'failure' });
    expect(classifyA2aAnswer(200, JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'bad' } }))).toMatchObject({
      kind: 'reject',
      code: 3003,
    });
    expect(classifyA2aAnswer(404, '')).toMatchObject({ kind: 'reject', code: 3003 });
  });
});

describe('a delivery as an A2A SendMessage', () => {
  it('messageId = message id, contextId = session, the payload as parts, the skill in metadata, not blocking', () => {
    expect(sendMessageBody({ message_id: 'msg_1', session_id: 's', payload: { a: 1 } }, 'sk-1', 7)).toEqual({
      jsonrpc: '2.0',
      id: 7,
      method: 'SendMessage',
      params: {
        message: { messageId: 'msg_1', role: 'ROLE_USER', parts: [{ data: { a: 1 } }], contextId: 's' },
        configuration: { returnImmediately: true },
        metadata: { skill: 'sk-1' },
      },
    });
  });
  it('relays the parts of an A2A message as they were; bytes as raw', () => {
    const parts = [{ text: 'a' }, { url: 'https://x' }];
    expect(partsOf({ message_id: 'm', payload: { parts } })).toEqual(parts);
    expect(partsOf({ message_id: 'm', payload_b64: 'AAE=', content_type: 'application/pdf' })).toEqual([{ raw: 'AAE=', mediaType: 'application/pdf' }]);
    expect(partsOf({ message_id: 'm', payload: 'hello' })).toEqual([{ text: 'hello' }]);
  });
});

describe('importing an A2A agent from its card', () => {
  const card = {
    name: 'Geo Router',
    supportedInterfaces: [
      { url: 'https://geo/grpc', protocolBinding: 'GRPC', protocolVersion: '1.0' },
      { url: 'https://geo/a2a/v1', protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
    ],
    skills: [{ id: 'route-optimizer', name: 'Route', description: 'Plans routes', tags: ['maps', 'two words'], examples: ['from A to B'] }],
  };
  it('skills become capabilities (the skill id kept), the JSON-RPC 1.0 interface endpoints.a2a, the card URL kept for probes', () => {
    expect(descriptorFromCard(card, 'https://geo/.well-known/agent-card.json', { domain: 'partners', maxConcurrency: 4 })).toEqual({
      agent_id: 'a2a.geo-router',
      agent_type: 'a2a',
      endpoints: { a2a: 'https://geo/a2a/v1' },
      capabilities: [
        {
          name: 'route_optimizer',
          mode: 'handle',
          tags: ['maps', 'two-words'],
          scope: { a2a_skill: 'route-optimizer', description: 'Plans routes', examples: ['from A to B'] },
        },
      ],
      metadata: { domain: 'partners', max_concurrency: 4, extra: { a2a_card: 'https://geo/.well-known/agent-card.json' } },
      ttl_s: 30,
    });
  });
  it('refuses a card without a JSON-RPC 1.0 interface', () => {
    expect(() => descriptorFromCard({ ...card, supportedInterfaces: [card.supportedInterfaces[0]] }, 'u')).toThrow(/no JSON-RPC interface/);
  });
  it('names capabilities in the tag grammar and finds the skill again', () => {
    expect(capabilityNameOf('Route-Optimizer v2')).toBe('route_optimizer_v2');
    const record = {
      endpoints: { http: 'https://geo/a2a/v1', protocol_version: 'a2a/1.0' },
      capabilities: [{ name: 'route_optimizer', scope_json: '{"a2a_skill":"route-optimizer"}' }],
    };
    expect(isA2aAgent(record)).toBe(true);
    expect(a2aSkillOf(record, 'route_optimizer')).toBe('route-optimizer');
    expect(isA2aAgent({ endpoints: { http: 'https://x', protocol_version: '1' } })).toBe(false);
  });
});
