import type { TimelineEvent } from '@reach/sdk';
import { apiClient, printJson, reportFailure, usageError } from '../api.js';
import { table } from '../output.js';

/** The columns of a timeline, in order, that the events actually have. */
export function timelineRows(events: TimelineEvent[]): { rows: TimelineEvent[]; columns: string[] } {
  const preferred = ['at', 'state', 'attempt', 'service', 'agent_id', 'code', 'reason'];
  const columns = preferred.filter((c) => events.some((e) => e[c] !== undefined && e[c] !== null));
  return { rows: events, columns: columns.length > 0 ? columns : Object.keys(events[0] ?? {}) };
}

/** `reach status <message_id> [--json]`: a message's state and its timeline. */
export async function status(messageId: string | undefined, args: { json: boolean }): Promise<number> {
  if (!messageId) return usageError('usage: reach status <message_id>');
  const client = apiClient();
  try {
    const state = await client.status(messageId);
    if (args.json) {
      printJson(state);
      return 0;
    }
    const fields = [
      'message_id',
      'status',
      'attempt',
      'agent_id',
      'code',
      'name',
      'reason',
      'capability',
      'topic',
      'target_agent_id',
      'trace_id',
      'created_at',
      'updated_at',
    ];
    const rows = fields.filter((f) => state[f] !== undefined && state[f] !== null).map((f) => ({ field: f, value: state[f] }));
    process.stdout.write(table(rows, ['field', 'value']));
    const events = await client.events(messageId);
    if (events.length > 0) {
      const t = timelineRows(events);
      process.stdout.write('\ntimeline\n' + table(t.rows, t.columns));
    }
    return 0;
  } catch (err) {
    return reportFailure(err, args.json);
  }
}
