import { describe, expect, it } from 'vitest';
import { redactUrl, redactUrlsIn } from '@reach/core';
import { redactUrl as storeRedactUrl } from '@reach/store';

describe('redactUrl', () => {
  it.each([
    ['postgres://reach:s3cret@db:5432/reach?sslmode=verify-full', 'postgres://reach:***@db:5432/reach?sslmode=verify-full'],
    ['redis://:s3cret@127.0.0.1:6380/2', 'redis://:***@127.0.0.1:6380/2'],
    ['rediss://default:s3cret@cache:6380/0?ca_file=/etc/ca.pem', 'rediss://default:***@cache:6380/0?ca_file=/etc/ca.pem'],
    ['https://sr:s3cret@registry:8081', 'https://sr:***@registry:8081/'],
    ['postgres://reach@db/reach?password=s3cret', 'postgres://reach@db/reach?password=***'],
    ['redis://127.0.0.1:6379/0', 'redis://127.0.0.1:6379/0'],
  ])('%s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
    expect(redactUrl(url)).not.toContain('s3cret');
  });

  it('does not echo what it cannot parse', () => {
    expect(redactUrl('postgres://reach:s3cret@[bad')).toBe('<invalid url>');
  });

  it('is the same function @reach/store always exported', () => {
    expect(storeRedactUrl).toBe(redactUrl);
  });
});

describe('redactUrlsIn', () => {
  it('hides the password of every URL in a message', () => {
    const text = 'connect to postgres://reach:s3cret@db:5432/reach failed; fallback redis://:an0ther@cache:6379 too';
    const out = redactUrlsIn(text);
    expect(out).toBe('connect to postgres://reach:***@db:5432/reach failed; fallback redis://:***@cache:6379 too');
  });

  it('leaves URLs without a password alone', () => {
    expect(redactUrlsIn('GET http://127.0.0.1:7410/v1/messages and redis://cache:6379')).toBe('GET http://127.0.0.1:7410/v1/messages and redis://cache:6379');
  });
});
