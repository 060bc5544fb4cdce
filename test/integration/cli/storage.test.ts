import { describe, expect, it } from 'vitest';
import { reachCli } from '../../helpers/cli.js';

// Issue 26: `reach storage` shows what the stack keeps — PostgreSQL tables with their sizes and
// the oldest data kept, Redis memory and keys (by family with --keys), Kafka records.
interface Report {
  postgres: Array<{ table: string; totalBytes: number; indexBytes: number; partitions: number; oldest: string | null }>;
  redis: { usedMemory: number; keys: number; patterns?: Array<{ pattern: string; keys: number; bytes: number; withoutTtl: number }> };
  kafka: { logBytes: number | null; records: Record<string, number> } | { error: string };
}

describe('reach storage', () => {
  it('reports every table with its partitions and oldest day, Redis key families and Kafka records', async () => {
    const res = await reachCli(['storage', '--json', '--keys']);
    expect(res.code, res.stderr).toBe(0);
    const r = JSON.parse(res.stdout) as Report;
    const table = (name: string) => r.postgres.find((t) => t.table === name);
    expect(table('messages')).toMatchObject({ partitions: expect.any(Number) });
    expect(table('messages')!.partitions).toBeGreaterThanOrEqual(4); // today and three ahead
    expect(Date.parse(table('messages')!.oldest!)).toBeLessThanOrEqual(Date.now());
    for (const t of ['message_events', 'dead_letters', 'audit_log', 'idempotency_keys']) expect(table(t), t).toBeDefined();
    expect(r.redis.usedMemory).toBeGreaterThan(0);
    // the dispatchers' liveness set is there as long as a dispatcher runs; it has no TTL (an owner)
    expect(r.redis.patterns!.find((p) => p.pattern === 'reach:dispatchers')).toMatchObject({ keys: 1, withoutTtl: 1 });
    expect('records' in r.kafka && typeof r.kafka.records['reach.ingress.v1']).toBe('number');
    expect('records' in r.kafka && r.kafka.logBytes).toBeGreaterThan(0);

    const human = await reachCli(['storage']);
    expect(human.stdout).toMatch(/^PostgreSQL\nTABLE\s+ROWS\s+DATA\s+INDEXES\s+TOTAL\s+PARTITIONS\s+OLDEST/);
    expect(human.stdout).toContain('Redis: used_memory');
  });
});
