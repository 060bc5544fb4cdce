import type { Logger } from '@reach/core';
import { attachMemberLedger, leaveRecordedMembers, MemberLedger, type createKafka } from '@reach/kafka';

type Kafka = ReturnType<typeof createKafka>;

/**
 * At start: the members a previous run of this process recorded in `file` and never left (it was
 * killed) leave their groups now, so this run's consumers are assigned at once instead of after
 * the old sessions time out; then this run's members are recorded in the same file.
 */
export async function takeOverMemberFile(kafka: Kafka, file: string, log: Logger): Promise<void> {
  try {
    const left = await leaveRecordedMembers(file, kafka, { deadlineMs: 3_000 });
    if (left > 0) log.info({ file, members: left }, 'left the consumer groups of the previous run');
  } catch (err) {
    log.warn({ err, file }, 'could not leave the previous run’s group members; their sessions time out instead');
  }
  attachMemberLedger(kafka, new MemberLedger(file));
}
