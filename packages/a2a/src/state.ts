import { ERROR } from '@reach/core';
import type { TaskState } from './wire.js';

/**
 * The one mapping from an Agent-Reach message's lifecycle to an A2A task state (the table in
 * docs/a2a.md is this function in words; a unit test walks every row of it).
 *
 * | Agent-Reach                                   | A2A                    |
 * | --------------------------------------------- | ---------------------- |
 * | PENDING, first attempt (0)                    | TASK_STATE_SUBMITTED   |
 * | PENDING on a retry, ROUTED, DELIVERING        | TASK_STATE_WORKING     |
 * | DELIVERED (a result with status `error`)      | TASK_STATE_FAILED      |
 * | DELIVERED (otherwise; the result an artifact) | TASK_STATE_COMPLETED   |
 * | REJECTED with a refusal code (2xxx, 3003)     | TASK_STATE_REJECTED    |
 * | REJECTED with any other code                  | TASK_STATE_FAILED      |
 * | DEAD with 3007 CANCELED                       | TASK_STATE_CANCELED    |
 * | DEAD with any other code                      | TASK_STATE_FAILED      |
 */
export interface ReachOutcome {
  /** PENDING, ROUTED, DELIVERING, DELIVERED, REJECTED or DEAD. */
  readonly status: string;
  readonly attempt: number;
  readonly code: number | null;
  /** The handler's result as the read model holds it (`{status, payload, …}`), if any. */
  readonly result?: unknown;
}

/** A refusal: nobody was willing or allowed to take the work (no route, saturated, domain, the agent said no). */
function isRefusal(code: number | null): boolean {
  return code === ERROR.AGENT_REJECTED || (code !== null && code >= 2000 && code < 3000);
}

/** The status the handler gave its result (`ok` or `error`), when there is one. */
export function resultStatus(result: unknown): string | undefined {
  if (result === null || typeof result !== 'object') return undefined;
  const s = (result as { status?: unknown }).status;
  return typeof s === 'string' ? s : undefined;
}

export function taskStateOf(o: ReachOutcome): TaskState {
  switch (o.status) {
    case 'PENDING':
      return o.attempt === 0 ? 'TASK_STATE_SUBMITTED' : 'TASK_STATE_WORKING';
    case 'ROUTED':
    case 'DELIVERING':
      return 'TASK_STATE_WORKING';
    case 'DELIVERED':
      return resultStatus(o.result) === 'error' ? 'TASK_STATE_FAILED' : 'TASK_STATE_COMPLETED';
    case 'REJECTED':
      return isRefusal(o.code) ? 'TASK_STATE_REJECTED' : 'TASK_STATE_FAILED';
    case 'DEAD':
      return o.code === ERROR.CANCELED ? 'TASK_STATE_CANCELED' : 'TASK_STATE_FAILED';
    default:
      // A state this version does not know (a newer tracker): still in flight as far as A2A can tell.
      return 'TASK_STATE_WORKING';
  }
}

/** DELIVERED, REJECTED and DEAD: the message's outcome is final. */
export function isReachTerminal(status: string): boolean {
  return status === 'DELIVERED' || status === 'REJECTED' || status === 'DEAD';
}
