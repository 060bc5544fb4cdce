import { describe, expect, it } from 'vitest';
import {
  canonicalSchema,
  checkCompatibility,
  COMPATIBILITY_LEVELS,
  InvalidSchemaError,
  isCompatibilityLevel,
  parseAvro,
  type CompatibilityLevel,
} from '../../../packages/dev-schema-registry/src/compatibility.js';

type Field = { name: string; type: unknown; default?: unknown };
const record = (fields: Field[], name = 'User') => JSON.stringify({ type: 'record', name, namespace: 'test', fields });
const enumSchema = (symbols: string[], extra: Record<string, unknown> = {}) => JSON.stringify({ type: 'enum', name: 'Color', symbols, ...extra });
/** Previous versions, oldest first, numbered from 1. */
const versions = (...schemas: string[]) => schemas.map((schema, i) => ({ version: i + 1, schema }));

const v1 = record([{ name: 'id', type: 'string' }]);
const withDefault = record([
  { name: 'id', type: 'string' },
  { name: 'age', type: 'int', default: 0 },
]);
const withoutDefault = record([
  { name: 'id', type: 'string' },
  { name: 'age', type: 'int' },
]);
const empty = record([]);

const ok = (candidate: string, previous: string[], level: CompatibilityLevel) => checkCompatibility(candidate, versions(...previous), level).compatible;

describe('checkCompatibility: BACKWARD (the new schema reads data written with the latest)', () => {
  it('accepts adding a field with a default', () => {
    expect(checkCompatibility(withDefault, versions(v1), 'BACKWARD')).toEqual({ compatible: true, messages: [] });
  });

  it('rejects adding a field without a default, naming the version and the reason', () => {
    const result = checkCompatibility(withoutDefault, versions(v1), 'BACKWARD');
    expect(result.compatible).toBe(false);
    expect(result.messages).toHaveLength(1);
    expect(result.messages[0]).toMatch(/^BACKWARD: the new schema cannot read data written with version 1: /);
    expect(result.messages[0]).toMatch(/age/);
  });

  it('accepts removing a field', () => {
    expect(ok(v1, [withDefault], 'BACKWARD')).toBe(true);
    expect(ok(empty, [v1], 'BACKWARD')).toBe(true);
  });

  it('rejects changing a field type int → string, accepts the int → long promotion', () => {
    const asInt = record([{ name: 'n', type: 'int' }]);
    expect(ok(record([{ name: 'n', type: 'string' }]), [asInt], 'BACKWARD')).toBe(false);
    expect(ok(record([{ name: 'n', type: 'long' }]), [asInt], 'BACKWARD')).toBe(true);
    expect(ok(asInt, [record([{ name: 'n', type: 'long' }])], 'BACKWARD')).toBe(false);
  });

  it('rejects renaming the record (names must match, as in Avro resolution)', () => {
    expect(ok(record([{ name: 'id', type: 'string' }], 'Account'), [v1], 'BACKWARD')).toBe(false);
  });

  it('accepts adding enum symbols; rejects removing one unless the reader has an enum default', () => {
    const rgb = enumSchema(['RED', 'GREEN', 'BLUE']);
    const rg = enumSchema(['RED', 'GREEN']);
    expect(ok(rgb, [rg], 'BACKWARD')).toBe(true);
    expect(ok(rg, [rgb], 'BACKWARD')).toBe(false);
    expect(ok(enumSchema(['RED', 'GREEN'], { default: 'RED' }), [rgb], 'BACKWARD')).toBe(true);
  });

  it('compares only with the latest version', () => {
    const asInt = record([{ name: 'x', type: 'int' }]);
    const asString = record([{ name: 'x', type: 'string', default: '' }]);
    expect(ok(asString, [asInt], 'BACKWARD')).toBe(false);
    // The int version is older than the latest (which has no x): not looked at.
    expect(ok(asString, [asInt, empty], 'BACKWARD')).toBe(true);
  });
});

