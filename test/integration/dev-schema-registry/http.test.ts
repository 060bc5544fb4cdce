import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniq } from '../../helpers/env.js';
import { call, harness, record } from './harness.js';

/** Every route over raw HTTP: bodies, statuses and Confluent error codes. */
describe('dev schema registry REST API', () => {
  const h = harness();
  let base: string;
  const api = (method: string, path: string, body?: unknown, contentType?: string) => call(base, method, path, body, contentType);
  const enc = encodeURIComponent;

  const v1 = record([{ name: 'id', type: 'string' }]);
  const v2 = record([
    { name: 'id', type: 'string' },
    { name: 'age', type: 'int', default: 0 },
  ]);
  const noDefault = record([
    { name: 'id', type: 'string' },
    { name: 'email', type: 'string' },
  ]);
  const typeChange = record([{ name: 'id', type: 'int' }]);
  const s = uniq('orders') + '-value';
  const other = uniq('payments') + '-value';

  beforeAll(async () => {
    ({ url: base } = await h.start());
  });
  afterAll(() => h.cleanup());

  it('serves / and /healthz, answers unknown routes 404 and wrong methods 405', async () => {
    expect(await api('GET', '/')).toMatchObject({ status: 200, json: {} });
    expect(await api('GET', '/healthz')).toMatchObject({ status: 200, json: { status: 'ok' } });
    expect(await api('GET', '/nope')).toMatchObject({ status: 404, json: { error_code: 404 } });
    expect(await api('PATCH', '/subjects')).toMatchObject({ status: 405, json: { error_code: 405 } });
    expect(await api('GET', '/schemas/types')).toMatchObject({ status: 200, json: ['AVRO'] });
  });

  it('starts empty', async () => {
    expect(await api('GET', '/subjects')).toMatchObject({ status: 200, json: [] });
    expect(await api('GET', `/subjects/${enc(s)}/versions`)).toMatchObject({ status: 404, json: { error_code: 40401, message: `Subject '${s}' not found.` } });
    expect(await api('GET', '/schemas/ids/1')).toMatchObject({ status: 404, json: { error_code: 40403 } });
  });

  it('registers, with the registry content type on every response', async () => {
    const res = await api('POST', `/subjects/${enc(s)}/versions`, { schema: v1 });
    expect(res).toMatchObject({ status: 200, json: { id: 1 } });
    expect(res.contentType).toBe('application/vnd.schemaregistry.v1+json');
    expect((await api('GET', '/nope')).contentType).toBe('application/vnd.schemaregistry.v1+json');
  });

  it('accepts the three request content types and refuses others with 415', async () => {
    for (const type of [
      'application/vnd.schemaregistry.v1+json',
      'application/vnd.schemaregistry+json',
      'application/json',
      'application/json; charset=utf-8',
    ]) {
      expect(await api('POST', `/subjects/${enc(s)}/versions`, { schema: v1 }, type)).toMatchObject({ status: 200, json: { id: 1 } });
    }
    expect(await api('POST', `/subjects/${enc(s)}/versions`, { schema: v1 }, 'text/plain')).toMatchObject({ status: 415, json: { error_code: 415 } });
  });

  it('answers the same id for the same schema (formatting aside) and for the same schema under another subject', async () => {
    const pretty = JSON.stringify(JSON.parse(v1), null, 4);
    expect(await api('POST', `/subjects/${enc(s)}/versions`, { schema: pretty, schemaType: 'AVRO' })).toMatchObject({ status: 200, json: { id: 1 } });
    expect(await api('POST', `/subjects/${enc(other)}/versions`, { schema: v1 })).toMatchObject({ status: 200, json: { id: 1 } });
    expect(await api('GET', `/subjects/${enc(s)}/versions`)).toMatchObject({ status: 200, json: [1] });
    expect(await api('GET', `/subjects/${enc(other)}/versions`)).toMatchObject({ status: 200, json: [1] });
  });

  it('registers a compatible second version with the next id', async () => {
    expect(await api('POST', `/subjects/${enc(s)}/versions`, { schema: v2 })).toMatchObject({ status: 200, json: { id: 2 } });
    expect(await api('GET', `/subjects/${enc(s)}/versions`)).toMatchObject({ status: 200, json: [1, 2] });
  });

  it('GET /subjects lists subjects, sorted', async () => {
    expect((await api('GET', '/subjects')).json).toEqual([s, other].sort());
  });

  it('GET /schemas/ids/{id} and /schemas/ids/{id}/versions', async () => {
    expect(await api('GET', '/schemas/ids/1')).toMatchObject({ status: 200, json: { schema: v1 } });
    expect(await api('GET', '/schemas/ids/2')).toMatchObject({ status: 200, json: { schema: v2 } });
    const versions = (await api('GET', '/schemas/ids/1/versions')).json as Array<{ subject: string; version: number }>;
    expect(versions).toEqual(
      expect.arrayContaining([
        { subject: s, version: 1 },
        { subject: other, version: 1 },
      ]),
    );
    expect(versions).toHaveLength(2);
    expect((await api('GET', '/schemas/ids/1/subjects')).json).toEqual([s, other].sort());
    expect(await api('GET', '/schemas/ids/999/versions')).toMatchObject({ status: 404, json: { error_code: 40403 } });
    expect(await api('GET', '/schemas/ids/abc')).toMatchObject({ status: 404, json: { error_code: 40403 } });
  });

  it('GET /subjects/{subject}/versions/{version|latest|-1} and /schema', async () => {
    expect(await api('GET', `/subjects/${enc(s)}/versions/1`)).toMatchObject({ status: 200, json: { subject: s, id: 1, version: 1, schema: v1 } });
    expect((await api('GET', `/subjects/${enc(s)}/versions/latest`)).json).toEqual({ subject: s, id: 2, version: 2, schema: v2 });
    expect((await api('GET', `/subjects/${enc(s)}/versions/-1`)).json).toEqual({ subject: s, id: 2, version: 2, schema: v2 });
    const raw = await api('GET', `/subjects/${enc(s)}/versions/1/schema`);
    expect(raw.status).toBe(200);
    expect(raw.text).toBe(v1);
    expect(await api('GET', `/subjects/${enc(s)}/versions/3`)).toMatchObject({ status: 404, json: { error_code: 40402, message: 'Version 3 not found.' } });
    expect(await api('GET', `/subjects/${enc(s)}/versions/3/schema`)).toMatchObject({ status: 404, json: { error_code: 40402 } });
    for (const bad of ['abc', '0', '-2', '2147483648']) {
      expect(await api('GET', `/subjects/${enc(s)}/versions/${bad}`)).toMatchObject({ status: 422, json: { error_code: 42202 } });
    }
    expect(await api('GET', `/subjects/unknown-subject/versions/latest`)).toMatchObject({ status: 404, json: { error_code: 40401 } });
  });

  it('POST /subjects/{subject} looks a schema up', async () => {
    expect((await api('POST', `/subjects/${enc(s)}`, { schema: v2 })).json).toEqual({ subject: s, id: 2, version: 2, schema: v2 });
    expect((await api('POST', `/subjects/${enc(s)}`, { schema: JSON.stringify(JSON.parse(v1), null, 1) })).json).toEqual({
      subject: s,
      id: 1,
      version: 1,
      schema: v1,
    });
    expect(await api('POST', `/subjects/${enc(s)}`, { schema: noDefault })).toMatchObject({ status: 404, json: { error_code: 40403 } });
    expect(await api('POST', `/subjects/unknown-subject`, { schema: v1 })).toMatchObject({ status: 404, json: { error_code: 40401 } });
    expect(await api('POST', `/subjects/${enc(s)}`, { schema: '{"type":"nope"}' })).toMatchObject({ status: 422, json: { error_code: 42201 } });
  });

  it('POST /compatibility/subjects/{subject}/versions/{version|latest}', async () => {
    const path = `/compatibility/subjects/${enc(s)}/versions/latest`;
    expect(await api('POST', path, { schema: v2 })).toMatchObject({ status: 200, json: { is_compatible: true } });
    const no = await api('POST', path, { schema: noDefault });
    expect(no).toMatchObject({ status: 200, json: { is_compatible: false } });
    expect(no.json).not.toHaveProperty('messages');
    const verbose = await api('POST', `${path}?verbose=true`, { schema: noDefault });
    expect(verbose.json).toEqual({
      is_compatible: false,
      messages: [expect.stringMatching(/^BACKWARD: the new schema cannot read data written with version 2: .*email/)],
    });
    expect((await api('POST', `${path}?verbose=true`, { schema: v2 })).json).toEqual({ is_compatible: true, messages: [] });
    // Against a given version only.
    expect((await api('POST', `/compatibility/subjects/${enc(s)}/versions/1`, { schema: typeChange })).json).toEqual({ is_compatible: false });
    expect((await api('POST', `/compatibility/subjects/${enc(s)}/versions`, { schema: v2 })).json).toEqual({ is_compatible: true });
    expect(await api('POST', `/compatibility/subjects/${enc(s)}/versions/9`, { schema: v2 })).toMatchObject({ status: 404, json: { error_code: 40402 } });
    expect(await api('POST', `/compatibility/subjects/${enc(s)}/versions/x`, { schema: v2 })).toMatchObject({ status: 422, json: { error_code: 42202 } });
    expect(await api('POST', `/compatibility/subjects/unknown-subject/versions/latest`, { schema: v2 })).toMatchObject({
      status: 404,
      json: { error_code: 40401 },
    });
    expect(await api('POST', path, { schema: 'not json' })).toMatchObject({ status: 422, json: { error_code: 42201 } });
  });

  it('refuses an incompatible registration with 409', async () => {
    const res = await api('POST', `/subjects/${enc(s)}/versions`, { schema: noDefault });
    expect(res).toMatchObject({
      status: 409,
      json: { error_code: 409, message: expect.stringMatching(/^Schema being registered is incompatible with an earlier schema for subject/) },
    });
    expect((await api('POST', `/subjects/${enc(s)}/versions`, { schema: typeChange })).status).toBe(409);
    expect((await api('GET', `/subjects/${enc(s)}/versions`)).json).toEqual([1, 2]);
  });

  it('refuses invalid schemas and bodies with 422 / 400', async () => {
    const register = (body: unknown) => api('POST', `/subjects/${enc(s)}/versions`, body);
    expect(await register({ schema: '{"type":"record","name":"X","fields":[{"name":"a","type":"nope"}]}' })).toMatchObject({
      status: 422,
      json: { error_code: 42201 },
    });
    expect(await register({ schema: 'not json' })).toMatchObject({ status: 422, json: { error_code: 42201 } });
    expect(await register({ schema: '' })).toMatchObject({ status: 422, json: { error_code: 42201, message: 'Empty schema' } });
    expect(await register({})).toMatchObject({ status: 422, json: { error_code: 42201 } });
    expect(await register({ schema: v2, schemaType: 'PROTOBUF' })).toMatchObject({ status: 422, json: { error_code: 42201 } });
    expect(await register({ schema: v2, references: [{ name: 'x', subject: 'y', version: 1 }] })).toMatchObject({ status: 422, json: { error_code: 42201 } });
    expect(await register('{"schema": ')).toMatchObject({ status: 400, json: { error_code: 400 } });
    // Nothing of that was stored.
    expect((await api('GET', `/subjects/${enc(s)}/versions`)).json).toEqual([1, 2]);
  });

  it('GET/PUT /config (global), followed by subjects without their own level', async () => {
    // Drops `id` (no default in v2): BACKWARD-compatible, not FORWARD-compatible.
    const dropId = record([{ name: 'age', type: 'int', default: 0 }]);
    const check = async () => (await api('POST', `/compatibility/subjects/${enc(s)}/versions/latest`, { schema: dropId })).json;
    expect(await api('GET', '/config')).toMatchObject({ status: 200, json: { compatibilityLevel: 'BACKWARD' } });
    expect(await check()).toEqual({ is_compatible: true });
    expect(await api('PUT', '/config', { compatibility: 'FULL' })).toMatchObject({ status: 200, json: { compatibility: 'FULL' } });
    expect((await api('GET', '/config')).json).toEqual({ compatibilityLevel: 'FULL' });
    expect(await check()).toEqual({ is_compatible: false });
    expect(await api('PUT', '/config', { compatibility: 'SOMETIMES' })).toMatchObject({ status: 422, json: { error_code: 42203 } });
    expect(await api('PUT', '/config', {})).toMatchObject({ status: 422, json: { error_code: 42203 } });
    expect(await api('PUT', '/config', { compatibility: 'backward' })).toMatchObject({ status: 200, json: { compatibility: 'BACKWARD' } });
    expect(await check()).toEqual({ is_compatible: true });
  });

  it('GET/PUT/DELETE /config/{subject}', async () => {
    expect(await api('GET', `/config/${enc(s)}`)).toMatchObject({ status: 404, json: { error_code: 40408 } });
    expect(await api('GET', `/config/${enc(s)}?defaultToGlobal=true`)).toMatchObject({ status: 200, json: { compatibilityLevel: 'BACKWARD' } });
    expect(await api('PUT', `/config/${enc(s)}`, { compatibility: 'NONE' })).toMatchObject({ status: 200, json: { compatibility: 'NONE' } });
    expect((await api('GET', `/config/${enc(s)}`)).json).toEqual({ compatibilityLevel: 'NONE' });
    expect((await api('GET', '/config')).json).toEqual({ compatibilityLevel: 'BACKWARD' });
    expect(await api('PUT', `/config/${enc(s)}`, { compatibility: 'MAYBE' })).toMatchObject({ status: 422, json: { error_code: 42203 } });
    // NONE lets the type change through.
    expect(await api('POST', `/subjects/${enc(s)}/versions`, { schema: typeChange })).toMatchObject({ status: 200, json: { id: 3 } });
    expect((await api('GET', `/subjects/${enc(s)}/versions`)).json).toEqual([1, 2, 3]);
    expect(await api('DELETE', `/config/${enc(s)}`)).toMatchObject({ status: 200, json: { compatibilityLevel: 'NONE' } });
    expect(await api('GET', `/config/${enc(s)}`)).toMatchObject({ status: 404, json: { error_code: 40408 } });
    expect(await api('DELETE', `/config/${enc(s)}`)).toMatchObject({ status: 404, json: { error_code: 40408 } });
    // A level can be set before the subject exists.
    const fresh = uniq('future') + '-value';
    expect(await api('PUT', `/config/${enc(fresh)}`, { compatibility: 'FORWARD_TRANSITIVE' })).toMatchObject({
      status: 200,
      json: { compatibility: 'FORWARD_TRANSITIVE' },
    });
    expect((await api('GET', `/config/${enc(fresh)}`)).json).toEqual({ compatibilityLevel: 'FORWARD_TRANSITIVE' });
  });

  it('applies transitive levels against every version', async () => {
    const t = uniq('transitive') + '-value';
    const a = record([{ name: 'x', type: 'int' }], 'T');
    const b = record([], 'T');
    const c = record([{ name: 'x', type: 'string', default: '' }], 'T');
    expect((await api('PUT', `/config/${enc(t)}`, { compatibility: 'BACKWARD_TRANSITIVE' })).status).toBe(200);
    expect((await api('POST', `/subjects/${enc(t)}/versions`, { schema: a })).status).toBe(200);
    expect((await api('POST', `/subjects/${enc(t)}/versions`, { schema: b })).status).toBe(200);
    // c reads b's data but not a's.
    expect((await api('POST', `/compatibility/subjects/${enc(t)}/versions/latest`, { schema: c })).json).toEqual({ is_compatible: true });
    const all = await api('POST', `/compatibility/subjects/${enc(t)}/versions?verbose=true`, { schema: c });
    expect(all.json).toEqual({ is_compatible: false, messages: [expect.stringMatching(/^BACKWARD_TRANSITIVE: .*version 1/)] });
    expect(await api('POST', `/subjects/${enc(t)}/versions`, { schema: c })).toMatchObject({ status: 409, json: { error_code: 409 } });
    expect((await api('PUT', `/config/${enc(t)}`, { compatibility: 'BACKWARD' })).status).toBe(200);
    expect((await api('POST', `/subjects/${enc(t)}/versions`, { schema: c })).status).toBe(200);
    expect((await api('GET', `/subjects/${enc(t)}/versions`)).json).toEqual([1, 2, 3]);
  });

  it('handles subject names that need URL encoding', async () => {
    const odd = `${uniq('odd')} name/with:slash`;
    expect(await api('POST', `/subjects/${enc(odd)}/versions`, { schema: v2 })).toMatchObject({ status: 200, json: { id: 2 } });
    expect((await api('GET', `/subjects/${enc(odd)}/versions/latest`)).json).toMatchObject({ subject: odd, version: 1, id: 2 });
    expect((await api('GET', '/subjects')).json).toContain(odd);
  });

  it('DELETE /subjects/{subject} soft-deletes: ids stay, versions continue', async () => {
    const d = uniq('doomed') + '-value';
    await api('POST', `/subjects/${enc(d)}/versions`, { schema: v1 });
    await api('POST', `/subjects/${enc(d)}/versions`, { schema: v2 });
    expect(await api('DELETE', `/subjects/${enc(d)}?permanent=true`)).toMatchObject({ status: 400, json: { error_code: 400 } });
    expect(await api('DELETE', `/subjects/${enc(d)}`)).toMatchObject({ status: 200, json: [1, 2] });
    expect((await api('GET', '/subjects')).json).not.toContain(d);
    expect((await api('GET', '/subjects?deleted=true')).json).toContain(d);
    expect(await api('GET', `/subjects/${enc(d)}/versions`)).toMatchObject({ status: 404, json: { error_code: 40401 } });
    expect(await api('GET', `/subjects/${enc(d)}/versions/1`)).toMatchObject({ status: 404, json: { error_code: 40401 } });
    expect(await api('POST', `/subjects/${enc(d)}`, { schema: v1 })).toMatchObject({ status: 404, json: { error_code: 40401 } });
    expect(await api('DELETE', `/subjects/${enc(d)}`)).toMatchObject({ status: 404, json: { error_code: 40404 } });
    expect(await api('DELETE', `/subjects/never-existed`)).toMatchObject({ status: 404, json: { error_code: 40401 } });
    // The ids still resolve (old data stays readable), but no longer list the deleted subject.
    expect((await api('GET', '/schemas/ids/1')).json).toEqual({ schema: v1 });
    expect((await api('GET', '/schemas/ids/1/versions')).json).not.toContainEqual(expect.objectContaining({ subject: d }));
    // Registering again starts after the deleted versions, with the schema's existing id.
    expect(await api('POST', `/subjects/${enc(d)}/versions`, { schema: v1 })).toMatchObject({ status: 200, json: { id: 1 } });
    expect((await api('GET', `/subjects/${enc(d)}/versions`)).json).toEqual([3]);
  });

  it('hands out distinct, sequential ids to concurrent registrations', async () => {
    // Refused registrations above used no id: the ids so far are 1..6 (v1, v2, typeChange, a, b, c).
    const probe = await api('POST', `/subjects/${enc(uniq('probe'))}/versions`, { schema: record([{ name: 'p', type: 'string' }], 'Probe') });
    expect(probe.json).toEqual({ id: 7 });
    const next = 8;
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        api('POST', `/subjects/${enc(uniq('parallel'))}/versions`, { schema: record([{ name: `f${i}`, type: 'string' }], `P${i}`) }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(results.map((r) => (r.json as { id: number }).id).sort((x, y) => x - y)).toEqual(Array.from({ length: 8 }, (_, i) => next + i));
  });
});
