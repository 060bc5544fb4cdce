import { MESSAGE_ID_PATTERN } from '@reach/core';
import { apiClient, printJson, reportFailure, usageError } from '../api.js';
import { table } from '../output.js';
import { timelineRows } from './status.js';

function target(m: Record<string, unknown>): unknown {
  return m.capability ?? (m.topic ? `topic:${String(m.topic)}` : m.target_agent_id ? `agent:${String(m.target_agent_id)}` : '');
}

type Json = Record<string, unknown>;

function arr(v: unknown): Json[] {
  return Array.isArray(v) ? (v as Json[]) : [];
}

function ms(v: unknown): string {
  return typeof v === 'number' ? `${v} ms` : '';
}

/** One message's stages in a line: `ingest 1 ms · route 2 ms · dispatch 0 ms · agent 12 ms` (`#n` = attempt n). */
export function stageLine(stages: readonly Json[]): string {
  return stages.map((s) => `${String(s.stage)}${typeof s.attempt === 'number' && s.attempt > 0 ? `#${s.attempt}` : ''} ${ms(s.duration_ms)}`).join(' · ');
}

/**
 * The trace as an indented tree of messages (the answer's `tree`: fan-out copies, replies,
 * messages sent by handlers), each with its state, elapsed time and stage durations. Pure.
 */
export function treeLines(body: Json): string[] {
  const messages = new Map(arr(body.messages).map((m) => [String(m.message_id), m]));
  const out: string[] = [];
  const walk = (node: Json, prefix: string, connector: string, childPrefix: string): void => {
    const m = messages.get(String(node.message_id)) ?? {};
    const link = node.link && node.link !== 'root' ? `(${String(node.link)}) ` : '';
    const agent = m.agent_id ? ` @ ${String(m.agent_id)}` : '';
    const parts = [
      `${link}${String(node.message_id)}`,
      `${String(m.message_type ?? '')} → ${String(target(m))}`,
      `${String(m.status ?? '')}${agent}`,
      ms(m.elapsed_ms),
    ];
    out.push(`${prefix}${connector}${parts.filter(Boolean).join('  ')}`);
    const stages = stageLine(arr(m.stages));
    const children = arr(node.children);
    if (stages) out.push(`${prefix}${childPrefix}${children.length > 0 ? '│ ' : '  '} ${stages}`);
    children.forEach((c, i) => {
      const last = i === children.length - 1;
      walk(c, prefix + childPrefix, last ? '└─ ' : '├─ ', last ? '   ' : '│  ');
    });
  };
  for (const root of arr(body.tree)) walk(root, '', '', '');
  return out;
}

/**
 * `reach trace <trace_id|message_id> [--json]`: the trace as a tree of messages with the
 * duration of each stage, every message with its state, and the trace's timeline. A message
 * id is resolved to its trace first.
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
    const tree = treeLines(body);
    if (tree.length > 0) process.stdout.write('\ntree\n' + tree.join('\n') + '\n');
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
