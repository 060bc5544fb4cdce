import { ReachError } from '@reach/core';
import { ACK_JOURNAL, ENDED_MESSAGES, type Redis } from '@reach/store';

// Unless an agent's ack of the message is in the ack journal (its DELIVERED is on its way) or
// settled late, marks the message ended — in one step with the dispatcher's take script, which
// then refuses every answer to it (the mark the stuck sweep sets for a message it declared DEAD).
// KEYS[1] ack journal  KEYS[2] acks settled late  KEYS[3] ended   ARGV now, message id → 1 marked, 0 acked
const MARK_CANCELED = `
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 or redis.call('ZSCORE', KEYS[2], ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[3], ARGV[1], ARGV[2])
return 1`;

interface MarkCommand {
  reachMarkCanceled(ackJournal: string, ackedLate: string, ended: string, now: number, messageId: string): Promise<number>;
}

/**
 * The cancel of an A2A CancelTask (docs/a2a.md), atomic with the agents' acks: either an ack
 * came first (the message is delivered: not cancelable) or the mark did, and from then on the
 * dispatcher refuses the agent's ack or result, so the message never turns DELIVERED.
 */
export class CancelMarks {
  private readonly scripts: MarkCommand;

  constructor(redis: Redis) {
    redis.defineCommand('reachMarkCanceled', { numberOfKeys: 3, lua: MARK_CANCELED });
    this.scripts = redis as unknown as MarkCommand;
  }

  /** True when the message is now marked canceled; false when an agent had already acked it. */
  async mark(messageId: string, now: number = Date.now()): Promise<boolean> {
    try {
      return (await this.scripts.reachMarkCanceled(ACK_JOURNAL.acked, ACK_JOURNAL.ackedLate, ENDED_MESSAGES, now, messageId)) === 1;
    } catch (err) {
      throw new ReachError('DEPENDENCY_UNAVAILABLE', `could not mark message ${messageId} canceled: ${(err as Error).message}`, { cause: err });
    }
  }
}
