import { describe, expect, it } from 'vitest';
import {
  capabilityIndexNames,
  capabilityMatches,
  capabilityNameProblem,
  capabilityNameWarning,
  isValidCapabilityName,
  majorOf,
  parseCapabilityName,
} from '@reach/agents';

// R-A1/R-A2/R-A7: the tag grammar, vague names, the dictionary, versioned names.
describe('capability name grammar', () => {
  it.each(['parse_pdf', 'query:orders', 'query:order_items', 'summarize@2', 'extract_tables_v2', 'translate:en_fr', 'ocr2_scan', 'summarize@0'])(
    'accepts %s',
    (name) => {
      expect(isValidCapabilityName(name)).toBe(true);
      expect(capabilityNameProblem(name)).toBeUndefined();
    },
  );

  it.each([
    '',
    'Parse_pdf',
    'parse-pdf',
    'parse pdf',
    '_parse',
    'parse_',
    'parse__pdf',
    '2parse',
    'query:orders:all',
    'query:',
    ':orders',
    'summarize@',
    'summarize@v2',
    'summarize@2.1',
    'summarize@01',
    'parse.pdf',
    'a'.repeat(129),
  ])('refuses %j with a grammar problem', (name) => {
    expect(isValidCapabilityName(name)).toBe(false);
    expect(capabilityNameProblem(name)?.kind).toBe('grammar');
  });

  it('refuses non-strings', () => {
    expect(capabilityNameProblem(42)?.kind).toBe('grammar');
    expect(capabilityNameProblem(undefined)?.kind).toBe('grammar');
  });

  it('parses base, major and words', () => {
    expect(parseCapabilityName('summarize@2')).toEqual({ base: 'summarize', major: 2, words: ['summarize'], colon: false });
    expect(parseCapabilityName('query:order_items')).toEqual({ base: 'query:order_items', major: undefined, words: ['query', 'order', 'items'], colon: true });
    expect(parseCapabilityName('nope-nope')).toBeUndefined();
  });
});

describe('vague names', () => {
  it.each(['do', 'process', 'handle', 'misc', 'general', 'task', 'run', 'do_task', 'handle_stuff', 'process:data', 'do@2'])('refuses %s as vague', (name) => {
    expect(capabilityNameProblem(name)?.kind).toBe('vague');
  });

  it('accepts a vague verb with a concrete object, and a concrete verb with a vague object', () => {
    expect(capabilityNameProblem('process_payment')).toBeUndefined();
    expect(capabilityNameProblem('handle:refunds')).toBeUndefined();
    expect(capabilityNameProblem('query:data')).toBeUndefined();
  });

  it('warns (but accepts) a single concrete word without an object', () => {
    expect(capabilityNameProblem('summarize')).toBeUndefined();
    expect(capabilityNameWarning('summarize')).toMatch(/no object/);
    expect(capabilityNameWarning('parse_pdf')).toBeUndefined();
  });
});

describe('capability dictionary (REACH_CAPABILITY_DICTIONARY)', () => {
  const dictionary = new Set(['parse_pdf', 'summarize']);
  it('refuses names outside the allow-list', () => {
    expect(capabilityNameProblem('query:orders', dictionary)?.kind).toBe('unknown');
  });
  it('accepts listed names, and pinned majors of listed bases', () => {
    expect(capabilityNameProblem('parse_pdf', dictionary)).toBeUndefined();
    expect(capabilityNameProblem('summarize@3', dictionary)).toBeUndefined();
  });
  it('still refuses grammar errors first', () => {
    expect(capabilityNameProblem('Parse_PDF', new Set(['Parse_PDF']))?.kind).toBe('grammar');
  });
});

describe('versions and matching (R-A7, R-B1)', () => {
  it('reads the major of a version string', () => {
    expect(majorOf('2')).toBe(2);
    expect(majorOf('2.1.0')).toBe(2);
    expect(majorOf('v3.0')).toBe(3);
    expect(majorOf('beta')).toBeUndefined();
    expect(majorOf(null)).toBeUndefined();
  });

  it('indexes a capability under its base and base@major', () => {
    expect(capabilityIndexNames({ name: 'parse_pdf', version: null })).toEqual(['parse_pdf']);
    expect(capabilityIndexNames({ name: 'summarize', version: '2.4.1' })).toEqual(['summarize', 'summarize@2']);
    expect(capabilityIndexNames({ name: 'summarize@3' })).toEqual(['summarize', 'summarize@3']);
  });

  it('matches exactly on the base: query:orders never matches query:order_items', () => {
    expect(capabilityMatches('query:orders', { name: 'query:orders' })).toBe(true);
    expect(capabilityMatches('query:orders', { name: 'query:order_items' })).toBe(false);
    expect(capabilityMatches('query:order', { name: 'query:orders' })).toBe(false);
  });

  it('a pinned major only matches that major; an unpinned request matches any', () => {
    const v2 = { name: 'summarize', version: '2.1' };
    expect(capabilityMatches('summarize', v2)).toBe(true);
    expect(capabilityMatches('summarize@2', v2)).toBe(true);
    expect(capabilityMatches('summarize@1', v2)).toBe(false);
    expect(capabilityMatches('summarize@1', { name: 'summarize', version: null })).toBe(false);
  });
});
