import { afterAll, describe, expect, it } from 'vitest';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { uniq } from '../../helpers/env.js';
import { call, harness, record } from './harness.js';

/** State lives in the compacted topic: a new instance on the same topic answers the same. */
describe('dev schema registry state survives a restart', () => {
  const h = harness();
  afterAll(() => h.cleanup());

  const a = uniq('alpha') + '-value';
  const b = uniq('beta') + '-value';
  const gone = uniq('gone') + '-value';
  const v1 = record([{ name: 'id', type: 'string' }]);
  const v2 = record([
    { name: 'id', type: 'string' },
    { name: 'n', type: 'long', default: 0 },
  ]);
  const other = record([{ name: 'k', type: 'boolean' }], 'Other');

  /** Everything a client could observe, gathered over HTTP. */
  async function snapshot(base: string) {
    const get = async (path: string) => {
      const res = await call(base, 'GET', path);
      return { status: res.status, json: res.json as unknown };
    };
    return {
      subjects: await get('/subjects'),
      deletedSubjects: await get('/subjects?deleted=true'),
      aVersions: await get(`/subjects/${a}/versions`),
      aLatest: await get(`/subjects/${a}/versions/latest`),
      a1: await get(`/subjects/${a}/versions/1`),
      bLatest: await get(`/subjects/${b}/versions/latest`),
      gone: await get(`/subjects/${gone}/versions`),
      ids: await Promise.all([1, 2, 3, 4].map((id) => get(`/schemas/ids/${id}`))),
      id1Versions: await get('/schemas/ids/1/versions'),
      globalConfig: await get('/config'),
      aConfig: await get(`/config/${a}`),
      bConfig: await get(`/config/${b}`),
    };
  }

  let before: Awaited<ReturnType<typeof snapshot>>;
  let encoded: Buffer;

  it('writes state with a first instance, then closes it', async () => {
    const first = await h.start();
    const client = new SchemaRegistry({ host: first.url });
    expect((await client.register({ type: SchemaType.AVRO, schema: v1 }, { subject: a })).id).toBe(1);
    expect((await client.register({ type: SchemaType.AVRO, schema: v2 }, { subject: a })).id).toBe(2);
    expect((await call(first.url, 'PUT', '/config', { compatibility: 'FORWARD' })).status).toBe(200);
    expect((await call(first.url, 'PUT', `/config/${b}`, { compatibility: 'NONE' })).status).toBe(200);
    expect((await call(first.url, 'POST', `/subjects/${b}/versions`, { schema: v1 })).json).toEqual({ id: 1 });
    expect((await call(first.url, 'POST', `/subjects/${b}/versions`, { schema: other })).json).toEqual({ id: 3 });
    expect((await call(first.url, 'POST', `/subjects/${gone}/versions`, { schema: record([{ name: 'z', type: 'int' }], 'Gone') })).json).toEqual({ id: 4 });
    expect((await call(first.url, 'DELETE', `/subjects/${gone}`)).json).toEqual([1]);
    encoded = await client.encode(1, { id: 'kept' });
    before = await snapshot(first.url);
    expect(before.aLatest).toEqual({ status: 200, json: { subject: a, id: 2, version: 2, schema: v2 } });
    expect(before.aConfig).toEqual({ status: 200, json: { compatibilityLevel: 'BACKWARD' } });
    expect(before.bConfig).toEqual({ status: 200, json: { compatibilityLevel: 'NONE' } });
    expect(before.globalConfig).toEqual({ status: 200, json: { compatibilityLevel: 'FORWARD' } });
    expect(before.gone.status).toBe(404);
    await first.close();
    await expect(fetch(first.url + '/healthz')).rejects.toThrow();
  });

  it('keeps the state in a compacted single-partition topic', async () => {
    const admin = h.kafka.admin();
    await admin.connect();
    try {
      const meta = await admin.fetchTopicMetadata({ topics: [h.topic] });
      expect(meta.topics[0]!.partitions).toHaveLength(1);
      const configs = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: 2, name: h.topic, configNames: ['cleanup.policy'] }] });
      expect(configs.resources[0]!.configEntries.find((e) => e.configName === 'cleanup.policy')?.configValue).toBe('compact');
    } finally {
      await admin.disconnect();
    }
  });

  it('answers the same after a restart on the same topic, and continues the ids', async () => {
    const second = await h.start();
    expect(await snapshot(second.url)).toEqual(before);
    const client = new SchemaRegistry({ host: second.url });
    expect(await client.decode(encoded)).toEqual({ id: 'kept' });
    // Known schema under a new subject → its old id; a new schema → the next id after 4.
    expect((await call(second.url, 'POST', `/subjects/${uniq('gamma')}/versions`, { schema: v2 })).json).toEqual({ id: 2 });
    const v3 = record([
      { name: 'id', type: 'string' },
      { name: 'n', type: 'long', default: 0 },
      { name: 's', type: 'string', default: '' },
    ]);
    expect((await call(second.url, 'POST', `/subjects/${a}/versions`, { schema: v3 })).json).toEqual({ id: 5 });
    expect((await call(second.url, 'GET', `/subjects/${a}/versions`)).json).toEqual([1, 2, 3]);
    // The soft-deleted subject continues its version numbers.
    expect((await call(second.url, 'POST', `/subjects/${gone}/versions`, { schema: v1 })).json).toEqual({ id: 1 });
    expect((await call(second.url, 'GET', `/subjects/${gone}/versions`)).json).toEqual([2]);
    await second.close();

    // And a third instance sees the second one's writes.
    const third = await h.start();
    expect((await call(third.url, 'GET', `/subjects/${a}/versions/latest`)).json).toEqual({ subject: a, id: 5, version: 3, schema: v3 });
    expect((await call(third.url, 'GET', `/subjects/${gone}/versions`)).json).toEqual([2]);
  });
});
