import { describe, expect, it, vi } from 'vitest';
import type { Redis } from '@reach/store';
import { EndMarks, REJOIN_MS } from '../../../services/retry-scheduler/dist/end-marks.js';

// The stuck sweep marks no message DEAD while the acks dispatchers received during a Redis
// outage may still be landing: not within REJOIN_MS of Redis answering again, whether this
// client lost it or Redis restarted (its uptime). Marked first, such an ack would be refused:
// DEAD though acked (the long chaos run, 9 messages marked 0.1 s after Redis came back).
class FakeRedis {
  uptimeS = 3600;
  down = false;
  /** How long an answer waits (a command queued while the client reconnects). */
  answerAfterMs = 0;
  marked: string[] = [];
  defineCommand(): void {}
  async info(): Promise<string> {
    if (this.down) throw new Error('connect ECONNREFUSED');
    if (this.answerAfterMs > 0) await new Promise((r) => setTimeout(r, this.answerAfterMs));
    return `# Server\r\nredis_version:7.0.15\r\nuptime_in_seconds:${this.uptimeS}\r\n`;
  }
  async reachMarkEnded(...args: Array<string | number>): Promise<string> {
    if (this.down) throw new Error('connect ECONNREFUSED');
    const ids = args.slice(6).map(String); // 4 keys, now, keep
    this.marked.push(...ids);
    return 'e'.repeat(ids.length);
  }
}

const t0 = 1_800_000_000_000;

describe('EndMarks after a Redis outage', () => {
  it('marks at once when Redis has been up and answering', async () => {
    const redis = new FakeRedis();
    const marks = new EndMarks(redis as unknown as Redis);
    expect([...(await marks.mark(['m1'], t0)).ended]).toEqual(['m1']);
  });

  it('waits REJOIN_MS after a Redis restart (its uptime)', async () => {
    const redis = new FakeRedis();
    redis.uptimeS = 2;
    const marks = new EndMarks(redis as unknown as Redis);
    await expect(marks.mark(['m1'], t0)).rejects.toMatchObject({ codeName: 'DEPENDENCY_UNAVAILABLE' });
    expect(redis.marked).toEqual([]);
    redis.uptimeS = 2 + REJOIN_MS / 1000;
    expect([...(await marks.mark(['m1'], t0 + REJOIN_MS)).ended]).toEqual(['m1']);
  });

  it('waits REJOIN_MS from the first answer after this client lost Redis', async () => {
    const redis = new FakeRedis();
    const marks = new EndMarks(redis as unknown as Redis);
    redis.down = true;
    await expect(marks.mark(['m1'], t0)).rejects.toThrow(/ECONNREFUSED/);
    redis.down = false; // back (a network cut: the uptime does not tell)
    await expect(marks.mark(['m1'], t0 + 5_000)).rejects.toMatchObject({ codeName: 'DEPENDENCY_UNAVAILABLE' });
    await expect(marks.mark(['m1'], t0 + 5_000 + REJOIN_MS - 1)).rejects.toMatchObject({ codeName: 'DEPENDENCY_UNAVAILABLE' });
    expect(redis.marked).toEqual([]);
    expect([...(await marks.mark(['m1'], t0 + 5_000 + REJOIN_MS)).ended]).toEqual(['m1']);
    // Settled: the next round marks at once.
    expect([...(await marks.mark(['m2'], t0 + 5_000 + REJOIN_MS + 1)).ended]).toEqual(['m2']);
  });

  it('counts an answer that waited for the client to reconnect as Redis coming back', async () => {
    vi.useFakeTimers({ now: t0 });
    try {
      const redis = new FakeRedis();
      redis.answerAfterMs = 4_000; // queued until a cut network came back: the uptime does not tell
      const marks = new EndMarks(redis as unknown as Redis);
      const first = marks.mark(['m1'], Date.now()).catch((e: unknown) => e);
      await vi.advanceTimersByTimeAsync(4_000);
      expect(await first).toMatchObject({ codeName: 'DEPENDENCY_UNAVAILABLE' });
      redis.answerAfterMs = 0;
      await expect(marks.mark(['m1'], Date.now())).rejects.toMatchObject({ codeName: 'DEPENDENCY_UNAVAILABLE' });
      expect(redis.marked).toEqual([]);
      await vi.advanceTimersByTimeAsync(REJOIN_MS);
      expect([...(await marks.mark(['m1'], Date.now())).ended]).toEqual(['m1']);
    } finally {
      vi.useRealTimers();
    }
  });
});
