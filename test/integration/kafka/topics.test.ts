import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigResourceTypes, type Admin } from 'kafkajs';
import { TOPICS, type TopicSpec } from '@reach/kafka';
import { plainKafka } from '../../helpers/kafka.js';

// The deploy step of the running stack created every topic of docs/design.md §9 as code: the right
// cleanup policy and retention, and the configured partition count.
let admin: Admin;

beforeAll(async () => {
  admin = plainKafka().admin();
  await admin.connect();
});
afterAll(async () => {
  await admin.disconnect();
});

describe('topics as code', () => {
  it('every declared topic exists with its cleanup policy and retention', async () => {
    const specs = Object.values(TOPICS);
    const existing = new Set(await admin.listTopics());
    for (const t of specs) expect(existing, t.name).toContain(t.name);
    const described = await admin.describeConfigs({
      includeSynonyms: false,
      resources: specs.map((t) => ({ type: ConfigResourceTypes.TOPIC, name: t.name, configNames: ['cleanup.policy', 'retention.ms'] })),
    });
    for (const t of specs) {
      const res = described.resources.find((r) => r.resourceName === t.name)!;
      const get = (n: string) => res.configEntries.find((e) => e.configName === n)?.configValue;
      expect(get('cleanup.policy'), t.name).toBe(t.compacted ? 'compact' : 'delete');
      expect(get('retention.ms'), t.name).toBe(String(t.retentionMs));
    }
  });

  it('pipeline topics have the configured partitions (REACH_TOPIC_PARTITIONS, default 6); fixed-size ones their own count', async () => {
    const want = Number(process.env.REACH_TOPIC_PARTITIONS ?? 6);
    const specs: TopicSpec[] = Object.values(TOPICS);
    const meta = await admin.fetchTopicMetadata({ topics: specs.map((t) => t.name) });
    expect(meta.topics).toHaveLength(specs.length);
    for (const t of meta.topics) {
      const fixed = specs.find((s) => s.name === t.name)?.partitions;
      // Partitions are only ever added, never removed: a topic may hold more than declared.
      expect(t.partitions.length, t.name).toBeGreaterThanOrEqual(fixed ?? want);
    }
  });
});
