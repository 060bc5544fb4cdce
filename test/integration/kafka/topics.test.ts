import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigResourceTypes, type Admin } from 'kafkajs';
import { TOPICS } from '@reach/kafka';
import { plainKafka } from '../../helpers/kafka.js';

// The deploy step of the running stack created every topic of DESIGN §1 as code: the right
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

  it('pipeline topics have the configured partitions (REACH_TOPIC_PARTITIONS, default 6)', async () => {
    const want = Number(process.env.REACH_TOPIC_PARTITIONS ?? 6);
    const meta = await admin.fetchTopicMetadata({ topics: Object.values(TOPICS).map((t) => t.name) });
    for (const t of meta.topics) expect(t.partitions.length, t.name).toBeGreaterThanOrEqual(want);
  });
});
