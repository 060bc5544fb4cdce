import { describe, expect, it } from 'vitest';
import { SchemaType } from '@kafkajs/confluent-schema-registry';
import { registerSchemas, schemaDef } from '@reach/envelope';
import { silentLogger } from '@reach/core';
import { registryClient } from '../../helpers/kafka.js';
import { stack, uniq } from '../../helpers/env.js';

// The deploy step registers schemas/ under their subjects after an explicit compatibility
// check, and fails loudly (naming the schema and the registry's reasons) on a breaking change.
describe('registerSchemas (deploy step)', () => {
  it('registers once and returns the same id when run again', async () => {
    const subject = `${uniq('it.envelope')}-value`;
    const first = await registerSchemas(stack.schemaRegistryUrl, [{ subject, schema: 'reach.v1.Envelope' }], silentLogger);
    const again = await registerSchemas(stack.schemaRegistryUrl, [{ subject, schema: 'reach.v1.Envelope' }], silentLogger);
    expect(again[0]!.id).toBe(first[0]!.id);
    const latest = await registryClient().getLatestSchemaId(subject);
    expect(latest).toBe(first[0]!.id);
  });

  it('refuses a schema that is not BACKWARD compatible with the latest version', async () => {
    const subject = `${uniq('it.breaking')}-value`;
    // BACKWARD = the new schema must read data written with the latest one. This "latest"
    // lacks message_id, which the current Envelope requires without a default: incompatible.
    const old = { type: 'record', name: 'Envelope', namespace: 'reach.v1', fields: [{ name: 'other', type: 'string' }] };
    await registryClient().register({ type: SchemaType.AVRO, schema: JSON.stringify(old) }, { subject });
    await expect(registerSchemas(stack.schemaRegistryUrl, [{ subject, schema: 'reach.v1.Envelope' }], silentLogger)).rejects.toThrow(
      /reach\.v1\.Envelope\.avsc is not BACKWARD compatible with the latest version of .*message_id/s,
    );
  });

  it('accepts an additive change (a new optional field) as a new version', async () => {
    const subject = `${uniq('it.additive')}-value`;
    const current = schemaDef('reach.v1.Envelope').schema as { fields: unknown[] };
    const older = { ...current, fields: current.fields.filter((f) => (f as { name: string }).name !== 'headers') };
    const oldId = await registryClient().register({ type: SchemaType.AVRO, schema: JSON.stringify(older) }, { subject });
    const [now] = await registerSchemas(stack.schemaRegistryUrl, [{ subject, schema: 'reach.v1.Envelope' }], silentLogger);
    expect(now!.id).not.toBe(oldId.id);
  });
});
