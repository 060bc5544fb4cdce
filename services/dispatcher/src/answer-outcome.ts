import { HAND_BACK_CODE } from '@reach/core';

/**
 * What one answer frame does to its delivery's accounting, whichever way the agent answers
 * (R-D8; docs/protocol.md "What each answer sequence counts"). Every delivery gets exactly
 * one outcome — one status, one circuit record at most, one late count at most — however many
 * frames the agent sends about it: `ack`; `result` then `ack` (the SDKs' way); `result`
 * alone; `ack` then `result`; `reject`; an HTTP push answered with a status or a result; and
 * any of them after the ack deadline passed or repeated after a reconnect.
 *
 * The frame that takes the delivery from the replay buffer (the TAKE script, atomic) settles
 * it; what the others find tells them they are a repeat or late:
 *
 * - `pending`   the delivery was waiting for its answer: this frame ends the attempt.
 * - `awaiting_result` acked, its context kept because a result may still follow.
 * - `answered`  its outcome is already counted (answered before, or its late answer counted):
 *               the `reach:res:` key holds the ANSWERED marker.
 * - `gone`      nothing known of it: its ack deadline passed (that failure was its outcome)
 *               or it was never delivered to this agent.
 * - `ended`     declared DEAD past its budget while unanswered (the stuck sweep).
 */
export type AnswerFrame = 'ack' | 'result' | 'reject';
export type Found = 'pending' | 'awaiting_result' | 'answered' | 'gone' | 'ended';

export interface AnswerAccount {
  /**
   * What the frame produces: `delivered` the DELIVERED event (with the result for a `result`),
   * `result` the result alone (a DELIVERED event carrying it, and the correlated reply) for a
   * delivery already DELIVERED by its ack, `failed` the failure path (retry, or REJECTED 3003),
   * `none` nothing.
   */
  produces: 'delivered' | 'result' | 'failed' | 'none';
  /** What the agent's circuit records for this frame (a failure is recorded by Failures, countsAgainstAgent). */
  circuit: 'success' | 'failure' | 'none';
  /** Counted in `late_answers_total`: the first answer that finds its attempt already over. */
  late: boolean;
}

const NOTHING: AnswerAccount = { produces: 'none', circuit: 'none', late: false };
const LATE: AnswerAccount = { produces: 'none', circuit: 'none', late: true };

/** The one decision of what a frame counts; `retryable` and `agentCode` are a reject's own. */
export function answerOutcome(frame: AnswerFrame, found: Found, retryable = false, agentCode?: number | string): AnswerAccount {
  switch (found) {
    case 'pending':
      if (frame === 'reject') return { produces: 'failed', circuit: retryable && agentCode !== HAND_BACK_CODE ? 'failure' : 'none', late: false };
      return { produces: 'delivered', circuit: 'success', late: false };
    case 'awaiting_result':
      // The ack counted the delivery; only a result adds something (what it returned).
      return frame === 'result' ? { produces: 'result', circuit: 'none', late: false } : NOTHING;
    case 'answered':
      return NOTHING;
    case 'gone':
    case 'ended':
      return LATE;
  }
}

/**
 * What `reach:res:{agent}:<message_id>` holds once a delivery's outcome is counted and no
 * result can come any more (rejected, result produced, late answer counted, or a message
 * nobody answers). Not JSON, so it never reads as a context.
 */
export const ANSWERED_MARKER = '=';
/**
 * How long the marker stays: the frames that follow an answer (the SDKs' ack after a result,
 * answers re-sent after a reconnect) come within seconds; later ones count as late again.
 */
export const ANSWERED_MARKER_TTL_S = 60;
