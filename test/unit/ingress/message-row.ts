import type { MessageRow } from '../../../services/ingress/dist/read-model.js';

/** A read-model row of a message just accepted (PENDING), with the fields a test cares about. */
export function messageRow(over: Partial<MessageRow> = {}): MessageRow {
  return {
    message_id: 'msg_X',
    status: 'PENDING',
    attempt: 0,
    agent_id: null,
    code: null,
    reason: null,
    updated_at: new Date(0),
    created_at: new Date(0),
    trace_id: 't',
    producer: 'p',
    message_type: 'task_request',
    capability: 'c',
    topic: null,
    target_agent_id: null,
    parent_message_id: null,
    result: null,
    ...over,
  };
}
