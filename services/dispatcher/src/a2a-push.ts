import { classifyA2aAnswer, getTaskBody, sendMessageBody, type A2aDeliveryOutcome, type A2aResult, type DeliveredMessage } from '@reach/a2a';

/**
 * A delivery to an A2A agent (docs/a2a.md): `SendMessage` with the deliver frame's message,
 * then, while the agent reports the task SUBMITTED or WORKING, `GetTask` polls — each one that
 * finds it still working extends the delivery's ack deadline, as a `progress` frame does — until
 * the task ends or the delivery is gone (answered elsewhere, failed at its deadline, canceled).
 * Runs inside HttpPusher (http-push.ts), off the consumer path, with its pool and timeout.
 */
export interface A2aExchangeDeps {
  /** POSTs one JSON-RPC body to the agent (with the push timeout); status and body text. */
  post(body: Record<string, unknown>): Promise<{ status: number; text: string }>;
  /** Extends the delivery's ack deadline; false when the delivery is no longer pending. */
  progress(): Promise<boolean>;
  /** Waits before the next poll (ms); resolves early when the pusher closes. */
  sleep(ms: number): Promise<void>;
  /** True once the pusher is closing: stop polling, the delivery stays buffered. */
  closing(): boolean;
}

/** Poll delays: soon after the send, doubling to a cap. */
const FIRST_POLL_MS = 50;
const MAX_POLL_MS = 2_000;

export type A2aPushOutcome = { kind: 'ack'; result?: A2aResult; a2aTaskId?: string } | Exclude<A2aDeliveryOutcome, { kind: 'working' } | { kind: 'ack' }>;

export function deliveredMessage(frame: string): DeliveredMessage | undefined {
  try {
    const parsed = JSON.parse(frame) as { message?: DeliveredMessage };
    return parsed.message && typeof parsed.message.message_id === 'string' ? parsed.message : undefined;
  } catch {
    return undefined;
  }
}

export async function a2aExchange(frame: string, skill: string | undefined, d: A2aExchangeDeps): Promise<A2aPushOutcome> {
  const message = deliveredMessage(frame);
  if (!message) return { kind: 'failure', reason: 'unreadable deliver frame' };
  let rpcId = 1;
  const first = await d.post(sendMessageBody(message, skill, rpcId++));
  let outcome = classifyA2aAnswer(first.status, first.text);
  let delay = FIRST_POLL_MS;
  while (outcome.kind === 'working') {
    if (d.closing()) return { kind: 'failure', reason: `A2A task ${outcome.taskId} still ${outcome.state} when the dispatcher stopped` };
    if (!(await d.progress())) return { kind: 'failure', reason: `A2A task ${outcome.taskId} still ${outcome.state}; the delivery is no longer pending` };
    await d.sleep(delay);
    delay = Math.min(delay * 2, MAX_POLL_MS);
    const polled = await d.post(getTaskBody(outcome.taskId, rpcId++));
    outcome = classifyA2aAnswer(polled.status, polled.text);
  }
  if (outcome.kind === 'ack' && outcome.taskId !== undefined)
    return { kind: 'ack', ...(outcome.result ? { result: outcome.result } : {}), a2aTaskId: outcome.taskId };
  return outcome.kind === 'ack' ? { kind: 'ack', ...(outcome.result ? { result: outcome.result } : {}) } : outcome;
}
