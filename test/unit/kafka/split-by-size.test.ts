import { describe, expect, it } from 'vitest';
import { MAX_REQUEST_BYTES, splitBySize, type OutRecord } from '@reach/kafka';

// Regression: coalescing many retries that carry 200 KiB envelopes into one produce request
// made the broker refuse it (MESSAGE_TOO_LARGE) and left the idempotent producer wedged.
// Requests are now cut at MAX_REQUEST_BYTES.
const rec = (bytes: number, topic = 't'): OutRecord => ({ topic, key: 'k', value: Buffer.alloc(bytes) });

describe('splitBySize (regression: coalesced produce request too large)', () => {
  it('keeps small records together in one request', () => {
    const parts = splitBySize(Array.from({ length: 100 }, () => rec(100)));
    expect(parts).toHaveLength(1);
    expect(parts[0]).toHaveLength(100);
  });

  it('cuts large records into requests under the limit, in order', () => {
    const records = Array.from({ length: 10 }, (_, i) => ({ ...rec(200 * 1024), key: String(i) }));
    const parts = splitBySize(records);
    expect(parts.length).toBeGreaterThan(1);
    for (const p of parts) expect(p.reduce((n, r) => n + r.value!.length, 0)).toBeLessThanOrEqual(MAX_REQUEST_BYTES);
    expect(parts.flat().map((r) => r.key)).toEqual(records.map((r) => r.key));
  });

  it('sends a record larger than the limit on its own', () => {
    const parts = splitBySize([rec(10), rec(MAX_REQUEST_BYTES + 1), rec(10)]);
    expect(parts.map((p) => p.length)).toEqual([1, 1, 1]);
  });
});
