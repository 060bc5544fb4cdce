import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPATIBILITY, SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { uniq } from '../../helpers/env.js';
import { harness, record } from './harness.js';

/** The development registry through the client every service uses. */
describe('dev schema registry via @kafkajs/confluent-schema-registry', () => {
  const h = harness();
  let url: string;
  let client: SchemaRegistry;
  const subject = uniq('reach.test.user') + '-value';

  const v1 = record([
    { name: 'id', type: 'string' },
    { name: 'name', type: 'string' },
  ]);
  const v2 = record([
    { name: 'id', type: 'string' },
    { name: 'name', type: 'string' },
    { name: 'age', type: 'int', default: 42 },
  ]);
  const incompatible = record([
    { name: 'id', type: 'string' },
    { name: 'name', type: 'int' },
  ]);
  const avro = (schema: string) => ({ type: SchemaType.AVRO as const, schema });

  beforeAll(async () => {
    ({ url } = await h.start());
    client = new SchemaRegistry({ host: url, retry: { retries: 0 } });
  });
  afterAll(() => h.cleanup());

  let id1: number;
  let id2: number;

  it('registers a first version and answers the same id for the same schema', async () => {
    ({ id: id1 } = await client.register(avro(v1), { subject }));
    expect(id1).toBe(1);
    // The client set the subject's level after the first registration (GET /config/{subject} → 404, then PUT).
    const again = await new SchemaRegistry({ host: url }).register(avro(JSON.stringify(JSON.parse(v1), null, 2)), { subject });
    expect(again.id).toBe(id1);
    expect(await client.getRegistryIdBySchema(subject, avro(v1))).toBe(id1);
    expect(await client.getLatestSchemaId(subject)).toBe(id1);
    expect(await client.getRegistryId(subject, 1)).toBe(id1);
  });

  it('round-trips encode/decode through a client that has to fetch the schema', async () => {
    const value = { id: 'u-1', name: 'Ada' };
    const buf = await client.encode(id1, value);
    expect(buf[0]).toBe(0);
    expect(buf.readInt32BE(1)).toBe(id1);
    const fresh = new SchemaRegistry({ host: url });
    expect(await fresh.decode(buf)).toEqual(value);
    const type = await fresh.getSchema(id1);
    expect((type as { name?: string }).name).toBe('reach.test.User');
  });

  it('registers a compatible new version and decodes old data with it as reader schema', async () => {
    ({ id: id2 } = await client.register(avro(v2), { subject }));
    expect(id2).toBe(id1 + 1);
    expect(await client.getLatestSchemaId(subject)).toBe(id2);
    expect(await client.getRegistryId(subject, 2)).toBe(id2);

    const old = await client.encode(id1, { id: 'u-2', name: 'Grace' });
    const fresh = new SchemaRegistry({ host: url });
    expect(await fresh.decode(old, { [SchemaType.AVRO]: { readerSchema: JSON.parse(v2) as { name: string; type: 'record'; fields: unknown[] } } })).toEqual({
      id: 'u-2',
      name: 'Grace',
      age: 42,
    });
    expect(await fresh.decode(await client.encode(id2, { id: 'u-3', name: 'Lin', age: 7 }))).toEqual({ id: 'u-3', name: 'Lin', age: 7 });
  });

  it('rejects an incompatible schema with 409 and keeps the latest version', async () => {
    await expect(client.register(avro(incompatible), { subject })).rejects.toMatchObject({ status: 409, message: expect.stringMatching(/incompatible/) });
    expect(await client.getLatestSchemaId(subject)).toBe(id2);
  });

  it('reuses the global id of an identical schema under another subject', async () => {
    const other = uniq('reach.test.other') + '-value';
    const { id } = await client.register(avro(v2), { subject: other });
    expect(id).toBe(id2);
    expect(await client.getLatestSchemaId(other)).toBe(id2);
  });

  it('answers 404 for an unknown schema or subject', async () => {
    await expect(client.getRegistryIdBySchema(subject, avro(incompatible))).rejects.toMatchObject({
      name: 'ConfluentSchemaRegistryError',
      message: expect.stringMatching(/Schema not found/),
    });
    await expect(client.getLatestSchemaId(uniq('nobody'))).rejects.toMatchObject({ status: 404, message: expect.stringMatching(/Subject '.*' not found/) });
    await expect(new SchemaRegistry({ host: url }).getSchema(999_999)).rejects.toMatchObject({ status: 404 });
  });

  it('refuses to register when the subject level differs from the requested one', async () => {
    await expect(client.register(avro(v2), { subject, compatibility: COMPATIBILITY.FULL })).rejects.toThrow(
      /Compatibility does not match the configuration \(FULL != BACKWARD\)/,
    );
  });
});
