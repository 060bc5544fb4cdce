import type { Envelope } from '@reach/envelope';
import { FANOUT_AGENT, FANOUT_PARENT } from './hints.js';

/**
 * One tracked copy of a topic message for one subscriber (R-B8): its own message id, the
 * same content, and headers naming its parent and subscriber so that a retry of the copy goes
 * back to that subscriber instead of fanning out again. The copy keeps `topic` so the agent
 * knows which subscription it answers.
 */
export function fanoutCopy(parent: Envelope, agentId: string, copyMessageId: string): Envelope {
  return {
    ...parent,
    message_id: copyMessageId,
    headers: { ...parent.headers, [FANOUT_PARENT]: parent.message_id, [FANOUT_AGENT]: agentId },
  };
}
