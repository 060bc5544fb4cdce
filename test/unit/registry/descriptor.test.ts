import { describe, expect, it } from 'vitest';
import { ReachError } from '@reach/core';
import { AGENT_ID_PATTERN, parseCapabilityDictionary, validateDescriptor, type DescriptorRules } from '@reach/agents';

// R-A1/R-A2: the registration body, its defaults, and 4104 naming the offending field.
const rules: DescriptorRules = { maxCapabilities: 10, dictionary: new Set(), defaultTtlS: 60 };

function good(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    agent_id: 'data.retriever.8f3a2c',
    agent_type: 'data.retriever',
    endpoints: { ws: 'ws://127.0.0.1:9000/agent', http: 'https://agent.example/reach', protocol_version: '1' },
    capabilities: [
      {
        name: 'parse_pdf',
        mode: 'handle',
        tags: ['risk', 'high-priority'],
        scope: { sources: ['s3'], access: 'read', timeout_ms: [1000, 30000] },
        constraints: { max_pages: 200 },
        consumption: 'single',
      },
      { name: 'query:orders', mode: 'subscribe', tags: [], consumption: 'stream', version: '1.2.0' },
    ],
    metadata: { max_concurrency: 4, region: 'eu-west-1', timezone: 'Europe/Paris', model: 'gpt-x', domain: 'finance' },
    ttl_s: 30,
    ...overrides,
  };
}

function refusal(body: unknown, r: DescriptorRules = rules): ReachError {
  try {
    validateDescriptor(body, r);
  } catch (err) {
    expect(err).toBeInstanceOf(ReachError);
    const e = err as ReachError;
    expect(e.code).toBe(4104);
    expect(e.httpStatus).toBe(400);
    return e;
  }
  throw new Error('expected 4104 INVALID_REGISTRATION');
}

function fieldOf(body: unknown, r: DescriptorRules = rules): unknown {
  return refusal(body, r).details?.field;
}

describe('validateDescriptor', () => {
  it('accepts a full descriptor and keeps every field', () => {
    const { descriptor, warnings } = validateDescriptor(good(), rules);
    expect(warnings).toEqual([]);
    expect(descriptor).toEqual({
      agent_id: 'data.retriever.8f3a2c',
      agent_type: 'data.retriever',
      endpoints: { ws: 'ws://127.0.0.1:9000/agent', http: 'https://agent.example/reach', protocol_version: '1' },
      capabilities: [
        {
          name: 'parse_pdf',
          mode: 'handle',
          tags: ['risk', 'high-priority'],
          scope: { sources: ['s3'], access: 'read', timeout_ms: [1000, 30000] },
          constraints: { max_pages: 200 },
          consumption: 'single',
          version: null,
        },
        { name: 'query:orders', mode: 'subscribe', tags: [], scope: null, constraints: null, consumption: 'stream', version: '1.2.0' },
      ],
      metadata: { max_concurrency: 4, region: 'eu-west-1', timezone: 'Europe/Paris', model: 'gpt-x', domain: 'finance', weight: 1, extra: {} },
      ttl_s: 30,
    });
  });

  it('fills defaults for a minimal descriptor (a pure producer: no capabilities)', () => {
    const { descriptor } = validateDescriptor({ agent_type: 'producer' }, rules);
    expect(descriptor.agent_id).toMatch(/^producer\.[0-9a-f]{6}$/);
    expect(descriptor.agent_id).toMatch(AGENT_ID_PATTERN);
    expect(descriptor.capabilities).toEqual([]);
    expect(descriptor.ttl_s).toBe(60);
    expect(descriptor.endpoints).toEqual({ ws: null, http: null, protocol_version: '1' });
    expect(descriptor.metadata).toEqual({ max_concurrency: 10, region: null, timezone: null, model: null, domain: 'default', weight: 1, extra: {} });
  });

  it('generates <agent_type>.<6 hex> ids that differ', () => {
    const ids = new Set(Array.from({ length: 50 }, () => validateDescriptor({ agent_type: 'x' }, rules).descriptor.agent_id));
    expect(ids.size).toBeGreaterThan(45);
  });

  it('accepts capability defaults and the bare-string shorthand', () => {
    const { descriptor } = validateDescriptor(good({ capabilities: ['parse_pdf', { name: 'query:orders' }] }), rules);
    expect(descriptor.capabilities.map((c) => [c.name, c.mode, c.consumption, c.tags])).toEqual([
      ['parse_pdf', 'handle', 'single', []],
      ['query:orders', 'handle', 'single', []],
    ]);
  });

  it('stores name@major as name + version, and keeps other majors of the same name', () => {
    const { descriptor } = validateDescriptor(
      good({ capabilities: [{ name: 'summarize@2' }, { name: 'summarize@1', version: '1.4' }, { name: 'summarize' }] }),
      rules,
    );
    expect(descriptor.capabilities.map((c) => [c.name, c.version])).toEqual([
      ['summarize', '2'],
      ['summarize', '1.4'],
      ['summarize', null],
    ]);
  });

  it('keeps unknown metadata as strings in extra', () => {
    const { descriptor } = validateDescriptor(good({ metadata: { max_concurrency: 2, team: 'ops', cost: 3, extra: { owner: 'me' } } }), rules);
    expect(descriptor.metadata.extra).toEqual({ owner: 'me', team: 'ops', cost: '3' });
  });

  it('reports single words without an object as warnings', () => {
    const { warnings } = validateDescriptor(good({ capabilities: [{ name: 'parse_pdf' }, { name: 'summarize' }] }), rules);
    expect(warnings).toEqual([{ field: 'capabilities[1].name', message: expect.stringMatching(/no object/) }]);
  });
});

