import { A2A_CONTEXT_ID_HEADER, A2A_MESSAGE_ID_HEADER } from '@reach/core';
import { A2aError } from './errors.js';
import type { Message, Part, SendMessageRequest } from './wire.js';

/**
 * An A2A SendMessageRequest as the JSON body of an Agent-Reach envelope (the fields of
 * `POST /v1/messages`, docs/a2a.md): the skill picks the capability, `contextId` becomes
 * `session_id` (stickiness), `messageId` the idempotency key, the parts the payload.
 */

/** Headers the envelope carries so the handling agent sees the A2A ids it answers (named in @reach/core). */
export { A2A_CONTEXT_ID_HEADER, A2A_MESSAGE_ID_HEADER };

function metadataString(meta: Record<string, unknown> | undefined, ...keys: string[]): string | undefined {
  for (const k of keys) {
    const v = meta?.[k];
    if (typeof v === 'string' && v !== '') return v;
  }
  return undefined;
}

/** The capability a message is for: the endpoint's own, else `skill` (or `capability`) in the request's or the message's metadata. */
export function capabilityFor(req: SendMessageRequest, bound: string | undefined): string {
  const named = metadataString(req.metadata, 'skill', 'capability') ?? metadataString(req.message.metadata, 'skill', 'capability');
  if (bound !== undefined) {
    if (named !== undefined && named !== bound) throw new A2aError('InvalidParamsError', `this endpoint serves skill ${bound}; the message names ${named}`);
    return bound;
  }
  if (named === undefined)
    throw new A2aError('InvalidParamsError', 'name the skill: metadata.skill (a capability of the Agent Card), or use that capability\u2019s own endpoint');
  return named;
}

/** One data part → its data; one text part → its text; anything else → `{parts}` as A2A wrote them. */
export function payloadOf(parts: readonly Part[]): unknown {
  if (parts.length === 1) {
    const p = parts[0]!;
    if ('data' in p && p.data !== undefined) return p.data;
    if (typeof p.text === 'string') return p.text;
  }
  return { parts };
}

export function checkMessage(m: unknown): asserts m is Message {
  const msg = m as Partial<Message> | undefined;
  if (!msg || typeof msg !== 'object') throw new A2aError('InvalidParamsError', 'params.message is required');
  if (typeof msg.messageId !== 'string' || msg.messageId === '') throw new A2aError('InvalidParamsError', 'message.messageId is required');
  if (!Array.isArray(msg.parts) || msg.parts.length === 0) throw new A2aError('InvalidParamsError', 'message.parts must hold at least one part');
  if (msg.taskId !== undefined && msg.taskId !== '')
    // Every message is a task of its own here: no multi-turn input for a running task.
    throw new A2aError('UnsupportedOperationError', 'Agent-Reach tasks take one message: send a new message (same contextId) instead of continuing a task');
}

/**
 * A message that asks for push notifications is refused before it becomes a task: the card says
 * `pushNotifications: false`, and a client whose webhook silently never fires would wait for
 * updates that never come (docs/a2a.md: stream or poll instead).
 */
export function checkNoPushConfig(req: SendMessageRequest): void {
  const push = req.configuration?.taskPushNotificationConfig;
  if (push !== undefined && push !== null)
    throw new A2aError(
      'PushNotificationNotSupportedError',
      'push notifications are not offered (the Agent Card says pushNotifications: false): stream the task (resumable) or poll GetTask',
    );
}

/** The envelope body (as `POST /v1/messages` takes it) for an A2A message. */
export function envelopeBodyOf(req: SendMessageRequest, bound: string | undefined): Record<string, unknown> {
  checkMessage(req.message);
  checkNoPushConfig(req);
  const m = req.message;
  const headers: Record<string, string> = { [A2A_MESSAGE_ID_HEADER]: m.messageId };
  if (m.contextId) headers[A2A_CONTEXT_ID_HEADER] = m.contextId;
  return {
    capability: capabilityFor(req, bound),
    message_type: 'task_request',
    payload: payloadOf(m.parts),
    idempotency_key: m.messageId,
    ...(m.contextId ? { session_id: m.contextId } : {}),
    headers,
  };
}
