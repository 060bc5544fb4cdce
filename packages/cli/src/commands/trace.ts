import { MESSAGE_ID_PATTERN } from '@reach/core';
import { apiClient, printJson, reportFailure, usageError } from '../api.js';
import { table } from '../output.js';
import { timelineRows } from './status.js';

function target(m: Record<string, unknown>): unknown {
  return m.capability ?? (m.topic ? `topic:${String(m.topic)}` : m.target_agent_id ? `agent:${String(m.target_agent_id)}` : '');
}

/**
 * `reach trace <trace_id|message_id> [--json]`: every message of a trace with its state and
 * the trace's timeline. A message id is resolved to its trace first.
 */
export async function trace(id: string | undefined, args: { json: boolean }): Promise<number> {
  if (!id) return usageError('usage: reach trace <trace_id|message_id>');
  const client = apiClient();
  try {
    let traceId = id;
    if (MESSAGE_ID_PATTERN.test(id)) {
      const state = await client.status(id);
      if (typeof state.trace_id === 'string' && state.trace_id) traceId = state.trace_id;
      else {
        const first = (await client.events(id)).find((e) => typeof e.trace_id === 'string');
        if (!first) return usageError(`message ${id} has no trace id`);
        traceId = String(first.trace_id);
      }
    }
    const body = await client.trace(traceId);
    if (args.json) {
      printJson(body);
      return 0;
    }
    process.stdout.write(`trace ${traceId}\n`);
    const messages = Array.isArray(body.messages) ? (body.messages as Array<Record<string, unknown>>) : [];
    if (messages.length > 0) {
      const rows = messages.map((m) => ({
        message_id: m.message_id,
        type: m.message_type,
        target: target(m),
        status: m.status ?? m.state,
        agent_id: m.agent_id,
        attempt: m.attempt,
        code: m.code,
        parent: m.parent_message_id,
      }));
      process.stdout.write('\nmessages\n' + table(rows, ['message_id', 'type', 'target', 'status', 'agent_id', 'attempt', 'code', 'parent']));
    }
    // The timeline: the trace's own events, or each message's events merged in time order.
    const events = Array.isArray(body.events)
      ? (body.events as Array<Record<string, unknown>>)
      : messages
          .flatMap((m) =>
            (Array.isArray(m.events) ? (m.events as Array<Record<string, unknown>>) : []).map(
              (e): Record<string, unknown> => ({ message_id: m.message_id, ...e }),
            ),
          )
          .sort((a, b) => String(a.at ?? '').localeCompare(String(b.at ?? '')));
    if (events.length > 0) {
      const t = timelineRows(events);
      const columns = t.columns.includes('message_id') ? t.columns : ['message_id', ...t.columns];
      process.stdout.write('\ntimeline\n' + table(t.rows, columns));
    }
    if (messages.length === 0 && events.length === 0) process.stdout.write('(no messages)\n');
    return 0;
  } catch (err) {
    return reportFailure(err, args.json);
  }
}
