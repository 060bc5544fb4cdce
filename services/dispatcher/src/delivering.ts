import type { SchemaCodec } from '@reach/envelope';
import type { OutRecord } from '@reach/kafka';
import { statusRecord } from '@reach/service-kit';
import { envelopeFromMessageJson, headOf, parseHead } from './entry.js';

/** Who writes the events. */
export interface EventSource {
  codec: SchemaCodec;
  service: string;
  instance: string;
}

/** The DELIVERING event of a buffered entry (undefined if its head is unreadable). */
export function deliveringOfEntry(
  src: EventSource,
  agent: string,
  entry: string,
  detail: Record<string, unknown>,
  now: number = Date.now(),
): OutRecord | undefined {
  const head = parseHead(headOf(entry));
  if (!head) return undefined;
  return statusRecord(
    src.codec,
    {
      state: 'DELIVERING',
      envelope: envelopeFromMessageJson(head.message),
      service: src.service,
      instance: src.instance,
      attempt: head.attempt,
      agentId: agent,
      parentMessageId: head.parent,
      detail,
    },
    now,
  );
}
