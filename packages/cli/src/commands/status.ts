import type { TimelineEvent } from '@reach/sdk';
import { apiClient, printJson, reportFailure, usageError } from '../api.js';
import { table } from '../output.js';

/** The columns of a timeline, in order, that the events actually have. */
export function timelineRows(events: TimelineEvent[]): { rows: TimelineEvent[]; columns: string[] } {
  const preferred = ['at', 'state', 'attempt', 'service', 'agent_id', 'code', 'reason'];
  const columns = preferred.filter((c) => events.some((e) => e[c] !== undefined && e[c] !== null));
  return { rows: events, columns: columns.length > 0 ? columns : Object.keys(events[0] ?? {}) };
}

/**
 * Why a PENDING message waits, from its state and timeline: the router parked it (2001: no agent
 * can take it; the dead-letter service redrives it when one appears) or held it (2002: every
 * candidate saturated; routed again later), with what the waiting event's detail says. Undefined
 * when it does not wait (issue #25: `reach status` of a parked message said only PENDING).
 */
export function waitingLine(state: Record<string, unknown>, events: readonly TimelineEvent[]): string | undefined {
  if (state.status !== 'PENDING' || typeof state.code !== 'number') return undefined;
  const ev = [...events].reverse().find((e) => e.state === 'PENDING' && e.code === state.code && e.attempt === state.attempt);
  const detail = (ev?.detail !== null && typeof ev?.detail === 'object' ? ev.detail : {}) as Record<string, unknown>;
  const text = (k: string) => (typeof detail[k] === 'string' ? detail[k] : undefined);
  const parts = [`${String(state.reason ?? 'waiting')} (${state.code}${state.name ? ` ${String(state.name)}` : ''})`];
  if (text('why')) parts[0] += `: ${text('why')}`;
  if (text('parked_until')) parts.push(`redriven when an agent that can take it appears, until ${text('parked_until')}`);
  if (text('not_before')) parts.push(`routed again from ${text('not_before')}`);
  return parts.join('; ');
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
    const events = await client.events(messageId);
    const waiting = waitingLine(state, events);
    if (waiting) rows.splice(rows.findIndex((r) => r.field === 'status') + 1, 0, { field: 'waiting', value: waiting });
    process.stdout.write(table(rows, ['field', 'value']));
    if (events.length > 0) {
      const t = timelineRows(events);
      process.stdout.write('\ntimeline\n' + table(t.rows, t.columns));
    }
    return 0;
  } catch (err) {
    return reportFailure(err, args.json);
  }
}
