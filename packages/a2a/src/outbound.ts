import { ERROR } from '@reach/core';
import { TERMINAL_TASK_STATES, type Part, type TaskState } from './wire.js';

/**
 * Delivery to an A2A agent (docs/a2a.md, "A2A agents as targets"): the dispatcher's deliver
 * frame as a JSON-RPC `SendMessage`, and what the agent's answer (or a later `GetTask`) means
 * for the delivery — the same outcomes HTTP push has, plus "still working".
 */

/** The envelope as a deliver frame carries it (docs/design.md §4): the fields the request needs. */
export interface DeliveredMessage {
  message_id: string;
  session_id?: string | null;
  capability?: string | null;
  content_type?: string;
  payload?: unknown;
  payload_b64?: string;
}

/** A handler's result, as HTTP push and the WebSocket `result` frame carry it. */
export interface A2aResult {
  status: 'ok' | 'error';
  payload: unknown;
  payload_b64?: string;
  content_type?: string;
}

export type A2aDeliveryOutcome =
  /** `taskId`: the agent's own id of the task that answered (none for a direct Message). */
  | { kind: 'ack'; result?: A2aResult; taskId?: string }
  | { kind: 'reject'; code: number; reason: string }
  | { kind: 'failure'; reason: string }
  /** The agent took the task and works on it: poll GetTask with this id. */
  | { kind: 'working'; taskId: string; state: TaskState };

/** A payload as A2A parts: the parts of an A2A message relayed as they were, a string as text, bytes as raw, anything else as data. */
export function partsOf(m: DeliveredMessage): Part[] {
  if (typeof m.payload_b64 === 'string') return [{ raw: m.payload_b64, ...(m.content_type ? { mediaType: m.content_type } : {}) }];
  const p = m.payload;
  if (p !== null && typeof p === 'object' && !Array.isArray(p)) {
    const parts = (p as { parts?: unknown }).parts;
    if (Array.isArray(parts) && Object.keys(p).length === 1 && parts.length > 0) return parts as Part[];
  }
  if (typeof p === 'string') return [{ text: p }];
  return [{ data: p ?? null }];
}

/** The JSON-RPC SendMessage of a delivery: messageId = our message id (a resend is the same message), contextId = the session. */
export function sendMessageBody(m: DeliveredMessage, skill: string | undefined, rpcId: string | number): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id: rpcId,
    method: 'SendMessage',
    params: {
      message: { messageId: m.message_id, role: 'ROLE_USER', parts: partsOf(m), ...(m.session_id ? { contextId: m.session_id } : {}) },
      // Not blocking: a long task must not hold the request past the push timeout (a second
      // SendMessage would start the work again); GetTask polls it, extending the ack deadline.
      configuration: { returnImmediately: true },
      ...(skill ? { metadata: { skill } } : {}),
    },
  };
}

export function getTaskBody(taskId: string, rpcId: string | number): Record<string, unknown> {
  return { jsonrpc: '2.0', id: rpcId, method: 'GetTask', params: { id: taskId } };
}

