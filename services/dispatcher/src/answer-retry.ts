import { toReachError, type Logger } from '@reach/core';

/**
 * An agent's answer (ack, reject, progress) that the dispatcher has received is not
 * dropped because Redis is away for a moment (a kill -9 and restart, a failover): refused with
 * an error frame, the agent would only log it, its delivery would pass its ack deadline while
 * Redis was away, and the retry would run the task again on another agent (`pnpm chaos
 * --faults kill-redis`). So the answer is tried again here until Redis takes it; the deadline
 * sweeper, back from the same outage, first gives answers like this one time to land
 * (deadline-sweeper.ts).
 *
 * Only DEPENDENCY_UNAVAILABLE is tried again (the store's errors); an answer Redis refuses on
 * its merits, or one still failing after ANSWER_RETRY_MS, goes back to the caller as before.
 * Each of those answers is one script in Redis, so a second try after a lost reply finds its
 * delivery gone and changes nothing. A `result` is not tried again here: it may fail after
 * producing its reply, and a second try would send the reply twice.
 */
export const ANSWER_RETRY_MS = 60_000;
const FIRST_WAIT_MS = 100;
const MAX_WAIT_MS = 1_000;

export async function untilStored<T>(what: string, fn: () => Promise<T>, log: Logger, retryForMs: number = ANSWER_RETRY_MS): Promise<T> {
  const giveUpAt = Date.now() + retryForMs;
  let wait = FIRST_WAIT_MS;
  let tries = 0;
  for (;;) {
    try {
      const out = await fn();
      if (tries > 0) log.info({ what, tries }, 'answer stored once Redis was back');
      return out;
    } catch (err) {
      if (toReachError(err).codeName !== 'DEPENDENCY_UNAVAILABLE' || Date.now() + wait > giveUpAt) throw err;
      if (tries === 0) log.warn({ err, what }, 'answer not stored (Redis away): trying again');
      tries++;
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(MAX_WAIT_MS, wait * 2);
    }
  }
}
