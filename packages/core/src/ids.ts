import { monotonicFactory, decodeTime } from 'ulid';

const nextUlid = monotonicFactory();

/** `msg_` + ULID: sortable by creation time, unique without coordination (SPEC R-E1). */
export function newMessageId(now: number = Date.now()): string {
  return `msg_${nextUlid(now)}`;
}

/** A prefixed ULID for any other record (leases, connections, receipts). */
export function newId(prefix: string, now: number = Date.now()): string {
  return `${prefix}_${nextUlid(now)}`;
}

/** The creation time a message id carries, or undefined when it is not `msg_` + ULID. */
export function messageIdTime(messageId: string): number | undefined {
  const m = /^msg_([0-9A-HJKMNP-TV-Z]{26})$/.exec(messageId);
  if (!m) return undefined;
  try {
    return decodeTime(m[1]!);
  } catch {
    return undefined;
  }
}

export const MESSAGE_ID_PATTERN = /^msg_[0-9A-HJKMNP-TV-Z]{26}$/;
