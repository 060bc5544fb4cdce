import { describe, expect, it } from 'vitest';
import { silentLogger } from '@reach/core';
import { Registry, RegistryError, type LogAppender } from '../../../packages/dev-schema-registry/src/registry.js';
import { configRecord, RegistryState, schemaRecord, type LogRecord } from '../../../packages/dev-schema-registry/src/state.js';

/** The write path without Kafka: a log that records appends, or fails them on demand. */
class FakeLog implements LogAppender {
  readonly records: LogRecord[] = [];
  failing = false;
  async append(records: readonly LogRecord[]): Promise<void> {
    await Promise.resolve();
    if (this.failing) throw new Error('broker unavailable');
    this.records.push(...records);
  }
}

const schema = (field: string) => JSON.stringify({ type: 'record', name: 'R', fields: [{ name: field, type: 'string', default: '' }] });

function setup() {
  const log = new FakeLog();
  const state = new RegistryState();
  return { log, state, registry: new Registry(state, log, silentLogger) };
}

describe('Registry write path', () => {
  it('applies a write only after the log stored it, and a replay of the log rebuilds the same state', async () => {
    const { log, state, registry } = setup();
    expect(await registry.register('s', { schema: schema('a') })).toEqual({ id: 1 });
    await registry.setConfig('s', { compatibility: 'full' });
    expect(await registry.deleteSubject('s')).toEqual([1]);
    expect(log.records.map((r) => JSON.parse(r.key) as unknown)).toEqual([
      { keytype: 'SCHEMA', subject: 's', version: 1, magic: 1 },
      { keytype: 'CONFIG', subject: 's', magic: 0 },
      { keytype: 'SCHEMA', subject: 's', version: 1, magic: 1 },
    ]);
    expect(JSON.parse(log.records[2]!.value!)).toEqual({ subject: 's', version: 1, id: 1, schema: schema('a'), deleted: true });

    const replayed = new RegistryState();
    for (const r of log.records) expect(replayed.apply(r)).toBe(true);
    expect(replayed.subjectNames(true)).toEqual(state.subjectNames(true));
    expect(replayed.isSoftDeleted('s')).toBe(true);
    expect(replayed.config('s')).toBe('FULL');
    expect(replayed.schema(1)).toBe(schema('a'));
    expect(replayed.nextId()).toBe(2);
    expect(replayed.nextVersion('s')).toBe(2);
  });

  it('answers 500/50001 when the log refuses a write, changes nothing, and never reuses the id', async () => {
    const { log, state, registry } = setup();
    log.failing = true;
    const err = await registry.register('s', { schema: schema('a') }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RegistryError);
    expect(err).toMatchObject({ status: 500, errorCode: 50001 });
    expect(state.subjectNames()).toEqual([]);
    await expect(registry.setConfig(null, { compatibility: 'NONE' })).rejects.toMatchObject({ errorCode: 50001 });
    expect(registry.getConfig(null)).toBe('BACKWARD');
    log.failing = false;
    // Id 1 may have reached the log before the failure was reported: the next schema gets 2.
    expect(await registry.register('s', { schema: schema('a') })).toEqual({ id: 2 });
  });

  it('serialises concurrent writes: sequential versions and ids', async () => {
    const { registry } = setup();
    const ids = await Promise.all(['a', 'b', 'c', 'd'].map((f) => registry.register('s', { schema: schema(f) })));
    expect(ids).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }]);
    expect(registry.versions('s')).toEqual([1, 2, 3, 4]);
  });
});

describe('RegistryState.apply', () => {
  it('ignores records it does not know, and honours tombstones', () => {
    const state = new RegistryState();
    expect(state.apply({ key: 'not json', value: 'x' })).toBe(false);
    expect(state.apply({ key: 'null', value: null })).toBe(false);
    expect(state.apply({ key: JSON.stringify({ keytype: 'NOOP', magic: 0 }), value: null })).toBe(false);
    expect(state.apply({ key: JSON.stringify({ keytype: 'SCHEMA', subject: 's', version: 1, magic: 1 }), value: '{"id":"x"}' })).toBe(false);

    const entry = { subject: 's', version: 1, id: 7, schema: '"string"', deleted: false };
    expect(state.apply(schemaRecord(entry))).toBe(true);
    expect(state.apply(configRecord(null, 'NONE'))).toBe(true);
    expect(state.apply(configRecord('s', 'FORWARD'))).toBe(true);
    expect(state.nextId()).toBe(8);
    expect(state.effectiveLevel('s')).toBe('FORWARD');
    expect(state.effectiveLevel('t')).toBe('NONE');
    expect(state.apply(configRecord('s', null))).toBe(true);
    expect(state.effectiveLevel('s')).toBe('NONE');
    expect(state.apply({ key: schemaRecord(entry).key, value: null })).toBe(true);
    expect(state.subjectNames(true)).toEqual([]);
  });
});