describe('validateDescriptor refusals name the field (4104)', () => {
  it.each<[string, unknown, string]>([
    ['not an object', [1, 2], 'body'],
    ['missing agent_type', { agent_id: 'a.b' }, 'agent_type'],
    ['bad agent_type', { agent_type: 'has space' }, 'agent_type'],
    ['bad agent_id', { agent_type: 't', agent_id: 'a/b' }, 'agent_id'],
    ['ttl_s too small', { agent_type: 't', ttl_s: 1 }, 'ttl_s'],
    ['ttl_s not an integer', { agent_type: 't', ttl_s: 2.5 }, 'ttl_s'],
    ['capabilities not an array', { agent_type: 't', capabilities: 'parse_pdf' }, 'capabilities'],
    ['a capability not an object', { agent_type: 't', capabilities: [42] }, 'capabilities[0]'],
    ['missing name', { agent_type: 't', capabilities: [{ mode: 'handle' }] }, 'capabilities[0].name'],
    ['bad mode', { agent_type: 't', capabilities: [{ name: 'parse_pdf', mode: 'broadcast' }] }, 'capabilities[0].mode'],
    ['bad consumption', { agent_type: 't', capabilities: [{ name: 'parse_pdf', consumption: 'many' }] }, 'capabilities[0].consumption'],
    ['bad tags', { agent_type: 't', capabilities: [{ name: 'parse_pdf', tags: 'risk' }] }, 'capabilities[0].tags'],
    ['a tag with a comma', { agent_type: 't', capabilities: [{ name: 'parse_pdf', tags: ['ok', 'a,b'] }] }, 'capabilities[0].tags[1]'],
    ['scope not JSON object', { agent_type: 't', capabilities: [{ name: 'parse_pdf', scope: 'all' }] }, 'capabilities[0].scope'],
    ['version disagreeing with @major', { agent_type: 't', capabilities: [{ name: 'summarize@2', version: '3.0' }] }, 'capabilities[0].version'],
    ['endpoints.ws not a ws URL', { agent_type: 't', endpoints: { ws: 'http://x' } }, 'endpoints.ws'],
    ['endpoints.http not a URL', { agent_type: 't', endpoints: { http: 'nope' } }, 'endpoints.http'],
    ['metadata not an object', { agent_type: 't', metadata: 3 }, 'metadata'],
    ['max_concurrency 0', { agent_type: 't', metadata: { max_concurrency: 0 } }, 'metadata.max_concurrency'],
    ['max_concurrency not an integer', { agent_type: 't', metadata: { max_concurrency: 1.5 } }, 'metadata.max_concurrency'],
    ['bad domain', { agent_type: 't', metadata: { domain: 'a b' } }, 'metadata.domain'],
    ['negative weight', { agent_type: 't', metadata: { weight: -1 } }, 'metadata.weight'],
    ['unknown time zone', { agent_type: 't', metadata: { timezone: 'Mars/Olympus' } }, 'metadata.timezone'],
  ])('%s → %s', (_what, body, field) => {
    expect(fieldOf(body)).toBe(field);
  });

  it('names the offending capability by index: capabilities[2].name', () => {
    const e = refusal({ agent_type: 't', capabilities: [{ name: 'parse_pdf' }, { name: 'query:orders' }, { name: 'Parse-PDF' }] });
    expect(e.details?.field).toBe('capabilities[2].name');
    expect(e.message).toMatch(/^capabilities\[2\]\.name: /);
  });

  it('refuses vague names', () => {
    expect(fieldOf({ agent_type: 't', capabilities: [{ name: 'parse_pdf' }, { name: 'process' }] })).toBe('capabilities[1].name');
    expect(refusal({ agent_type: 't', capabilities: [{ name: 'misc' }] }).message).toMatch(/vague/);
  });

  it('refuses more than REACH_MAX_CAPABILITIES', () => {
    const caps = Array.from({ length: 11 }, (_, i) => ({ name: `parse_doc${i}` }));
    expect(fieldOf({ agent_type: 't', capabilities: caps })).toBe('capabilities');
    expect(() => validateDescriptor({ agent_type: 't', capabilities: caps.slice(0, 10) }, rules)).not.toThrow();
    expect(fieldOf({ agent_type: 't', capabilities: caps.slice(0, 3) }, { ...rules, maxCapabilities: 2 })).toBe('capabilities');
  });

  it('refuses duplicate capability names (same name and major)', () => {
    expect(fieldOf({ agent_type: 't', capabilities: [{ name: 'parse_pdf' }, { name: 'query:orders' }, { name: 'parse_pdf', mode: 'subscribe' }] })).toBe(
      'capabilities[2].name',
    );
    expect(fieldOf({ agent_type: 't', capabilities: [{ name: 'summarize@2' }, { name: 'summarize', version: '2.5' }] })).toBe('capabilities[1].name');
  });

  it('with a dictionary, unknown names are an error', () => {
    const dictionary = parseCapabilityDictionary(' parse_pdf , query:orders,');
    expect(dictionary).toEqual(new Set(['parse_pdf', 'query:orders']));
    const r = { ...rules, dictionary };
    expect(() => validateDescriptor({ agent_type: 't', capabilities: ['parse_pdf', 'query:orders'] }, r)).not.toThrow();
    const e = refusal({ agent_type: 't', capabilities: ['parse_pdf', 'translate_text'] }, r);
    expect(e.details?.field).toBe('capabilities[1].name');
    expect(e.message).toMatch(/dictionary/);
  });
});