function obj(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** Parts back to a result payload: the inverse of partsOf for one part, `{parts}` for several. */
export function resultOfParts(parts: readonly Part[]): A2aResult {
  if (parts.length === 1) {
    const p = parts[0]!;
    if (typeof p.raw === 'string') return { status: 'ok', payload: null, payload_b64: p.raw, ...(p.mediaType ? { content_type: p.mediaType } : {}) };
    if (typeof p.text === 'string') return { status: 'ok', payload: p.text };
    if ('data' in p) return { status: 'ok', payload: p.data ?? null };
  }
  return { status: 'ok', payload: { parts } };
}

function textOf(message: unknown): string | undefined {
  const parts = obj(message)?.parts;
  if (!Array.isArray(parts)) return undefined;
  const texts = parts.map((p) => obj(p)?.text).filter((t): t is string => typeof t === 'string');
  return texts.length > 0 ? texts.join(' ') : undefined;
}

/** What a Task (from SendMessage or GetTask) means for the delivery. */
export function outcomeOfTask(task: Record<string, unknown>): A2aDeliveryOutcome {
  const status = obj(task.status);
  const state = (typeof status?.state === 'string' ? status.state : 'TASK_STATE_UNSPECIFIED') as TaskState;
  const why = textOf(status?.message);
  if (state === 'TASK_STATE_COMPLETED') {
    const artifacts = Array.isArray(task.artifacts) ? task.artifacts : [];
    const parts = artifacts.flatMap((a) => (Array.isArray(obj(a)?.parts) ? (obj(a)!.parts as Part[]) : []));
    // A task completed without an artifact may say its answer in the status message.
    const fromMessage = Array.isArray(obj(status?.message)?.parts) ? (obj(status!.message)!.parts as Part[]) : [];
    const answer = parts.length > 0 ? parts : fromMessage;
    const taskId = typeof task.id === 'string' && task.id !== '' ? { taskId: task.id } : {};
    return answer.length > 0 ? { kind: 'ack', result: resultOfParts(answer), ...taskId } : { kind: 'ack', ...taskId };
  }
  if (TERMINAL_TASK_STATES.has(state))
    return { kind: 'reject', code: ERROR.AGENT_REJECTED, reason: `A2A task ${state.replace('TASK_STATE_', '')}${why ? `: ${why}` : ''}` };
  if (state === 'TASK_STATE_INPUT_REQUIRED' || state === 'TASK_STATE_AUTH_REQUIRED')
    // Agent-Reach relays one message per task: it cannot answer a question the agent asks back.
    return {
      kind: 'reject',
      code: ERROR.AGENT_REJECTED,
      reason: `A2A task ${state.replace('TASK_STATE_', '')} (one message per task here)${why ? `: ${why}` : ''}`,
    };
  const id = typeof task.id === 'string' ? task.id : '';
  if (id === '') return { kind: 'failure', reason: 'the A2A agent answered a task without an id' };
  return { kind: 'working', taskId: id, state };
}

/**
 * What an A2A agent's HTTP answer to SendMessage or GetTask means (pure): a Task by its state;
 * a direct Message as the result; a JSON-RPC error the agent's refusal (invalid params, not
 * supported) or, for an internal error, a failure that is retried; HTTP 5xx, a timeout or an
 * unreadable body a failure; another HTTP 4xx a refusal.
 */
export function classifyA2aAnswer(statusCode: number, bodyText: string): A2aDeliveryOutcome {
  let body: Record<string, unknown> | undefined;
  try {
    body = obj(JSON.parse(bodyText));
  } catch {
    body = undefined;
  }
  const error = obj(body?.error);
  if (error) {
    const code = typeof error.code === 'number' ? error.code : 0;
    const message = typeof error.message === 'string' ? error.message : 'error';
    // -32603 internal, and anything in the server-error range that is not an A2A refusal: try again later.
    if (code === -32603 || (code <= -32000 && code >= -32099 && code !== -32001 && code !== -32002 && code !== -32004 && code !== -32005 && code !== -32009))
      return { kind: 'failure', reason: `A2A error ${code}: ${message}` };
    return { kind: 'reject', code: ERROR.AGENT_REJECTED, reason: `A2A error ${code}: ${message}` };
  }
  if (statusCode >= 500) return { kind: 'failure', reason: `HTTP ${statusCode}` };
  if (statusCode >= 400) return { kind: 'reject', code: ERROR.AGENT_REJECTED, reason: `HTTP ${statusCode}` };
  const result = obj(body?.result);
  if (!result) return { kind: 'failure', reason: 'the A2A agent answered without a JSON-RPC result' };
  // SendMessage answers {task} or {message}; GetTask answers the Task itself.
  const message = obj(result.message);
  if (message && Array.isArray(message.parts)) return { kind: 'ack', result: resultOfParts(message.parts as Part[]) };
  const task = obj(result.task) ?? (obj(result.status) ? result : undefined);
  if (task) return outcomeOfTask(task);
  return { kind: 'failure', reason: 'the A2A agent answered neither a task nor a message' };
}

/**
 * An imported A2A agent (docs/a2a.md): its record's `http` endpoint is its JSON-RPC URL and
 * `protocol_version` says A2A (`a2a/1.0`; no schema change: the descriptor's `endpoints.a2a` is
 * stored that way, @reach/agents A2A_ENDPOINT_VERSION).
 */
export function isA2aAgent(record: { endpoints: { protocol_version: string; http: string | null } }): boolean {
  return record.endpoints.http !== null && record.endpoints.protocol_version.startsWith('a2a/');
}

/** The skill id the agent's card gave a capability (kept in the capability's scope as `a2a_skill`), else the capability name. */
export function a2aSkillOf(
  record: { capabilities: ReadonlyArray<{ name: string; scope_json: string | null }> },
  capability: string | undefined,
): string | undefined {
  if (capability === undefined) return undefined;
  const c = record.capabilities.find((x) => x.name === capability);
  try {
    const scope = c?.scope_json ? (JSON.parse(c.scope_json) as { a2a_skill?: unknown }) : undefined;
    if (typeof scope?.a2a_skill === 'string') return scope.a2a_skill;
  } catch {
    // an unreadable scope names no skill
  }
  return capability;
}

/** What `reach agents import-a2a` sets that the card does not say. */
export interface ImportOptions {
  agentId?: string | undefined;
  domain?: string | undefined;
  maxConcurrency?: number | undefined;
  /** Lease TTL (s): the registry's probes renew it, so several probe intervals (default 30 s, probes every 10 s). */
  ttlS?: number | undefined;
}

/** A skill id as a capability name of the tag grammar: lowercase letters, digits, `_` and `:`. */
export function capabilityNameOf(skillId: string): string {
  const name = skillId
    .toLowerCase()
    .replace(/[^a-z0-9_:]+/g, '_')
    .replace(/_+/g, '_')
    .replace(/^_|_$/g, '');
  return name === '' ? 'skill' : name;
}

/** An agent id from the card's name: `a2a.<name>` in the registry's id alphabet. */
function agentIdOf(name: string): string {
  const slug = name
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return `a2a.${slug === '' ? 'agent' : slug}`.slice(0, 128);
}

/**
 * The capability descriptor (R-A1, as `POST /v1/agents` takes it) of an A2A agent from its
 * Agent Card: its JSON-RPC 1.0 interface as `endpoints.a2a`, each skill a capability (the skill
 * id kept in the scope as `a2a_skill`, with its description and examples), the card's URL in
 * `metadata.extra.a2a_card` for the registry's probes. Throws when the card has no JSON-RPC 1.0
 * interface (the only binding the dispatcher speaks).
 */
export function descriptorFromCard(card: unknown, cardUrl: string, o: ImportOptions = {}): Record<string, unknown> {
  const c = obj(card);
  if (!c || !Array.isArray(c.skills)) throw new Error(`${cardUrl} is not an Agent Card (no skills)`);
  const interfaces = Array.isArray(c.supportedInterfaces) ? c.supportedInterfaces.map(obj) : [];
  const rpc = interfaces.find((i) => i?.protocolBinding === 'JSONRPC' && typeof i.protocolVersion === 'string' && /^1\.0(\.|$)/.test(i.protocolVersion));
  if (!rpc || typeof rpc.url !== 'string') throw new Error(`${cardUrl} declares no JSON-RPC interface of A2A 1.0`);
  const capabilities = (c.skills as unknown[]).map(obj).flatMap((s) => {
    if (!s || typeof s.id !== 'string') return [];
    const tags = Array.isArray(s.tags)
      ? s.tags
          .filter((t): t is string => typeof t === 'string')
          .map((t) => t.replace(/[\s,]+/g, '-').slice(0, 64))
          .filter((t) => t !== '')
      : [];
    const scope: Record<string, unknown> = { a2a_skill: s.id };
    if (typeof s.description === 'string') scope.description = s.description;
    if (Array.isArray(s.examples)) scope.examples = s.examples.filter((e): e is string => typeof e === 'string');
    return [{ name: capabilityNameOf(s.id), mode: 'handle', tags, scope }];
  });
  return {
    agent_id: o.agentId ?? agentIdOf(typeof c.name === 'string' ? c.name : 'agent'),
    agent_type: 'a2a',
    endpoints: { a2a: rpc.url },
    capabilities,
    metadata: { ...(o.domain ? { domain: o.domain } : {}), ...(o.maxConcurrency ? { max_concurrency: o.maxConcurrency } : {}), extra: { a2a_card: cardUrl } },
    ttl_s: o.ttlS ?? 30,
  };
}
