import { describe, expect, it } from 'vitest';
import { capabilityMatches, hasAllTags, majorOf, parseAddress } from '@reach/routing';
import { cap } from './fixtures.js';

describe('capability addresses (R-B1, R-A7)', () => {
  it('parses name@major and leaves other names whole', () => {
    expect(parseAddress('query:orders')).toEqual({ name: 'query:orders', major: undefined });
    expect(parseAddress('query:orders@2')).toEqual({ name: 'query:orders', major: 2 });
    expect(parseAddress('parse_pdf@v2')).toEqual({ name: 'parse_pdf@v2', major: undefined });
  });

  it('matches names exactly: no prefix, suffix, glob or case folding', () => {
    const orders = parseAddress('query:orders');
    expect(capabilityMatches(cap('query:orders'), orders, 'handle')).toBe(true);
    expect(capabilityMatches(cap('query:order_items'), orders, 'handle')).toBe(false);
    expect(capabilityMatches(cap('query:orders'), parseAddress('query:order_items'), 'handle')).toBe(false);
    expect(capabilityMatches(cap('query:orders'), parseAddress('query:order'), 'handle')).toBe(false);
    expect(capabilityMatches(cap('query:orders_v2'), orders, 'handle')).toBe(false);
    expect(capabilityMatches(cap('Query:Orders'), orders, 'handle')).toBe(false);
    expect(capabilityMatches(cap('query:*'), orders, 'handle')).toBe(false);
  });

  it('matches the mode: a subscribe capability never takes a capability-addressed message', () => {
    expect(capabilityMatches(cap('news', { mode: 'subscribe' }), parseAddress('news'), 'handle')).toBe(false);
    expect(capabilityMatches(cap('news', { mode: 'subscribe' }), parseAddress('news'), 'subscribe')).toBe(true);
  });

  it('pins a major version; an unpinned address takes any version', () => {
    const v2 = cap('query:orders', { version: '2.3.1' });
    const v1 = cap('query:orders', { version: '1.9' });
    const none = cap('query:orders');
    expect(capabilityMatches(v2, parseAddress('query:orders@2'), 'handle')).toBe(true);
    expect(capabilityMatches(v1, parseAddress('query:orders@2'), 'handle')).toBe(false);
    expect(capabilityMatches(none, parseAddress('query:orders@2'), 'handle')).toBe(false);
    for (const c of [v1, v2, none]) expect(capabilityMatches(c, parseAddress('query:orders'), 'handle')).toBe(true);
  });

  it('reads the major of common version spellings', () => {
    expect(majorOf('2')).toBe(2);
    expect(majorOf('2.1')).toBe(2);
    expect(majorOf('v3.0.0')).toBe(3);
    expect(majorOf('12.0.1-beta')).toBe(12);
    expect(majorOf(null)).toBeUndefined();
    expect(majorOf('latest')).toBeUndefined();
  });

  it('requires every wanted tag on the capability', () => {
    const c = cap('score', { tags: ['risk', 'high-priority'] });
    expect(hasAllTags(c, [])).toBe(true);
    expect(hasAllTags(c, ['risk'])).toBe(true);
    expect(hasAllTags(c, ['risk', 'high-priority'])).toBe(true);
    expect(hasAllTags(c, ['risk', 'eu'])).toBe(false);
  });
});