describe('checkCompatibility: other levels', () => {
  it('FORWARD: the latest schema reads data written with the new one', () => {
    expect(ok(withoutDefault, [v1], 'FORWARD')).toBe(true); // old reader ignores the new field
    expect(ok(empty, [v1], 'FORWARD')).toBe(false); // old reader needs `id`, which has no default
    const result = checkCompatibility(empty, versions(v1), 'FORWARD');
    expect(result.messages[0]).toMatch(/^FORWARD: version 1 cannot read data written with the new schema: /);
    // Enum symbols: adding one breaks old readers without a default.
    expect(ok(enumSchema(['RED', 'GREEN', 'BLUE']), [enumSchema(['RED', 'GREEN'])], 'FORWARD')).toBe(false);
    expect(ok(enumSchema(['RED', 'GREEN', 'BLUE']), [enumSchema(['RED', 'GREEN'], { default: 'RED' })], 'FORWARD')).toBe(true);
  });

  it('FULL: both directions', () => {
    expect(ok(withDefault, [v1], 'FULL')).toBe(true);
    expect(ok(withoutDefault, [v1], 'FULL')).toBe(false); // backward fails
    expect(ok(empty, [v1], 'FULL')).toBe(false); // forward fails
    const both = checkCompatibility(record([{ name: 'id', type: 'int' }]), versions(v1), 'FULL');
    expect(both.messages).toHaveLength(2);
  });

  it('NONE accepts anything, and any level accepts a first version', () => {
    expect(ok(record([{ name: 'x', type: 'boolean' }], 'Other'), [v1], 'NONE')).toBe(true);
    for (const level of COMPATIBILITY_LEVELS) expect(ok(withoutDefault, [], level)).toBe(true);
  });

  it('*_TRANSITIVE checks every previous version, newest first', () => {
    // a (required x) → b (x removed) → c (x back as a string, with a default):
    // c can read b's data but not a's (x was an int there).
    const a = record([{ name: 'x', type: 'int' }]);
    const b = record([]);
    const c = record([{ name: 'x', type: 'string', default: '' }]);
    expect(ok(c, [a, b], 'BACKWARD')).toBe(true);
    const result = checkCompatibility(c, versions(a, b), 'BACKWARD_TRANSITIVE');
    expect(result.compatible).toBe(false);
    expect(result.messages).toHaveLength(1);
    expect(result.messages[0]).toMatch(/version 1/);

    // Forward: b's readers are fine with c, a's readers need an int x.
    expect(ok(c, [a, b], 'FORWARD')).toBe(true);
    expect(ok(c, [a, b], 'FORWARD_TRANSITIVE')).toBe(false);
    expect(ok(c, [a, b], 'FULL')).toBe(true);
    expect(ok(c, [a, b], 'FULL_TRANSITIVE')).toBe(false);
    // Adding optional fields one by one stays compatible transitively in both directions.
    const d = record([
      { name: 'x', type: 'string', default: '' },
      { name: 'y', type: 'long', default: 0 },
    ]);
    expect(ok(d, [b, c], 'FULL_TRANSITIVE')).toBe(true);
  });
});

describe('schema validation', () => {
  it('rejects text that is not JSON or not Avro with InvalidSchemaError', () => {
    expect(() => parseAvro('{not json')).toThrow(InvalidSchemaError);
    expect(() => parseAvro('{not json')).toThrow(/not JSON/);
    expect(() => parseAvro(JSON.stringify({ type: 'record', name: 'X', fields: [{ name: 'a', type: 'nope' }] }))).toThrow(InvalidSchemaError);
    expect(() => parseAvro(JSON.stringify({ type: 'record', name: 'X', fields: [{ name: 'a', type: 'int', default: 'x' }] }))).toThrow(/Invalid schema/);
    expect(() => parseAvro(JSON.stringify({ type: 'enum', name: 'E', symbols: [] }))).toThrow(InvalidSchemaError);
  });

  it('checkCompatibility throws InvalidSchemaError for an invalid candidate, even at NONE', () => {
    expect(() => checkCompatibility('{"type":"unknown"}', versions(v1), 'BACKWARD')).toThrow(InvalidSchemaError);
    expect(() => checkCompatibility('nope', [], 'NONE')).toThrow(InvalidSchemaError);
  });

  it('canonicalSchema drops whitespace only and keeps every attribute', () => {
    const pretty = JSON.stringify(JSON.parse(withDefault), null, 2);
    expect(canonicalSchema(pretty)).toBe(withDefault);
    const withDoc = JSON.stringify({
      type: 'record',
      name: 'R',
      doc: 'kept',
      'x-custom': 1,
      fields: [{ name: 'ts', type: { type: 'long', logicalType: 'timestamp-millis' } }],
    });
    expect(canonicalSchema(withDoc)).toBe(withDoc);
    expect(canonicalSchema('"string"')).toBe('"string"');
  });

  it('isCompatibilityLevel knows exactly the seven levels', () => {
    expect(COMPATIBILITY_LEVELS).toEqual(['NONE', 'BACKWARD', 'BACKWARD_TRANSITIVE', 'FORWARD', 'FORWARD_TRANSITIVE', 'FULL', 'FULL_TRANSITIVE']);
    for (const level of COMPATIBILITY_LEVELS) expect(isCompatibilityLevel(level)).toBe(true);
    expect(isCompatibilityLevel('backward')).toBe(false);
    expect(isCompatibilityLevel('FULLY')).toBe(false);
    expect(isCompatibilityLevel(undefined)).toBe(false);
  });
});
