import type { Priority, SendFields } from '@reach/sdk';
import { apiClient, printJson, reportFailure, usageError } from '../api.js';
import { table } from '../output.js';

export interface SendArgs {
  capability?: string;
  topic?: string;
  agent?: string;
  payload?: string;
  type?: string;
  wait: boolean;
  waitMs?: string;
  idempotencyKey?: string;
  session?: string;
  priority?: string;
  json: boolean;
}

const DEFAULT_WAIT_MS = 30_000;

interface Copy {
  message_id: string;
  agent_id: string | null;
  status: string;
}

/** A waited-for topic publish answers with its copies, one per subscriber, each tracked under its own id. */
function printCopies(out: Readonly<Record<string, unknown>>): void {
  if (!Array.isArray(out.copies)) return;
  const copies = out.copies as Copy[];
  const total = typeof out.copies_total === 'number' ? out.copies_total : copies.length;
  process.stdout.write(`fanned out to ${total} ${total === 1 ? 'copy' : 'copies'} (reach status <copy> for each):\n`);
  if (copies.length > 0) process.stdout.write(table(copies.map((c) => ({ copy: c.message_id, agent_id: c.agent_id ?? '', status: c.status }))));
}

/**
 * `reach send --capability C | --topic T | --agent ID --payload JSON [--wait] [--json]`: submits a
 * message through the ingress HTTP API with the admin token; `--wait` waits for the handler's
 * result (`?wait_ms`) — for a topic, until it is fanned out (DELIVERED, with its copies). Exit 1
 * when the API refuses it, the wait runs out, or the message ends REJECTED/DEAD.
 */
export async function send(args: SendArgs): Promise<number> {
  const targets = [args.capability, args.topic, args.agent].filter((t) => t !== undefined);
  if (targets.length !== 1) return usageError('give exactly one of --capability, --topic, --agent');
  let payload: unknown = null;
  if (args.payload !== undefined) {
    try {
      payload = JSON.parse(args.payload);
    } catch {
      return usageError(`--payload is not JSON: ${args.payload}`);
    }
  }
  let waitMs: number | undefined;
  if (args.wait || args.waitMs !== undefined) {
    waitMs = args.waitMs === undefined ? DEFAULT_WAIT_MS : Number(args.waitMs);
    if (!Number.isInteger(waitMs) || waitMs < 0) return usageError(`--wait-ms must be a non-negative integer, got ${args.waitMs}`);
  }
  const priority = args.priority?.toUpperCase();
  if (priority !== undefined && !['HIGH', 'NORMAL', 'LOW'].includes(priority)) return usageError('--priority must be HIGH, NORMAL or LOW');
  const envelope: SendFields = {
    capability: args.capability,
    topic: args.topic,
    target_agent_id: args.agent,
    message_type: args.type ?? (args.topic ? 'event' : 'task_request'),
    payload,
    session_id: args.session,
    priority: priority as Priority | undefined,
    // A waiting sender's budget is its wait: the message's timeout says so downstream.
    timeout_ms: waitMs,
  };
  try {
    const out = await apiClient().submit(envelope, { idempotencyKey: args.idempotencyKey, waitMs });
    const { http_status: _http, ...body } = out;
    const failed = out.status === 'REJECTED' || out.status === 'DEAD' || (out.result as { status?: string } | undefined)?.status === 'error';
    if (args.json) printJson(body);
    else {
      const duplicate = out.http_status === 200 && waitMs === undefined;
      process.stdout.write(table([{ message_id: out.message_id, status: out.status, ...(duplicate ? { duplicate: 'yes (same idempotency key)' } : {}) }]));
      if (out.result !== undefined) process.stdout.write(`result: ${JSON.stringify(out.result, null, 2)}\n`);
      printCopies(out);
    }
    return failed ? 1 : 0;
  } catch (err) {
    return reportFailure(err, args.json);
  }
}
